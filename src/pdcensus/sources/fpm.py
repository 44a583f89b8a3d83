"""Forward Pass Metrics (FPM): per-step records an engine publishes over ZMQ PUB.

Three producers publish the same msgpack wire format (``msgspec`` structs, encoded as maps
keyed by field name) in a three-frame message ``[topic=b"", sequence (8 bytes big-endian),
payload]``; the publisher stamps ``counter_id`` with the same sequence. The schemas mirror,
field for field and in order:

- vLLM native (``--forward-pass-metrics-port``; rank N publishes on PORT+N):
  ``vllm-project/vllm`` ``vllm/v1/metrics/forward_pass_metrics.py`` -- ``version``,
  ``worker_id``, ``dp_rank``, ``counter_id``, ``timing_scope``, ``wall_time`` (CUDA time of the
  model step), ``scheduled_requests``, ``queued_requests``.
- Dynamo and SGLang: ``ai-dynamo/dynamo`` ``components/src/dynamo/common/forward_pass_metrics.py``
  and ``sgl-project/sglang`` ``python/sglang/srt/observability/forward_pass_metrics.py`` --
  the same without ``timing_scope``. Dynamo's ``wall_time`` runs from ``schedule()`` to
  ``update_from_output()``; SGLang's is the GPU time of the forward.
- Earlier Dynamo/SGLang trees: no ``version`` and no ``counter_id`` (:attr:`FpmDialect.LEGACY`).

``wall_time == 0`` with nothing scheduled is an idle heartbeat. A version other than
:data:`FPM_VERSION` is refused, as the producers' own decoders do.

:func:`record_fpm` subscribes and appends one JSON line per message (crash-safe: each line is
written whole and flushed, a torn last line is ignored on load); :func:`load_fpm` reads them.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import BinaryIO

import msgspec

from pdcensus.errors import DataError, RecordingParseError, RecordWriteError, UsageError
from pdcensus.extras import FPM_MODULES, require_extra

FPM_VERSION = 1
FPM_TOPIC = b""
RECORD_SCHEMA = "pdcensus/fpm/v1"
# A recorder buffers bursts rather than drop them: at ~100 steps/s a second is 100 messages.
RECEIVE_HIGH_WATER_MARK = 100_000


class ScheduledRequestMetrics(msgspec.Struct, frozen=True, gc=False):
    """Requests scheduled in one forward pass (producers' field order)."""

    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    sum_prefill_kv_tokens: int = 0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


class QueuedRequestMetrics(msgspec.Struct, frozen=True, gc=False):
    """Requests waiting after the pass (decode = preempted, back in the queue)."""

    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


class ForwardPassMetrics(msgspec.Struct, frozen=True, gc=False):
    """Dynamo / SGLang schema, version 1."""

    version: int = FPM_VERSION
    worker_id: str = ""
    dp_rank: int = 0
    counter_id: int = 0
    wall_time: float = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


class VllmForwardPassMetrics(msgspec.Struct, frozen=True, gc=False):
    """vLLM's native schema, version 1 (adds ``timing_scope``)."""

    version: int = FPM_VERSION
    worker_id: str = ""
    dp_rank: int = 0
    counter_id: int = 0
    timing_scope: str = "model_step_cuda"
    wall_time: float = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


class LegacyForwardPassMetrics(msgspec.Struct, frozen=True, gc=False):
    """The first Dynamo/SGLang schema: no version, no counter."""

    worker_id: str = ""
    dp_rank: int = 0
    wall_time: float = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


AnyForwardPassMetrics = ForwardPassMetrics | VllmForwardPassMetrics | LegacyForwardPassMetrics


class FpmDialect(str, Enum):
    """Which producer schema a payload follows (told apart by the keys it carries)."""

    VLLM = "vllm"
    DYNAMO = "dynamo"
    LEGACY = "legacy"


class _Wire(msgspec.Struct, gc=False):
    """Every field of every dialect; UNSET tells which keys the payload carried."""

    version: int | msgspec.UnsetType = msgspec.UNSET
    worker_id: str = ""
    dp_rank: int = 0
    counter_id: int | msgspec.UnsetType = msgspec.UNSET
    timing_scope: str | msgspec.UnsetType = msgspec.UNSET
    wall_time: float = 0.0
    scheduled_requests: ScheduledRequestMetrics = ScheduledRequestMetrics()
    queued_requests: QueuedRequestMetrics = QueuedRequestMetrics()


class FpmRecord(msgspec.Struct, frozen=True, gc=False):
    """One received message as stored: the payload plus envelope sequence and receive time."""

    received_unix_seconds: float
    sequence: int
    dialect: FpmDialect
    version: int | None
    worker_id: str
    dp_rank: int
    counter_id: int | None
    timing_scope: str | None
    wall_time: float
    scheduled_requests: ScheduledRequestMetrics
    queued_requests: QueuedRequestMetrics

    @property
    def is_heartbeat(self) -> bool:
        s = self.scheduled_requests
        return self.wall_time == 0.0 and s.num_prefill_requests == 0 and s.num_decode_requests == 0


_WIRE_DECODER = msgspec.msgpack.Decoder(_Wire)
_ENCODER = msgspec.msgpack.Encoder()


def encode_fpm(metrics: AnyForwardPassMetrics) -> bytes:
    """msgpack bytes exactly as the producers' ``msgspec.msgpack.Encoder`` writes them."""
    return _ENCODER.encode(metrics)


def fpm_frames(metrics: AnyForwardPassMetrics, sequence: int) -> tuple[bytes, bytes, bytes]:
    """The three ZMQ frames a producer sends for one message."""
    return FPM_TOPIC, sequence.to_bytes(8, "big"), encode_fpm(metrics)


def decode_fpm(payload: bytes, sequence: int = 0, received_unix_seconds: float = 0.0) -> FpmRecord:
    """Decode one payload of any dialect; raises DataError if malformed or of another version."""
    try:
        wire = _WIRE_DECODER.decode(payload)
    except msgspec.DecodeError as exc:
        raise DataError(f"malformed forward-pass-metrics payload: {exc}") from exc
    version = None if wire.version is msgspec.UNSET else int(wire.version)
    if version is not None and version != FPM_VERSION:
        raise DataError(
            f"forward-pass-metrics version {version} is not supported; supported: {FPM_VERSION}"
        )
    if wire.timing_scope is not msgspec.UNSET:
        dialect = FpmDialect.VLLM
    elif version is not None:
        dialect = FpmDialect.DYNAMO
    else:
        dialect = FpmDialect.LEGACY
    return FpmRecord(
        received_unix_seconds=received_unix_seconds,
        sequence=sequence,
        dialect=dialect,
        version=version,
        worker_id=wire.worker_id,
        dp_rank=wire.dp_rank,
        counter_id=None if wire.counter_id is msgspec.UNSET else int(wire.counter_id),
        timing_scope=None if wire.timing_scope is msgspec.UNSET else str(wire.timing_scope),
        wall_time=wire.wall_time,
        scheduled_requests=wire.scheduled_requests,
        queued_requests=wire.queued_requests,
    )


def decode_frames(frames: list[bytes], received_unix_seconds: float = 0.0) -> FpmRecord:
    """Decode a ``[topic, sequence, payload]`` message; raises DataError on a bad envelope."""
    if len(frames) != 3:
        raise DataError(f"forward-pass-metrics message has {len(frames)} frames; expected 3")
    topic, seq_bytes, payload = frames
    if topic != FPM_TOPIC or len(seq_bytes) != 8:
        raise DataError(f"malformed forward-pass-metrics envelope (topic {topic!r}, "
                        f"{len(seq_bytes)}-byte sequence; expected b'' and 8 bytes)")
    return decode_fpm(payload, int.from_bytes(seq_bytes, "big"), received_unix_seconds)


def normalize_address(address: str) -> str:
    """``tcp://host:port``, ``ipc://path`` or the shorthand ``host:port`` / ``port``."""
    text = address.strip()
    if text.startswith(("tcp://", "ipc://", "inproc://")):
        return text
    host, _, port = text.rpartition(":")
    if "/" not in host and port.isdigit() and 0 < int(port) < 65536:
        return f"tcp://{host or '127.0.0.1'}:{port}"
    raise UsageError(
        f"bad forward-pass-metrics address {address!r}; use tcp://HOST:PORT, ipc://PATH, "
        "HOST:PORT or PORT (vLLM publishes on --forward-pass-metrics-port)"
    )


@dataclass(frozen=True)
class FpmRecordingSummary:
    """What one :func:`record_fpm` run received and stored."""

    path: Path
    received: int
    stored: int
    heartbeats: int
    rejected: int
    sequence_gaps: int
    duration_seconds: float


def record_fpm(
    address: str,
    out_path: str | Path,
    duration_seconds: float,
    *,
    max_records: int | None = None,
    on_record: Callable[[FpmRecord], None] | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.time,
) -> FpmRecordingSummary:
    """Subscribe to ``address`` and append every message to ``out_path`` as JSON lines.

    Stops after ``duration_seconds``, ``max_records`` stored, or when ``stop`` is set.
    Messages that fail to decode are counted in ``rejected`` and not stored; gaps in the
    envelope sequence (the producer drops under back-pressure, a late subscriber misses the
    start) are counted.
    """
    require_extra("recording Forward Pass Metrics", "fpm", FPM_MODULES)
    import zmq  # here, not at the top: the fpm extra is optional

    endpoint = normalize_address(address)
    path = Path(out_path)
    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    received = stored = heartbeats = rejected = gaps = 0
    last_seq: int | None = None
    start = clock()
    try:
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.RCVHWM, RECEIVE_HIGH_WATER_MARK)
        socket.setsockopt(zmq.SUBSCRIBE, FPM_TOPIC)
        try:
            socket.connect(endpoint)
        except zmq.ZMQError as exc:
            raise UsageError(f"cannot subscribe to {endpoint!r}: {exc}") from exc
        try:
            with open(path, "ab") as fh:
                header = {"schema": RECORD_SCHEMA, "address": endpoint, "started_unix_seconds": start}
                _append(fh, msgspec.json.encode(header))
                deadline = start + duration_seconds
                while (remaining := deadline - clock()) > 0:
                    if (max_records is not None and stored >= max_records) or (stop and stop.is_set()):
                        break
                    if not socket.poll(timeout=max(1, min(50, int(remaining * 1000)))):
                        continue
                    frames = socket.recv_multipart()
                    received += 1
                    try:
                        record = decode_frames(frames, clock())
                    except DataError:
                        rejected += 1
                        continue
                    if last_seq is not None and record.sequence > last_seq + 1:
                        gaps += record.sequence - last_seq - 1
                    last_seq = record.sequence
                    heartbeats += record.is_heartbeat
                    _append(fh, msgspec.json.encode(record))
                    stored += 1
                    if on_record is not None:
                        on_record(record)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            what = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else "write failed"
            raise RecordWriteError(f"{path}: {what} ({errno.errorcode.get(exc.errno or 0, '?')}: {exc.strerror}); "
                                   f"{stored} record(s) written before it") from None
    finally:
        socket.close(linger=0)
        context.term()
    return FpmRecordingSummary(path, received, stored, heartbeats, rejected, gaps, clock() - start)


def _append(fh: BinaryIO, line: bytes) -> None:
    # one write per whole line, flushed at once: a crash leaves at most one torn last line
    fh.write(line + b"\n")
    fh.flush()


_RECORD_DECODER = msgspec.json.Decoder(FpmRecord)


def iter_fpm(path: str | Path) -> Iterator[FpmRecord]:
    """The records of a recording in file order (header lines skipped, torn last line ignored)."""
    p = Path(path)
    try:
        lines = p.read_bytes().split(b"\n")
    except OSError as exc:
        raise DataError(f"cannot read forward-pass-metrics recording {str(p)!r}: {exc}") from exc
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    seen_header = False
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if line.startswith(b'{"schema"'):
            header = msgspec.json.decode(line)
            if header.get("schema") != RECORD_SCHEMA:
                raise RecordingParseError(str(p), number, f"unknown schema {header.get('schema')!r}; "
                                          f"expected {RECORD_SCHEMA!r}")
            seen_header = True
            continue
        if not seen_header:
            raise RecordingParseError(str(p), number, f"no {RECORD_SCHEMA!r} header line first")
        try:
            yield _RECORD_DECODER.decode(line)
        except msgspec.DecodeError as exc:
            if number - 1 == last:  # the write a crash interrupted
                return
            raise RecordingParseError(str(p), number, str(exc)) from exc


def load_fpm(path: str | Path) -> list[FpmRecord]:
    """Every record of a recording written by :func:`record_fpm`."""
    return list(iter_fpm(path))
