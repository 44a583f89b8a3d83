"""FPM payloads built the way each producer builds them decode to the right records.

The producer structs below are written out here from the producers' files (field names, order,
defaults, ``frozen=True, gc=False``), independently of ``pdcensus.sources.fpm``:
vllm ``vllm/v1/metrics/forward_pass_metrics.py``, sglang
``python/sglang/srt/observability/forward_pass_metrics.py`` and dynamo
``components/src/dynamo/common/forward_pass_metrics.py`` (current and first revision).
"""

from __future__ import annotations

import msgspec
import pytest

from pdcensus.errors import DataError, UsageError
from pdcensus.sim.fpm_publisher import FpmPublisher, FpmStep, scheduled_metrics, welford
from pdcensus.sources import fpm
from pdcensus.sources.fpm import FpmDialect, decode_fpm, decode_frames, normalize_address


class Sched(msgspec.Struct, frozen=True, gc=False):
    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    sum_prefill_kv_tokens: int = 0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


class Queued(msgspec.Struct, frozen=True, gc=False):
    num_prefill_requests: int = 0
    sum_prefill_tokens: int = 0
    var_prefill_length: float = 0.0
    num_decode_requests: int = 0
    sum_decode_kv_tokens: int = 0
    var_decode_kv_tokens: float = 0.0


class VllmFpm(msgspec.Struct, frozen=True, gc=False):
    version: int = 1
    worker_id: str = ""
    dp_rank: int = 0
    counter_id: int = 0
    timing_scope: str = "execute_model_cuda"
    wall_time: float = 0.0
    scheduled_requests: Sched = Sched()
    queued_requests: Queued = Queued()


class DynamoFpm(msgspec.Struct, frozen=True, gc=False):
    version: int = 1
    worker_id: str = ""
    dp_rank: int = 0
    counter_id: int = 0
    wall_time: float = 0.0
    scheduled_requests: Sched = Sched()
    queued_requests: Queued = Queued()


class FirstDynamoFpm(msgspec.Struct, frozen=True, gc=False):
    worker_id: str = ""
    dp_rank: int = 0
    wall_time: float = 0.0
    scheduled_requests: Sched = Sched()
    queued_requests: Queued = Queued()


# vLLM's own golden wire payload for the model-step timing scope (its unit tests).
GOLDEN_VLLM_V1 = {
    "version": 1, "worker_id": "worker-0", "dp_rank": 2, "counter_id": 3,
    "timing_scope": "model_step_cuda", "wall_time": 0.004,
    "scheduled_requests": {"num_prefill_requests": 1, "sum_prefill_tokens": 16, "var_prefill_length": 0.0,
                           "sum_prefill_kv_tokens": 0, "num_decode_requests": 0, "sum_decode_kv_tokens": 0,
                           "var_decode_kv_tokens": 0.0},
    "queued_requests": {"num_prefill_requests": 0, "sum_prefill_tokens": 0, "var_prefill_length": 0.0,
                        "num_decode_requests": 2, "sum_decode_kv_tokens": 128, "var_decode_kv_tokens": 0.0},
}

SCHED = Sched(2, 3000, 250000.0, 512, 31, 40960, 1234.5)
QUEUED = Queued(4, 9000, 10.0, 1, 700, 0.0)


def producer_frames(metrics: msgspec.Struct, seq: int) -> list[bytes]:
    """What the producers' publisher threads send: replace counter_id, then [b"", seq, payload]."""
    if "counter_id" in metrics.__struct_fields__:
        metrics = msgspec.structs.replace(metrics, counter_id=seq)
    return [b"", seq.to_bytes(8, "big"), msgspec.msgpack.Encoder().encode(metrics)]


@pytest.mark.parametrize(
    ("metrics", "dialect"),
    [
        pytest.param(VllmFpm(worker_id="w", dp_rank=1, wall_time=0.25, scheduled_requests=SCHED,
                             queued_requests=QUEUED), FpmDialect.VLLM, id="vllm"),
        pytest.param(DynamoFpm(worker_id="w", dp_rank=1, wall_time=0.25, scheduled_requests=SCHED,
                               queued_requests=QUEUED), FpmDialect.DYNAMO, id="dynamo-sglang"),
        pytest.param(FirstDynamoFpm(worker_id="w", dp_rank=1, wall_time=0.25, scheduled_requests=SCHED,
                                    queued_requests=QUEUED), FpmDialect.LEGACY, id="first-revision"),
    ],
)
def test_each_producers_message_decodes_to_its_fields(metrics: msgspec.Struct, dialect: FpmDialect) -> None:
    record = decode_frames(producer_frames(metrics, 41), received_unix_seconds=123.0)
    assert record.dialect is dialect
    assert (record.sequence, record.received_unix_seconds) == (41, 123.0)
    assert (record.worker_id, record.dp_rank, record.wall_time) == ("w", 1, 0.25)
    assert msgspec.structs.asdict(record.scheduled_requests) == msgspec.structs.asdict(SCHED)
    assert msgspec.structs.asdict(record.queued_requests) == msgspec.structs.asdict(QUEUED)
    assert record.counter_id == (None if dialect is FpmDialect.LEGACY else 41)
    assert record.timing_scope == ("execute_model_cuda" if dialect is FpmDialect.VLLM else None)


def test_vllms_golden_payload_decodes_field_for_field() -> None:
    record = decode_fpm(msgspec.msgpack.encode(GOLDEN_VLLM_V1), sequence=3)
    assert record.dialect is FpmDialect.VLLM and record.version == 1 and record.counter_id == 3
    assert record.timing_scope == "model_step_cuda" and record.wall_time == 0.004
    assert msgspec.structs.asdict(record.scheduled_requests) == GOLDEN_VLLM_V1["scheduled_requests"]
    assert msgspec.structs.asdict(record.queued_requests) == GOLDEN_VLLM_V1["queued_requests"]


@pytest.mark.parametrize(
    ("producer", "dialect", "scope"),
    [
        pytest.param(VllmFpm, FpmDialect.VLLM, "execute_model_cuda", id="vllm"),
        pytest.param(DynamoFpm, FpmDialect.DYNAMO, None, id="dynamo"),
        pytest.param(FirstDynamoFpm, FpmDialect.LEGACY, None, id="legacy"),
    ],
)
def test_the_simulators_publisher_writes_the_producers_bytes(producer: type, dialect: FpmDialect,
                                                              scope: str | None) -> None:
    decode_kv = (1000, 1200, 5000)
    step = FpmStep(0.0371, scheduled_metrics((512,), (4096,), (3584,), decode_kv))
    with FpmPublisher(dialect=dialect, worker_id="sim-0", dp_rank=0,
                      timing_scope=scope or "model_step_cuda") as pub:
        ours = fpm.encode_fpm(msgspec.structs.replace(pub.metrics_for(step), counter_id=7)
                              if dialect is not FpmDialect.LEGACY else pub.metrics_for(step))
    n, total, var = welford(decode_kv)
    sched = Sched(1, 512, 0.0, 3584, n, total, var)
    kwargs = {"worker_id": "sim-0", "wall_time": 0.0371, "scheduled_requests": sched}
    if dialect is not FpmDialect.LEGACY:
        kwargs["counter_id"] = 7
    theirs = msgspec.msgpack.Encoder().encode(producer(**kwargs))
    assert ours == theirs


def test_welford_gives_the_population_variance() -> None:
    values = [3, 7, 7, 19]
    mean = sum(values) / 4
    assert welford(values) == (4, 36, pytest.approx(sum((v - mean) ** 2 for v in values) / 4))
    assert welford([]) == (0, 0, 0.0)


def test_a_heartbeat_is_recognised() -> None:
    record = decode_fpm(msgspec.msgpack.encode(DynamoFpm(worker_id="w")))
    assert record.is_heartbeat


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        pytest.param([b"", b"\x00" * 8], "2 frames", id="two-frames"),
        pytest.param([b"kv", b"\x00" * 8, b"\x80"], "envelope", id="topic"),
        pytest.param([b"", b"\x00" * 4, b"\x80"], "envelope", id="short-sequence"),
        pytest.param([b"", b"\x00" * 8, b"\xc1garbage"], "malformed", id="garbage"),
        pytest.param([b"", b"\x00" * 8, msgspec.msgpack.encode({"version": 2})], "supported: 1", id="version-2"),
        pytest.param([b"", b"\x00" * 8, msgspec.msgpack.encode({"wall_time": "slow"})], "malformed",
                     id="wrong-type"),
    ],
)
def test_bad_messages_are_refused_with_the_reason(frames: list[bytes], match: str) -> None:
    with pytest.raises(DataError, match=match):
        decode_frames(frames)


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        pytest.param("tcp://10.0.0.2:20380", "tcp://10.0.0.2:20380", id="tcp"),
        pytest.param("10.0.0.2:20380", "tcp://10.0.0.2:20380", id="host-port"),
        pytest.param("20380", "tcp://127.0.0.1:20380", id="port"),
    ],
)
def test_addresses_normalize(address: str, expected: str) -> None:
    assert normalize_address(address) == expected


@pytest.mark.parametrize("address", [pytest.param("http://x:1", id="http"), pytest.param("x:99999", id="port-range"),
                                     pytest.param("", id="empty")])
def test_bad_addresses_are_refused_with_the_valid_forms(address: str) -> None:
    with pytest.raises(UsageError, match="tcp://HOST:PORT"):
        normalize_address(address)
