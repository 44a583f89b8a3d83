"""Capacity before knobs: the advice for an endpoint over capacity, and the box that is itself the limit.

When the census finds the endpoint over capacity (:mod:`pdcensus.census.overload`), no knob is
the fix: every knob of the runbook trades one wait for another inside a fixed capacity. So the
advice says what the load needed (replicas; KV memory where preemptions run continuously), how
much by the census's own numbers, and names each knob the mechanisms would otherwise get as the
one that would only move the pain, and where to.

``/diagnostics`` (the runbook: "answers 'is the *box* the limit' in one call: configuration
drift, VRAM split, per-card link chain and clocks, findings with fixes") is read by
:func:`read_diagnostics`; a card whose link runs narrower than expected or whose SM clock is
held below its maximum is a box that limits the endpoint whatever the flags say, and its
findings' fixes come first.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.advice.predictions import CapacityPrediction, Prediction
from pdcensus.census.model import CensusReport
from pdcensus.census.overload_model import OverloadSignature

THROTTLED_CLOCK_SHARE = 0.9  # an SM clock below this share of its maximum is held down (power, heat)

# what each knob does to an endpoint over capacity: it moves the wait, it does not remove it
MOVES_THE_PAIN = {
    "--max-num-seqs": "fewer sequences admitted: preemptions turn into queueing before admission (TTFT), the "
                      "same work waits",
    "--prefill-interleave": "held steps protect decoders by stretching every prefill: the wait moves to TTFT and "
                            "the queue grows faster",
    "--max-num-batched-tokens": "a smaller step budget slows prefill: the queue drains slower",
    "--prefill-span": "re-funds a lone prefill, and there is never a lone prefill in a queue this long",
    "--busy-prefill-chunk": "a prefill-speed dial: it shares the same capacity differently",
    "--checkpoint-policy": "less replayed prefill is real work saved, but a few percent, not the missing capacity",
}


def _fmt(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "-"


def capacity_first(report: CensusReport, knob_advice: Sequence[Recommendation]) -> tuple[Recommendation, ...]:
    """The one recommendation for an overloaded endpoint: capacity, with the knobs named as moving the pain."""
    o = report.overload
    assert o is not None and o.overloaded
    continuous = OverloadSignature.PREEMPTIONS_CONTINUOUS in o.signatures
    kv_bound = continuous or (math.isfinite(o.kv_usage_mean) and o.kv_usage_mean >= 0.9)
    what = "replicas (or a larger deployment per replica)" + (
        ", and KV memory: preemptions run in most minutes, the KV cache is over-committed all the time"
        if kv_bound else "")
    factor = (f"about x{o.capacity_factor:.1f} the serving capacity this window's load needed"
              if math.isfinite(o.capacity_factor) else "more serving capacity")
    summary = (f"the endpoint is over capacity: {o.reason}. It needs {factor}: {what}. No knob fixes this: "
               "each one below only moves the wait")
    named = [r.knob for r in knob_advice] + [k for k in ("--max-num-seqs", "--prefill-interleave")
                                             if k not in {r.knob for r in knob_advice}]
    notes = [f"{k}: {MOVES_THE_PAIN[k]}" + (f" (the census would otherwise suggest {r.knob} {r.value} for "
                                             f"{r.mechanism})" if (r := _rec(knob_advice, k)) else "")
             for k in named if k in MOVES_THE_PAIN]
    wait = (f"a request waits about {o.queue_wait_seconds:.1f} s before admission ({o.queue_wait_basis})"
            if math.isfinite(o.queue_wait_seconds) else "the queue wait is not measured or withheld (see the verdict)")
    notes.append(f"queue: {_fmt(o.waiting_start, '.0f')} -> {_fmt(o.waiting_end, '.0f')} waiting (first and last "
                 f"tenth of the window), {_fmt(o.running_mean, '.0f')} running; {wait}")
    if OverloadSignature.TTFT_QUEUEING in o.signatures:
        notes.append("TTFT is queueing: the mean queue wait is as long as the mean TTFT" if o.queue_share_of_ttft >= 1
                     else f"TTFT is {o.queue_share_of_ttft:.0%} queueing (mean queue wait over mean TTFT)")
    if o.preemptions > 0:
        notes.append(f"preemptions: {o.preemptions:.0f}, in {_fmt(o.preemption_minutes_share, '.0%')} of the minutes "
                     f"({'continuous' if continuous else 'bursty'})")
    predicted = CapacityPrediction(o.capacity_factor, o.queue_wait_seconds, o.waiting_slope_per_minute,
                                   o.queue_share_of_residence, o.admission_per_second)
    plan = VerificationPlan(
        argv="the replica count (or the deployment's size) in the serving platform, not an engine flag",
        counter="the waiting-queue gauge drains: its slope over the window at or below 0 and the queue empty in more "
                "than 5 % of scrapes",
        bucket_pair="rerun the census on a window after the change: the overload finding is gone",
        command="pdcensus census AFTER")
    return (Recommendation("overload", "capacity", f"x{o.capacity_factor:.1f}" if math.isfinite(o.capacity_factor)
                           else "more", "", "", summary, predicted, cost="hardware, or fewer users per replica",
                           verification=plan, notes=tuple(notes)),)


def _rec(recs: Sequence[Recommendation], knob: str) -> Recommendation | None:
    return next((r for r in recs if r.knob == knob), None)


@dataclass(frozen=True)
class BoxReading:
    """What ``/diagnostics`` says about the box: drift, cards that limit it, findings with fixes."""

    drift: tuple[str, ...]  # "--flag: argv X, in effect Y"
    limits: tuple[str, ...]  # one line per card that limits the endpoint
    findings: tuple[str, ...]  # "severity id: what; fix: ..."
    fixes: tuple[str, ...]
    vram: Mapping[str, float]

    @property
    def box_is_the_limit(self) -> bool:
        return bool(self.limits)

    def to_dict(self) -> dict[str, Any]:
        return {"box_is_the_limit": self.box_is_the_limit, "limits": list(self.limits), "drift": list(self.drift),
                "findings": list(self.findings), "vram": dict(self.vram)}


def _width(text: Any) -> int | None:
    m = re.search(r"x(\d+)", str(text))
    return int(m.group(1)) if m else None


def _card_limits(card: Mapping[str, Any]) -> list[str]:
    out = []
    name = f"card {card.get('index', '?')} ({card.get('name', '?')})"
    width, expected = _width(card.get("link")), card.get("link_width_expected")
    if isinstance(width, int) and isinstance(expected, (int, float)) and width < expected:
        chain = " -> ".join(str(x) for x in card.get("link_chain") or ())
        out.append(f"{name}: link runs x{width}, expected x{expected:.0f}" + (f" (chain {chain})" if chain else "")
                   + ": every host transfer (expert reads, KV offload, snapshots) runs at a fraction of its speed")
    clock, top = card.get("sm_clock_mhz"), card.get("sm_clock_max_mhz")
    if isinstance(clock, (int, float)) and isinstance(top, (int, float)) and top > 0 and \
            clock < THROTTLED_CLOCK_SHARE * top:
        out.append(f"{name}: SM clock {clock:.0f} MHz of {top:.0f} MHz ({clock / top:.0%}): held down (power or heat), "
                   "every step is slower")
    return out


def read_diagnostics(raw: Any) -> BoxReading | None:
    """``/diagnostics`` as a :class:`BoxReading` (None when it is not an object)."""
    if not isinstance(raw, Mapping):
        return None
    drift = tuple(f"{d.get('flag', '?')}: argv {d.get('argv', '?')}, in effect {d.get('effective', '?')}"
                  for d in raw.get("configuration_drift") or () if isinstance(d, Mapping))
    limits = tuple(line for c in raw.get("cards") or () if isinstance(c, Mapping) for line in _card_limits(c))
    found = [f for f in raw.get("findings") or () if isinstance(f, Mapping)]
    findings = tuple(f"{f.get('severity', '?')} {f.get('id', '?')}: {f.get('what', '')}" for f in found)
    fixes = tuple(str(f["fix"]) for f in found if f.get("fix"))
    vram = {k: float(v) for k, v in (raw.get("vram") or {}).items() if isinstance(v, (int, float))}
    return BoxReading(drift, limits, findings, fixes, vram)


def box_first(box: BoxReading) -> Recommendation:
    """The box is the limit: its own fixes come before any knob."""
    summary = ("the box itself is the limit (/diagnostics): " + "; ".join(box.limits)
               + ". Fix the box first; a knob tuned on it would be tuned to a fault")
    notes = tuple(f"finding: {f}" for f in box.findings) + tuple(f"fix: {f}" for f in box.fixes) + tuple(
        f"configuration drift: {d}" for d in box.drift)
    plan = VerificationPlan(argv="-", counter="/diagnostics lists no degraded link and no held-down clock",
                            bucket_pair="rerun the census after the fix", command="pdcensus collect --url URL --out B")
    return Recommendation("box", "hardware", "fix", "", "", summary, Prediction(), cost="downtime on that box",
                          verification=plan, notes=notes)


def with_box(recs: Sequence[Recommendation], box: BoxReading | None) -> tuple[Recommendation, ...]:
    """The box first when it is the limit; the capacity advice told where KV memory sits in the VRAM split."""
    out = list(recs)
    if box is not None and box.vram and out and out[0].mechanism == "overload":
        gib = {k.removesuffix("_bytes"): v / 2**30 for k, v in box.vram.items()}
        split = ", ".join(f"{k.replace('_', ' ')} {v:.1f} GiB" for k, v in gib.items() if k != "total")
        out[0] = replace(out[0], notes=(*out[0].notes, f"VRAM split (/diagnostics): {split}: more KV memory means a "
                                        "larger card, more cards, or a smaller share for weights or expert slab "
                                        "(which costs expert reads)"))
    if box is not None and box.box_is_the_limit:
        out.insert(0, box_first(box))
    return tuple(out)
