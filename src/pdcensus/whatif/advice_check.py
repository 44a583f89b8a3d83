"""One prediction per knob: each recommendation's effect as the calibrated twin predicts it.

The advice computes a recommendation's effect in closed form from the ledger and the buckets
(:mod:`pdcensus.advice.predict`): quick, and blind to what the engine's scheduler does with a
queue, a batch that changes composition, or a prefill that no longer finishes inside a bucket.
``pdcensus whatif`` runs the engine's model itself, calibrated to the same recording. Two
answers to one question confuse an operator (on the demo the closed form said per-stream decode
in the heaviest bucket x1.88 for ``--prefill-interleave 2``, the twin x1.20 and the simulator
run with the knob x1.11), so ``census`` runs the twin (unless ``--no-twin``) on every recommendation that is
not minor and puts its figures beside the closed form's, with the one to trust named:

- the twin for per-stream decode, where it calibrated on this recording (every bounded figure's
  error within ``whatif``'s bound) and accepted the knob; for the TTFT p90 neither alone: read
  between the two (measured against the simulator run with the knob, ``bench/three_way.py``:
  per-stream decode median error 10 % twin, 26 % closed form; TTFT p90 33 % twin, 22 % closed form);
- the closed form, where the twin was refused, with the refusal's one line.

A recommendation that is not a flag (a capacity change: ``capacity=x1.3``) is left as it is.

Figures are those both sides can state on the recording's own prefill-rate edges: per-stream
decode in the heaviest bucket and in the idle one, and the heaviest bucket's TTFT p90 (the
closed form's replay of the prefill trace where it ran, its queueing model otherwise).
It runs here, above the advice, because the advice never sees the simulator (tests/test_layers.py).
"""

from __future__ import annotations

import functools
import math
import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace

from pdcensus.advice.endpoint_report import EndpointReport, side_evidence_of
from pdcensus.advice.model import Recommendation, TwinCheck, TwinRow
from pdcensus.advice.predictions import InterleavePrediction, StepBudgetPrediction
from pdcensus.errors import DataError, UsageError
from pdcensus.series.model import Recording
from pdcensus.whatif.model import BucketPrediction, Spread, WhatIfResult
from pdcensus.whatif.run import CalibratedTwin

TWIN_SEEDS = 2  # each seed is one twin run before and one after: ~3 s each on the demo's hour
TRUST_TWIN = ("per-stream decode: the twin (it runs the engine's scheduler on this recording's traffic, calibrated "
              "within {bound:.0%}; the closed form ignores queueing and the batch's make-up); TTFT p90: read between "
              "the two (near a queue both miss by tens of percent)")


def _first_finite(*values: float) -> float:
    return next((float(v) for v in values if math.isfinite(v)), math.nan)


def _ratio(after: float | None, before: float | None) -> float:
    ok = after is not None and before is not None and math.isfinite(after) and math.isfinite(before) and before > 0
    return float(after) / float(before) if ok and after is not None and before is not None else math.nan


def _scaled(observed: float, before: Spread, after: Spread) -> tuple[float, float, float]:
    """The recording's value x the twin's after/before ratio (median, and the after range over the before median)."""
    if not (math.isfinite(observed) and math.isfinite(before.median) and before.median > 0):
        return math.nan, math.nan, math.nan
    k = observed / before.median
    return after.median * k, after.low * k, after.high * k


def twin_rows(rec: Recommendation, result: WhatIfResult) -> tuple[TwinRow, ...]:
    """The figures both the closed form and the twin state, on the recording's bucket edges."""
    if not result.buckets:
        return ()
    idle, heavy = result.buckets[0], result.buckets[-1]
    p = rec.predicted if isinstance(rec.predicted, InterleavePrediction) else None  # the one the closed form states
    closed_decode, closed_ttft = math.nan, math.nan
    if p is not None:
        closed_decode = _first_finite(p.busy_bucket_per_stream_tokens_per_second_predicted,
                                      p.per_stream_tokens_per_second_during_prefill)
        closed_ttft = _first_finite(p.busy_ttft_p90_seconds_replay, p.busy_ttft_p90_seconds_queueing)
    elif isinstance(rec.predicted, StepBudgetPrediction):
        # a step budget's closed form states a decoder beside one chunk and the prompt's TTFT stretch, not
        # the bucket: its ratios applied to the bucket's figures now
        b = rec.predicted
        closed_decode = heavy.observed_per_stream_tokens_per_second * _ratio(
            b.per_stream_tokens_per_second_beside_prefill, b.per_stream_tokens_per_second_beside_prefill_now)
        stretch = b.prompt_ttft_stretch if b.prompt_ttft_stretch is not None else math.nan
        closed_ttft = heavy.observed_ttft_p90_seconds * stretch

    def row(figure: str, unit: str, b: BucketPrediction, per_stream: bool, closed: float) -> TwinRow:
        if per_stream:
            now, before, after = b.observed_per_stream_tokens_per_second, b.twin_before_per_stream, b.twin_after_per_stream
        else:
            now, before, after = b.observed_ttft_p90_seconds, b.twin_before_ttft_p90, b.twin_after_ttft_p90
        twin, low, high = _scaled(now, before, after)
        # bench/three_way.py against the simulator run with the knob: the twin's per-stream decode is the
        # closer (median error 10 % vs the closed form's 26 %), neither's TTFT p90 is (33 % vs 22 %)
        return TwinRow(figure, unit, now, closed, twin, low, high, "twin" if per_stream else "between")

    return (
        row(f"per-stream decode, heaviest bucket ({heavy.bucket})", "tok/s", heavy, True, closed_decode),
        row("per-stream decode, idle bucket", "tok/s", idle, True, math.nan),
        row(f"TTFT p90, heaviest bucket ({heavy.bucket})", "s", heavy, False, closed_ttft),
    )


def check_recommendation(twin: Callable[[], CalibratedTwin], rec: Recommendation, seeds: int = TWIN_SEEDS) -> TwinCheck:
    """Run the twin on ``rec``'s knob and value; a refusal (or a knob the twin cannot set) is the closed form's.

    ``twin`` gives the recording's calibrated twin (made on the first call, shared by every
    recommendation of the report).
    """
    setting = f"{rec.knob.strip()}={rec.value.strip()}"
    try:
        result = twin().predict([setting])
    except (UsageError, DataError) as exc:
        return TwinCheck(setting, "closed-form", f"the twin cannot run it: {exc}", refused=str(exc), seeds=seeds)
    errors = {k: v for k, v in result.calibration_error.items() if math.isfinite(v)}
    if result.refused:
        return TwinCheck(setting, "closed-form", f"the twin was refused: {result.refused}", refused=result.refused,
                         calibration_error=errors, seeds=seeds)
    rows = twin_rows(rec, result)
    withheld = next((f.basis for f in result.figures if f.withheld), None)
    if not rows and withheld is not None:
        return TwinCheck(setting, "closed-form", f"the twin's per-stream figures are {withheld}",
                         calibration_error=errors, seeds=seeds)
    if not rows or not math.isfinite(rows[0].twin):
        return TwinCheck(setting, "closed-form", "the twin gave no heaviest-bucket figure on this recording",
                         rows=rows, calibration_error=errors, seeds=seeds)
    return TwinCheck(setting, "twin", TRUST_TWIN.format(bound=result.bound),
                     rows=rows, calibration_error=errors, seeds=seeds)


def check_report(recording: Recording, report: EndpointReport, argv: Sequence[str] = (),
                 seeds: int = TWIN_SEEDS, progress: Callable[[str], None] | None = None) -> EndpointReport:
    """``report`` with every recommendation that is not minor carrying its :class:`TwinCheck`.

    A recommendation that is no flag (a capacity change) is left as it is; ``progress`` hears of
    each twin run before it starts (a few seconds each).
    """
    if not argv:
        deployed = side_evidence_of(report).argv
        argv = shlex.split(deployed) if deployed else ()
    # calibrated once, on the first recommendation that asks (a refusal raises, is not kept: each asks)
    twin = functools.cache(lambda: CalibratedTwin(recording, argv=argv, instance=report.instance, seeds=seeds))

    def checked(rec: Recommendation) -> Recommendation:
        # a dial with no next value (spent where it is deployed: the advice names the structural fix instead)
        # has nothing for the twin to run
        if rec.minor or not rec.knob.strip().startswith("--") or not rec.value.strip():
            return rec
        if progress is not None:
            progress(f"running the calibrated twin on {rec.knob.strip()} {rec.value.strip()} ({report.instance}) ...")
        return replace(rec, twin=check_recommendation(twin, rec, seeds))

    return replace(report, advice=tuple(checked(rec) for rec in report.advice))
