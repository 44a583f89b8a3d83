"""The inter-token latency a change of batch explains: the before window's decode-only step on its batch.

A KV-capacity arm (more KV blocks, more device memory, a higher ``--max-num-seqs``) exists to let
more sequences run at once, and every decode-only step grows with the rows in it: the ITL after
such an arm rises with the batch it admitted, by a law the before window already measured. The
gate would otherwise call that rise a cost nobody predicted: on live vLLM 0.32 (CPU, 24 -> 96 KV
blocks of 128 tokens, 10 streams), preemptions fell from 380 to 0 per hour and the idle ITL p50
rose x2.39 as the batch went from 3.6 to 9 running: exit 5, "engaged-off-prediction".

So for these arms the gate allows each bucket's ITL the ratio of the before window's step law at
the two batches: ``(base + per_row x B_after) / (base + per_row x B_before)``, the law a least-squares
line through the before window's decode-only steps (the step ledger's, per interval) on its
batch (running, averaged over each interval's two ends), the batches the two windows' mean
running where decoders ran. A batch that fell allows no rise. None without a ledger timeline,
ten timed intervals, or a batch that varied: the gate then allows no rise, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.advice.knobs import Dial, Knob
from pdcensus.census.ledger import interval_batch
from pdcensus.census.model import CensusReport
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal

MIN_INTERVALS = 10  # timed decode-only intervals the line is fitted through
MIN_BATCH_SPREAD = 0.5  # running must span at least this many sequences (sd) for a slope


@dataclass(frozen=True)
class BatchAllowance:
    """The ITL ratio a change of batch explains, and how it was found."""

    ratio: float
    basis: str


def applies(knob: Knob) -> bool:
    """Arms whose purpose is a different batch: the KV-capacity dial (vLLM's --max-num-seqs is on it too)."""
    return knob.dial is Dial.KV_CAPACITY


def _batch(signals: ShapeSignals) -> np.ndarray | None:
    running = signals.gauge(Signal.RUNNING)
    if running is None:
        return None
    return interval_batch(running)


def step_law(report: CensusReport, signals: ShapeSignals) -> tuple[float, float, int] | None:
    """``(base, per_row, intervals)``: the decode-only step fitted on the batch, or None."""
    timeline = report.ledger.timeline if report.ledger.available else None
    batch = _batch(signals)
    if timeline is None or batch is None:
        return None
    step = np.asarray(timeline.decode_step_seconds, dtype=np.float64)
    if step.size != batch.size:
        return None
    ok = np.isfinite(step) & (step > 0) & np.isfinite(batch) & (batch > 0)
    if int(ok.sum()) < MIN_INTERVALS or float(np.std(batch[ok])) < MIN_BATCH_SPREAD:
        return None
    per_row, base = np.polyfit(batch[ok], step[ok], 1)
    if not (math.isfinite(base) and math.isfinite(per_row)) or base <= 0:
        return None
    return float(base), max(0.0, float(per_row)), int(ok.sum())


def mean_batch(signals: ShapeSignals) -> float:
    """Mean running over the intervals where decoders ran."""
    batch = _batch(signals)
    if batch is None:
        return math.nan
    ok = np.isfinite(batch) & (batch > 0)
    return float(np.mean(batch[ok])) if ok.any() else math.nan


def batch_allowance(before: tuple[CensusReport, ShapeSignals], after: ShapeSignals) -> BatchAllowance | None:
    """The ITL ratio the after window's batch explains at the before window's step law, or None."""
    law = step_law(*before)
    b0, b1 = mean_batch(before[1]), mean_batch(after)
    if law is None or not (math.isfinite(b0) and math.isfinite(b1)) or b1 <= b0:
        return None
    base, per_row, n = law
    ratio = (base + per_row * b1) / (base + per_row * b0)
    return BatchAllowance(ratio, f"the batch the arm admitted ({b0:.1f} -> {b1:.1f} running) at the before window's "
                                 f"decode-only step law ({1e3 * base:.1f} ms + {1e3 * per_row:.2f} ms per running "
                                 f"sequence, fitted over {n} intervals): ITL x{ratio:.2f}")
