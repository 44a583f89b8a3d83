"""The exact step ledger from Forward Pass Metrics: every step, not per-scrape counters.

An FPM record is one forward pass with its wall time and what it scheduled, so the ledger
needs no counter arithmetic: a step that scheduled a prefill request is a *chunk step* (with
or without decode rows beside it), a step with decode requests only is a *decode-only step*,
an idle heartbeat is no step. From that:

- :func:`fpm_ledger` -- mean decode-only step, mean chunk step, the chunk steps' share of
  steps and of step time, per worker (``worker_id``, ``dp_rank``) and over all;
- :func:`bucket_steps_by_prefill` -- steps bucketed by the prefill tokens they carried: the
  step time a decode row beside that much prefill waits, and its per-stream token rate;
- :func:`decode_steps_by_time_since_chunk` -- decode-only steps bucketed by the time since
  the worker's last chunk step: flat = step-time sharing only, inflated for minutes after a
  chunk = something was evicted (the runbook's lagged tail, seen step by step).

Sequence gaps (messages the producer dropped or the subscriber missed) are counted, because
a ledger over a lossy stream is a sample, not a census.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from pdcensus.errors import NotEnoughDataError
from pdcensus.sources.fpm import FpmRecord

DEFAULT_PREFILL_EDGES = (0, 512, 2048, 8192)
DEFAULT_LAG_EDGES_SECONDS = (0.0, 10.0, 120.0, 840.0)  # <10 s, 10 s-2 min, 2-14 min, >14 min


class StepKind(str, Enum):
    """What one forward pass carried."""

    CHUNK = "chunk"
    DECODE_ONLY = "decode-only"
    IDLE = "idle"


def step_kind(record: FpmRecord) -> StepKind:
    s = record.scheduled_requests
    if s.num_prefill_requests > 0:
        return StepKind.CHUNK
    if s.num_decode_requests > 0:
        return StepKind.DECODE_ONLY
    return StepKind.IDLE


@dataclass(frozen=True)
class FpmLedger:
    """The ledger of one worker (or of all, ``worker`` = "all")."""

    worker: str
    steps: int
    decode_steps: int
    chunk_steps: int
    step_seconds: float
    decode_step_seconds: float
    chunk_step_seconds: float
    decode_step_mean_seconds: float
    chunk_step_mean_seconds: float
    chunk_share_of_steps: float
    chunk_share_of_step_seconds: float
    heartbeats: int
    sequence_gaps: int
    dialects: tuple[str, ...]
    timing_scopes: tuple[str, ...]


@dataclass(frozen=True)
class StepBucket:
    """Steps whose prefill tokens fall in ``[low, high)``; ``low = high = 0`` is decode-only."""

    low_tokens: int
    high_tokens: float
    steps: int
    mean_step_seconds: float
    mean_decode_rows: float
    per_stream_tokens_per_second: float  # a decode row gets one token per step


@dataclass(frozen=True)
class LagBucket:
    """Decode-only steps at ``[low, high)`` seconds after the worker's last chunk step."""

    low_seconds: float
    high_seconds: float
    steps: int
    mean_step_seconds: float


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else float("nan")


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else float("nan")


def _worker(record: FpmRecord) -> str:
    return f"{record.worker_id or '-'}/dp{record.dp_rank}"


def _gaps(records: Sequence[FpmRecord]) -> int:
    gaps, last = 0, None
    for r in records:
        if last is not None and r.sequence > last + 1:
            gaps += r.sequence - last - 1
        last = r.sequence
    return gaps


def _ledger_of(worker: str, records: Sequence[FpmRecord]) -> FpmLedger:
    kinds = [step_kind(r) for r in records]
    wall = np.array([r.wall_time for r in records], dtype=float)
    is_chunk = np.array([k is StepKind.CHUNK for k in kinds], dtype=bool)
    is_decode = np.array([k is StepKind.DECODE_ONLY for k in kinds], dtype=bool)
    decode_s, chunk_s = float(wall[is_decode].sum()), float(wall[is_chunk].sum())
    n_decode, n_chunk = int(is_decode.sum()), int(is_chunk.sum())
    return FpmLedger(
        worker=worker,
        steps=n_decode + n_chunk,
        decode_steps=n_decode,
        chunk_steps=n_chunk,
        step_seconds=decode_s + chunk_s,
        decode_step_seconds=decode_s,
        chunk_step_seconds=chunk_s,
        decode_step_mean_seconds=_mean(wall[is_decode]),
        chunk_step_mean_seconds=_mean(wall[is_chunk]),
        chunk_share_of_steps=_share(n_chunk, n_decode + n_chunk),
        chunk_share_of_step_seconds=_share(chunk_s, decode_s + chunk_s),
        heartbeats=sum(1 for r in records if r.is_heartbeat),
        sequence_gaps=_gaps(records),
        dialects=tuple(sorted({r.dialect.value for r in records})),
        timing_scopes=tuple(sorted({r.timing_scope for r in records if r.timing_scope})),
    )


def _by_worker(records: Sequence[FpmRecord]) -> dict[str, list[FpmRecord]]:
    out: dict[str, list[FpmRecord]] = {}
    for r in records:
        out.setdefault(_worker(r), []).append(r)
    return out


def fpm_ledger(records: Sequence[FpmRecord]) -> tuple[FpmLedger, list[FpmLedger]]:
    """``(all workers, per worker)``; raises NotEnoughDataError when no step was recorded."""
    groups = _by_worker(records)
    per_worker = [_ledger_of(name, rs) for name, rs in sorted(groups.items())]
    overall = _ledger_of("all", records)
    overall = replace(overall, sequence_gaps=sum(w.sequence_gaps for w in per_worker))
    if overall.steps == 0:
        raise NotEnoughDataError(
            f"no forward pass in {len(records)} forward-pass-metrics records "
            f"({overall.heartbeats} idle heartbeats); record while the endpoint serves traffic"
        )
    return overall, per_worker


def bucket_steps_by_prefill(
    records: Sequence[FpmRecord], edges: Sequence[int] = DEFAULT_PREFILL_EDGES
) -> list[StepBucket]:
    """Steps bucketed by prefill tokens: decode-only first, then ``[edges[i], edges[i+1])``."""
    steps = [r for r in records if step_kind(r) is not StepKind.IDLE]
    tokens = np.array([r.scheduled_requests.sum_prefill_tokens for r in steps], dtype=float)
    chunk = np.array([r.scheduled_requests.num_prefill_requests > 0 for r in steps], dtype=bool)
    wall = np.array([r.wall_time for r in steps], dtype=float)
    rows = np.array([r.scheduled_requests.num_decode_requests for r in steps], dtype=float)
    bounds = [float(e) for e in edges] + [float("inf")]
    spans: list[tuple[int, float, np.ndarray]] = [(0, 0.0, ~chunk)]
    for low, high in zip(bounds[:-1], bounds[1:]):
        spans.append((int(low), high, chunk & (tokens >= low) & (tokens < high)))
    out = []
    for low, high, sel in spans:
        mean_step = _mean(wall[sel])
        with_rows = sel & (rows > 0)
        rate = 1.0 / _mean(wall[with_rows]) if with_rows.any() else float("nan")
        out.append(StepBucket(low, high, int(sel.sum()), mean_step, _mean(rows[sel]), rate))
    return out


def decode_steps_by_time_since_chunk(
    records: Sequence[FpmRecord], edges_seconds: Sequence[float] = DEFAULT_LAG_EDGES_SECONDS
) -> list[LagBucket]:
    """Decode-only steps bucketed by seconds since their worker's previous chunk step.

    Time is the receive time the recorder stamped (the payload carries none); steps before a
    worker's first chunk step have no lag and are left out.
    """
    lags: list[float] = []
    walls: list[float] = []
    for rs in _by_worker(records).values():
        last_chunk: float | None = None
        for r in sorted(rs, key=lambda x: (x.received_unix_seconds, x.sequence)):
            kind = step_kind(r)
            if kind is StepKind.CHUNK:
                last_chunk = r.received_unix_seconds
            elif kind is StepKind.DECODE_ONLY and last_chunk is not None:
                lags.append(r.received_unix_seconds - last_chunk)
                walls.append(r.wall_time)
    lag, wall = np.array(lags, dtype=float), np.array(walls, dtype=float)
    bounds = [float(e) for e in edges_seconds] + [float("inf")]
    out = []
    for low, high in zip(bounds[:-1], bounds[1:]):
        sel = (lag >= low) & (lag < high)
        out.append(LagBucket(low, high, int(sel.sum()), _mean(wall[sel])))
    return out
