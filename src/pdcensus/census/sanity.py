"""Numbers that cannot be true never reach a verdict.

A counter stuck at zero, engine-time counters read against wall-clock scrapes, or rates
that no step could deliver produce figures that look like evidence ("decode-only step
0.0 ms, sharing 99.9 %"; "sharing 62.6 %, eviction 41.9 %" on a sped-up simulator). Each
check here names the broken signal and what rests on it; the census then withholds that
part (the step ledger, or the loss shares) and says so in the verdict, instead of
ranking on it.

The bounds are physical, not tuned: a step cannot take more wall time than passed
(``WALL_CLOCK_SLACK`` only absorbs scrape-timestamp jitter), a decode-only step cannot
take 0 s while decode-only steps are counted, and a stream cannot emit more tokens per
decode-only step than one plus a deep speculative draft (``MAX_TOKENS_PER_STEP``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal

# Step seconds may exceed the wall seconds between scrapes by this factor (timestamp jitter)
WALL_CLOCK_SLACK = 1.05
# Tokens per stream per decode-only step beyond which a rate or a step is broken (1 + a draft of 3)
MAX_TOKENS_PER_STEP = 4.0
# Loss shares of decoders' time may not add up beyond this (bootstrap point estimates, small slack)
MAX_SHARE_SUM = 1.0


class BrokenKind(str, Enum):
    NEVER_MOVES = "never-moves"
    FASTER_THAN_WALL_CLOCK = "faster-than-wall-clock"
    RATE_ABOVE_STEP_LIMIT = "rate-above-step-limit"
    SHARES_OVER_WHOLE = "shares-over-100-percent"


@dataclass(frozen=True)
class Broken:
    """One signal that cannot be true, and the part of the census withheld because of it."""

    signal: str
    kind: BrokenKind
    text: str
    withholds: str


LEDGER_COUNTERS = (Signal.STEPS, Signal.STEPS_DECODE, Signal.STEP_SECONDS, Signal.STEP_SECONDS_DECODE)


def _total(values: np.ndarray | None) -> float:
    return float(np.nansum(values)) if values is not None else float("nan")


def check_ledger(s: ShapeSignals, per_stream: np.ndarray) -> tuple[Broken, ...]:
    """The ledger counters' sanity: each moves, step time fits in wall time, rates fit in steps."""
    inc = s.increases
    if not all(sig in inc for sig in (Signal.STEPS_DECODE, Signal.STEP_SECONDS, Signal.STEP_SECONDS_DECODE)):
        return ()
    name = s.profile.name_of
    out: list[Broken] = []
    steps_total = max(_total(inc.get(Signal.STEPS)), _total(inc.get(Signal.STEPS_DECODE)))
    for sig in LEDGER_COUNTERS:
        if sig in inc and steps_total > 0 and not _total(inc[sig]) > 0:
            out.append(Broken(name(sig) or sig.value, BrokenKind.NEVER_MOVES,
                              f"{name(sig) or sig.value} never moves while {steps_total:.0f} engine steps are counted",
                              "the step ledger"))
    secs, dt = inc[Signal.STEP_SECONDS], s.interval_seconds
    both = np.isfinite(secs) & np.isfinite(dt)
    wall = float(dt[both].sum())
    engine = float(secs[both].sum())
    if wall > 0 and engine > WALL_CLOCK_SLACK * wall:
        out.append(Broken(name(Signal.STEP_SECONDS) or "step seconds", BrokenKind.FASTER_THAN_WALL_CLOCK,
                          f"{name(Signal.STEP_SECONDS)} grew {engine / wall:.2f}x as fast as the wall clock between "
                          "scrapes: engine time is not wall time here (a sped-up clock, or several engines summed)",
                          "the step ledger"))
    steps_d, secs_d = inc[Signal.STEPS_DECODE], inc[Signal.STEP_SECONDS_DECODE]
    with np.errstate(invalid="ignore", divide="ignore"):
        dstep = np.where((steps_d > 0) & (secs_d > 0), secs_d / np.where(steps_d > 0, steps_d, 1), np.nan)
        tokens_per_step = per_stream * dstep
    ok = np.isfinite(tokens_per_step)
    if ok.sum() >= 10 and float(np.median(tokens_per_step[ok])) > MAX_TOKENS_PER_STEP:
        out.append(Broken(name(Signal.STEP_SECONDS_DECODE) or "decode-only step seconds",
                          BrokenKind.RATE_ABOVE_STEP_LIMIT,
                          f"streams emit {float(np.median(tokens_per_step[ok])):.1f} tokens per decode-only step "
                          f"(median), more than {MAX_TOKENS_PER_STEP:.0f}: the decode rate or the step seconds are "
                          "not what they claim", "the step ledger"))
    return tuple(out)


def check_shares(shares: dict[str, float], *, ledger: bool) -> Broken | None:
    """Loss shares that add up to more than all of decoders' time."""
    finite = {k: v for k, v in shares.items() if np.isfinite(v) and v > 0}
    total = sum(finite.values())
    if total <= MAX_SHARE_SUM:
        return None
    parts = ", ".join(f"{k} {100 * v:.1f} %" for k, v in finite.items())
    return Broken("loss shares", BrokenKind.SHARES_OVER_WHOLE,
                  f"loss shares add up to {100 * total:.0f} % of decoders' time ({parts}): impossible",
                  "the step ledger's shares" if ledger else "the loss shares")
