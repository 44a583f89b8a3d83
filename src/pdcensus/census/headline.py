"""The headline: which found mechanism leads, and one line that carries both answers.

``headline_mechanism`` is the runbook's first answer: the found mechanism that costs most,
``mixed`` when two or more are material (>= ``MATERIAL_SHARE`` of decoders' time) and each
holds at least ``DOMINANT_SHARE`` of all lost time, ``none`` when nothing is found. The
simulator's ground truth applies the same rule to the model's own accounting
(``pdcensus.sim.truth``).

``headline_text`` says both answers in one line, e.g. "step-time-sharing (minor): while
prefill runs (4 % of decoders' time) per-stream decode falls to 0.49 of idle; 1.6 % of
decoders' time overall".
"""

from __future__ import annotations

import math

from pdcensus.census.model import Found, Mechanism, Severity, Signature, Verdict
from pdcensus.census.verdict_inputs import VerdictInputs
from pdcensus.mechanism import DOMINANT_SHARE, MATERIAL_SHARE

MECHANISMS = (Mechanism.STEP_TIME_SHARING, Mechanism.EVICTION, Mechanism.PREEMPTION_STALL)


def severity(loss_share: float) -> Severity:
    return Severity.MATERIAL if loss_share >= MATERIAL_SHARE else Severity.MINOR


def headline_mechanism(losses: dict[Mechanism, float]) -> Mechanism:
    """Costliest found mechanism; ``mixed`` when two material ones each hold ``DOMINANT_SHARE`` of lost time.

    ``losses`` maps each *found* mechanism to its loss share; a NaN share (preemptions through
    the whole window, the stall unmeasurable) counts as material and costliest.
    """
    if not losses:
        return Mechanism.NONE
    unmeasured = [m for m in MECHANISMS if m in losses and not math.isfinite(losses[m])]
    finite = {m: v for m, v in losses.items() if math.isfinite(v)}
    total = sum(max(v, 0.0) for v in finite.values())
    # dominant: material (of decoders' time) and DOMINANT_SHARE of the found mechanisms' lost time
    dominant = [m for m in MECHANISMS if m in finite and finite[m] >= MATERIAL_SHARE
                and finite[m] >= DOMINANT_SHARE * total]
    if len(dominant) + len(unmeasured) >= 2 and dominant:
        return Mechanism.MIXED
    if unmeasured:
        return unmeasured[0]
    if dominant:
        return dominant[0]
    return max((m for m in MECHANISMS if m in finite), key=lambda m: finite[m])


def _pct(x: float) -> str:
    if not math.isfinite(x):
        return "?"
    return f"{100 * x:.1f} %" if x < 0.1 else f"{100 * x:.0f} %"


def describe(f: Found) -> str:
    """What one found mechanism does while it acts, and what it costs overall."""
    cost = (f"{_pct(f.loss_share)} of decoders' time overall" if math.isfinite(f.loss_share)
            else "its cost cannot be measured here")
    if f.near_material_line:
        cost += f" (near the {100 * MATERIAL_SHARE:g} % line between minor and material)"
    itl = f"; ITL p99 {f.itl_p99_ratio:.1f}x while it acts" if math.isfinite(f.itl_p99_ratio) else ""
    how_often = f" ({_pct(f.active_share)} of decoders' time)" if math.isfinite(f.active_share) else ""
    if f.mechanism is Mechanism.STEP_TIME_SHARING:
        if f.signature is Signature.DOSE_RESPONSE:
            what = (f"per-stream decode falls with the prefill computed beside it, to {f.depth:.2f} of idle at "
                    "the busiest intervals' prefill level (dose-response)")
        else:
            what = f"while prefill runs{how_often} per-stream decode falls to {f.depth:.2f} of idle"
    elif f.mechanism is Mechanism.EVICTION:
        if f.signature is Signature.LAGGED_TAIL:
            what = f"2-14 min after prefill{how_often} per-stream decode is {f.depth:.2f} of clean"
        else:
            what = f"decode-only steps after prefill run at {f.depth:.2f} of their undisturbed speed"
    else:
        dip = f", decode at {f.depth:.2f} of its baseline" if math.isfinite(f.depth) else ""
        what = f"bursts of preemption stop sequences that re-prefill from token 0{dip}"
    return f"{f.mechanism.value} ({f.severity.value}): {what}; {cost}{itl}"


def headline_text(v: Verdict, x: VerdictInputs) -> str:
    """The two-part headline for every view (terminal, HTML, Markdown, JSON)."""
    if v.mechanism is Mechanism.INCONCLUSIVE:
        why = v.settle[0] if v.settle else "the data cannot tell"
        return f"inconclusive: {why}"
    if v.mechanism is Mechanism.NONE:
        lag0 = float(x.lag0_effect[0]) if x.lag0_effect.size else float("nan")
        tail = (f"; per-stream decode while prefill runs is {lag0:.2f} of idle" if math.isfinite(lag0) else "")
        extra = f" ({x.contrast_note})" if x.contrast_note else ""
        return f"none: no mechanism's signature is in the data beyond noise{tail}{extra}"
    lead = [f for f in v.found if f.mechanism is v.mechanism] if v.mechanism is not Mechanism.MIXED else \
        [f for f in v.found if f.severity is Severity.MATERIAL]
    rest = [f for f in v.found if f not in lead]
    text = "; ".join(describe(f) for f in lead)
    if v.mechanism is Mechanism.MIXED:
        text = "mixed: " + text
    if rest:
        text += "; also found: " + ", ".join(
            f"{f.mechanism.value} ({f.severity.value}, {_pct(f.loss_share)})" for f in rest)
    return text
