"""Publish the simulator's engine steps as Forward Pass Metrics over ZMQ PUB.

Built the way the producers build them, so a recorder cannot tell the simulator from an
engine: per-request counts, sums and *population* variances by Welford's single pass (the
producers' ``WelfordAccumulator``), a struct of the producer's schema
(:mod:`pdcensus.sources.fpm`), ``counter_id`` stamped with the publisher's sequence
(``msgspec.structs.replace``), and the three frames ``[b"", sequence (8 bytes big-endian),
msgpack payload]`` sent with ``NOBLOCK`` (a full queue drops, never blocks the engine).
References: ``vllm-project/vllm`` ``vllm/v1/metrics/forward_pass_metrics.py``
(``ZmqForwardPassMetricsPublisher``), ``sgl-project/sglang``
``python/sglang/srt/observability/forward_pass_metrics.py`` (``_FpmPublisherThread``).

Unlike the producers (``tcp://*:PORT``) the simulator binds 127.0.0.1 only, and it sends on
the caller's thread: virtual time has no hot path to protect. The engine
(:mod:`pdcensus.sim.engine`) advances in runs of identical steps (``Run``: a ``StepShape``,
its ``step_seconds`` and ``steps``); :meth:`FpmPublisher.publish_run` publishes one run as
that many FPM messages, which is what an engine publishing per forward pass would send.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import count
from types import TracebackType
from typing import TypedDict

import msgspec

from pdcensus.sim.cost_model import StepShape
from pdcensus.sources.fpm import (
    AnyForwardPassMetrics,
    FpmDialect,
    ForwardPassMetrics,
    LegacyForwardPassMetrics,
    QueuedRequestMetrics,
    ScheduledRequestMetrics,
    VllmForwardPassMetrics,
    fpm_frames,
    normalize_address,
)

DEFAULT_ADDRESS = "tcp://127.0.0.1:0"


def welford(values: Iterable[int]) -> tuple[int, int, float]:
    """``(count, total, population variance)`` in the producers' single-pass order."""
    n, total, mean, m2 = 0, 0, 0.0, 0.0
    for v in values:
        n += 1
        total += v
        delta = v - mean
        mean += delta / n
        m2 += delta * (v - mean)
    return n, total, (m2 / n if n else 0.0)


def scheduled_metrics(
    prefill_chunk_tokens: Sequence[int] = (),
    prefill_prompt_lengths: Sequence[int] = (),
    prefill_kv_tokens: Sequence[int] = (),
    decode_kv_tokens: Sequence[int] = (),
) -> ScheduledRequestMetrics:
    """Scheduled requests of one pass: per prefill request its chunk, prompt length and
    already-computed tokens; per decode request its context length."""
    n_prefill, _, var_prompt = welford(prefill_prompt_lengths)
    n_decode, sum_decode_kv, var_decode_kv = welford(decode_kv_tokens)
    return ScheduledRequestMetrics(
        num_prefill_requests=max(n_prefill, len(prefill_chunk_tokens)),
        sum_prefill_tokens=sum(prefill_chunk_tokens),
        var_prefill_length=var_prompt,
        sum_prefill_kv_tokens=sum(prefill_kv_tokens),
        num_decode_requests=n_decode,
        sum_decode_kv_tokens=sum_decode_kv,
        var_decode_kv_tokens=var_decode_kv,
    )


def queued_metrics(
    waiting_prompt_lengths: Sequence[int] = (), preempted_kv_tokens: Sequence[int] = ()
) -> QueuedRequestMetrics:
    """Queued requests after the pass: waiting prompts, and preempted decoders' contexts."""
    n_prefill, sum_prefill, var_prefill = welford(waiting_prompt_lengths)
    n_decode, sum_decode, var_decode = welford(preempted_kv_tokens)
    return QueuedRequestMetrics(n_prefill, sum_prefill, var_prefill, n_decode, sum_decode, var_decode)


class _CommonFields(TypedDict):
    """The fields every dialect's struct shares."""

    worker_id: str
    dp_rank: int
    wall_time: float
    scheduled_requests: ScheduledRequestMetrics
    queued_requests: QueuedRequestMetrics


@dataclass(frozen=True)
class FpmStep:
    """One engine step as FPM describes it."""

    wall_time_seconds: float
    scheduled: ScheduledRequestMetrics
    queued: QueuedRequestMetrics = QueuedRequestMetrics()


def fpm_step_from_shape(
    shape: StepShape,
    wall_time_seconds: float,
    prefill_kv_tokens: int = 0,
    queued: QueuedRequestMetrics | None = None,
) -> FpmStep:
    """An FPM step from the simulator's :class:`~pdcensus.sim.cost_model.StepShape`.

    A step carries at most one prefill chunk, so the prefill variance is exactly 0. The shape
    keeps only the decoders' summed context, so ``var_decode_kv_tokens`` is published as 0.
    """
    chunk = shape.prefill_tokens > 0
    scheduled = ScheduledRequestMetrics(
        num_prefill_requests=1 if chunk else 0,
        sum_prefill_tokens=shape.prefill_tokens,
        var_prefill_length=0.0,
        sum_prefill_kv_tokens=prefill_kv_tokens if chunk else 0,
        num_decode_requests=shape.decode_rows,
        sum_decode_kv_tokens=shape.context_tokens,
        var_decode_kv_tokens=0.0,
    )
    return FpmStep(wall_time_seconds, scheduled, queued or QueuedRequestMetrics())


class FpmPublisher:
    """A ZMQ PUB socket sending FPM messages in one producer's dialect."""

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        dialect: FpmDialect = FpmDialect.VLLM,
        worker_id: str = "sim-0",
        dp_rank: int = 0,
        timing_scope: str = "model_step_cuda",
        send_high_water_mark: int = 1000,
    ) -> None:
        import zmq

        self._zmq = zmq
        self.dialect = dialect
        self.worker_id = worker_id
        self.dp_rank = dp_rank
        self.timing_scope = timing_scope
        self.dropped = 0
        self._sequence = count()
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.PUB)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.SNDHWM, send_high_water_mark)
        self._socket.bind(normalize_address(address))
        self.endpoint: str = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)

    def metrics_for(self, step: FpmStep) -> AnyForwardPassMetrics:
        """The struct the producer of this dialect would build for the step (counter unset)."""
        common: _CommonFields = {
            "worker_id": self.worker_id,
            "dp_rank": self.dp_rank,
            "wall_time": step.wall_time_seconds,
            "scheduled_requests": step.scheduled,
            "queued_requests": step.queued,
        }
        if self.dialect is FpmDialect.VLLM:
            return VllmForwardPassMetrics(timing_scope=self.timing_scope, **common)
        if self.dialect is FpmDialect.DYNAMO:
            return ForwardPassMetrics(**common)
        return LegacyForwardPassMetrics(**common)

    def send(self, metrics: AnyForwardPassMetrics) -> int:
        """Stamp ``counter_id`` (where the dialect has one) and send; returns the sequence."""
        sequence = next(self._sequence)
        if not isinstance(metrics, LegacyForwardPassMetrics):
            metrics = msgspec.structs.replace(metrics, counter_id=sequence)
        try:
            self._socket.send_multipart(fpm_frames(metrics, sequence), flags=self._zmq.NOBLOCK)
        except self._zmq.Again:
            self.dropped += 1
        return sequence

    def publish(self, step: FpmStep) -> int:
        return self.send(self.metrics_for(step))

    def publish_run(self, shape: StepShape, step_seconds: float, steps: int) -> list[int]:
        """``steps`` identical steps of one engine run (the engine advances in such runs)."""
        step = fpm_step_from_shape(shape, step_seconds)
        return [self.publish(step) for _ in range(steps)]

    def heartbeat(self) -> int:
        """The idle message producers send when nothing ran for a second (all zeros)."""
        return self.publish(FpmStep(0.0, ScheduledRequestMetrics()))

    def close(self) -> None:
        self._socket.close(linger=0)
        self._context.term()

    def __enter__(self) -> FpmPublisher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
