"""Guards the verdict consults before it claims anything: typed results, never prose.

Why: real recordings (1 s scrapes of vLLM under benchmark load) break three assumptions the
contrast rests on, and each break has a measurable signature:

- **No other session.** The contrast is "decode of other sessions while one prefills". With
  at most one request running, every prefill is the decoder's own next turn and the scrape in
  which it ends holds less than a second of decoding: the ratio reads 0.5-0.6 with no
  interference at all. :func:`session_guard` says whether another stream was running in the
  scrapes where prefill ran.
- **Windows too short for a lag.** A lagged tail at lag L needs L of observed history before
  the tail scrapes *and* a clean reference whose own history (the whole tail window) was
  observed, inside one stretch of clean scrapes and after the ramp-up (batch and KV usage
  still growing at the start of a run make early scrapes look "clean" and fast).
  :func:`window_support` gives the longest lag the window supports and the ramp-up.
- **Contrasts above 1.** Decode per stream *faster* while prompts are counted has causes
  that are not prefill's effect: a smaller batch in those scrapes, prefill that ran in the
  scrapes before (vLLM counts a prompt when its prefill ends), or counters that move in the
  same lumps (a finishing turn's last tokens and the next turn's prompt land in the same
  scrape, the scrapes between carry little of either). :func:`explain_contrast` measures each
  and names the first that holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np

from pdcensus.census.lag import TAIL_WINDOW_SECONDS
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal

# At least this many scrapes with prefill and another running stream for any contrast.
MIN_OTHER_SESSION_POLLS = 10
# A gap between scrapes longer than this many median intervals (and GAP_SECONDS) breaks a clean span.
GAP_INTERVALS = 5.0
GAP_SECONDS = 10.0
# Ramp-up ends when the rolling median reaches RAMP_LEVEL x the steady level (the second half's median)
# or the second half's lower quartile, whichever is lower: a level the steady state itself shows a
# quarter of the time is not still ramping. Without the quartile, a level that swings in steady state
# (vLLM's KV usage steps between whole blocks as decoders cross them: 0.19 and 0.38 of a 16-block
# cache, held for several scrapes) has a second-half median on the upper step about half the time,
# and a 30 s median of the swing may stay on the lower step for a third of a short window: 4-6 % of
# such stationary 74 s windows read "still ramping" (a CI run of the live vLLM test capped at 0.69).
# A slow creep (KV usage 0.10 -> 0.14 over nine minutes, tests/census/test_vllm_realdata.py) has
# its lower quartile near 0.9 x its median, so it is still caught.
RAMP_LEVEL = 0.9
RAMP_STEADY_QUANTILE = 25.0
RAMP_ROLL_SECONDS = 30.0
# Still ramping: the ramp took more than this share of the window.
RAMP_SHARE = 1.0 / 3.0
# A lag L needs L of observed history for the tail scrapes and L for the clean reference.
SPANS_PER_LAG = 2.0
# explain_contrast: a ratio this far from 1 is a difference.
BATCH_SMALLER = 0.9
PRE_COMPLETION_SLOWER = 0.95
GENERATION_LUMP = 1.1
PRE_POLLS = 2
# A contrast counts as above 1 beyond this (per-stream decode 5 % faster while prompts are counted).
ABOVE_ONE = 1.05


class SessionContrast(str, Enum):
    NO_OTHER_SESSION = "no-other-session"  # never more than one request running
    TOO_FEW_OTHER = "too-few-polls-with-another-session"  # prefill scrapes with another stream are too few
    TOO_FEW_PREFILL = "too-few-prefill-polls"  # too few scrapes with prefill at all
    OTHER_SESSIONS = "other-sessions"
    UNKNOWN = "unknown"  # no running gauge


@dataclass(frozen=True)
class SessionGuard:
    contrast: SessionContrast
    max_running: float
    prefill_polls: int
    prefill_polls_with_other: int
    other: np.ndarray  # per scrape: another stream ran during the interval (max of running at both ends >= 2)

    @property
    def allows_contrast(self) -> bool:
        return self.contrast is SessionContrast.OTHER_SESSIONS


def session_guard(running: np.ndarray | None, prefill_busy: np.ndarray) -> SessionGuard:
    """Whether any scrape with prefill also had a stream of another session running.

    vLLM's running gauge counts prefilling requests too, so a scrape with prefill and at most
    one running request at both of its ends had nobody else to slow down.
    """
    busy = np.asarray(prefill_busy, dtype=bool)
    if running is None or not np.isfinite(running).any():
        return SessionGuard(SessionContrast.UNKNOWN, float("nan"), int(busy.sum()), 0, np.zeros(busy.size, bool))
    r = np.nan_to_num(running)
    during = np.maximum(r, np.r_[r[:1], r[:-1]])
    other = during >= 2
    n_other = int((busy & other).sum())
    peak = float(np.nanmax(running))
    kind = (SessionContrast.NO_OTHER_SESSION if peak <= 1 else
            SessionContrast.OTHER_SESSIONS if n_other >= MIN_OTHER_SESSION_POLLS else
            SessionContrast.TOO_FEW_PREFILL if busy.sum() < MIN_OTHER_SESSION_POLLS else SessionContrast.TOO_FEW_OTHER)
    return SessionGuard(kind, peak, int(busy.sum()), n_other, other)


@dataclass(frozen=True)
class WindowSupport:
    window_seconds: float
    clean_span_seconds: float  # longest stretch after the ramp-up with no gap between scrapes
    longest_gap_seconds: float
    ramp_up_seconds: float  # from the window's start until batch and KV usage reach their steady level
    still_ramping: bool
    max_tail_lag_seconds: float
    observed_from: float  # timestamp: the longest clean span starts here (ramp-up end or after a gap)
    observed_until: float  # ... and ends here

    def supports(self, lag_seconds: float) -> bool:
        return not self.still_ramping and lag_seconds <= self.max_tail_lag_seconds


def _ramp_end(times: np.ndarray, level: np.ndarray | None) -> float:
    """Seconds from the start until the rolling median of ``level`` reaches its steady level (RAMP_LEVEL x
    the second half's median, or that half's lower quartile where lower)."""
    if level is None or times.size < 4:
        return 0.0
    ok = np.isfinite(level)
    if ok.sum() < 4:
        return 0.0
    t, v = times[ok], level[ok]
    half = v[v.size // 2:]
    steady = float(np.median(half))
    if steady <= 0:
        return 0.0
    reached = min(RAMP_LEVEL * steady, float(np.percentile(half, RAMP_STEADY_QUANTILE)))
    lo = np.searchsorted(t, t - RAMP_ROLL_SECONDS, side="left")
    for i in range(v.size):
        if np.median(v[lo[i]:i + 1]) >= reached:
            return float(t[lo[i]] - t[0])
    return float(t[-1] - t[0])


def window_support(times: np.ndarray, running: np.ndarray | None, kv_usage: np.ndarray | None,
                   scrape_interval_seconds: float) -> WindowSupport:
    """The longest lagged tail this window can test, and whether it is still ramping up."""
    t = np.asarray(times, dtype=np.float64)
    if t.size < 2:
        edge = float(t[0]) if t.size else float("nan")
        return WindowSupport(0.0, 0.0, 0.0, 0.0, True, 0.0, edge, edge)
    window = float(t[-1] - t[0])
    ramp = max(_ramp_end(t, running), _ramp_end(t, kv_usage))
    still = ramp > RAMP_SHARE * window
    gaps = np.diff(t)
    step = scrape_interval_seconds if np.isfinite(scrape_interval_seconds) else float(np.median(gaps))
    breaks = gaps > max(GAP_INTERVALS * step, GAP_SECONDS)
    start = t[0] + ramp
    best, best_from, best_until, seg_start = 0.0, start, start, t[0]
    for i in range(t.size):
        if i > 0 and breaks[i - 1]:
            seg_start = t[i]
        s = max(seg_start, start)
        if t[i] - s > best:
            best, best_from, best_until = float(t[i] - s), float(s), float(t[i])
    return WindowSupport(window, best, float(gaps.max()), ramp, bool(still), best / SPANS_PER_LAG, best_from,
                         best_until)


class ContrastCause(str, Enum):
    BATCH_SMALLER = "fewer streams in the polls where prompts were counted"
    PREFILL_COUNTED_LATE = "prefill ran in the polls before it was counted and slowed decode there"
    COUNTERS_MOVE_TOGETHER = ("completions and admissions in the same poll: prompt and generation counters "
                              "move in the same lumps")
    UNEXPLAINED = "no cause found in the metrics"
    NOT_ABOVE_ONE = "the contrast is not above 1 (beyond ABOVE_ONE)"


@dataclass(frozen=True)
class ContrastExplanation:
    cause: ContrastCause
    contrast: float  # per-stream decode, counted-prompt scrapes / others
    batch_ratio: float  # mean running, counted-prompt scrapes / others
    pre_completion_ratio: float  # per-stream decode, the PRE_POLLS scrapes before a counted prompt / the rest
    generation_ratio: float  # generation tokens per second, counted-prompt scrapes / others
    turnover_counted: float  # share of counted-prompt scrapes in which requests finished
    turnover_other: float  # the same share in the other scrapes


def _per_stream(gen: np.ndarray, run: np.ndarray, dt: np.ndarray, m: np.ndarray) -> float:
    den = float(np.sum((run * dt)[m]))
    return float(np.sum(gen[m])) / den if den > 0 else float("nan")


def _ratio(a: float, b: float) -> float:
    return a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else float("nan")


def explain_contrast(generation: np.ndarray, prompt: np.ndarray, running: np.ndarray, dt: np.ndarray,
                     finished: np.ndarray | None = None) -> ContrastExplanation:
    """Why per-stream decode is faster in the scrapes whose prompt counter moved (raw counter)."""
    ok = np.isfinite(generation) & np.isfinite(running) & (running > 0) & np.isfinite(dt) & np.isfinite(prompt)
    gen, run, d = np.nan_to_num(generation), np.nan_to_num(running), np.nan_to_num(dt)
    counted = ok & (np.nan_to_num(prompt) > 0)
    other = ok & ~counted
    pre = np.zeros(counted.size, bool)
    for j in range(1, PRE_POLLS + 1):
        pre[:-j] |= counted[j:]
    pre &= other
    far = other & ~pre
    both = bool(counted.any() and other.any())
    contrast = _ratio(_per_stream(gen, run, d, counted), _per_stream(gen, run, d, other))
    batch = _ratio(float(run[counted].mean()), float(run[other].mean())) if both else float("nan")
    pre_ratio = _ratio(_per_stream(gen, run, d, pre), _per_stream(gen, run, d, far))
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = gen / d
    gen_ratio = _ratio(float(rate[counted].mean()), float(rate[other].mean())) if both else float("nan")
    fin = np.nan_to_num(finished) > 0 if finished is not None else None
    t_c = float(fin[counted].mean()) if fin is not None and counted.any() else float("nan")
    t_o = float(fin[other].mean()) if fin is not None and other.any() else float("nan")
    if not np.isfinite(contrast) or contrast <= ABOVE_ONE:
        cause = ContrastCause.NOT_ABOVE_ONE
    elif batch < BATCH_SMALLER:
        cause = ContrastCause.BATCH_SMALLER
    elif pre_ratio < PRE_COMPLETION_SLOWER:
        cause = ContrastCause.PREFILL_COUNTED_LATE
    elif gen_ratio > GENERATION_LUMP:
        cause = ContrastCause.COUNTERS_MOVE_TOGETHER
    else:
        cause = ContrastCause.UNEXPLAINED
    return ContrastExplanation(cause, float(contrast), batch, float(pre_ratio), gen_ratio, t_c, t_o)


@dataclass(frozen=True)
class Guards:
    """The three guards of one shape, for the verdict."""

    session: SessionGuard
    window: WindowSupport
    contrast: ContrastExplanation | None  # None: no prompt counter (gauge engines)


def shape_guards(s: ShapeSignals, prefill_busy: np.ndarray) -> Guards:
    """All guards from one shape's signals; ``prefill_busy`` is the census's busy mask."""
    running = s.gauge(Signal.RUNNING)
    window = window_support(s.times, running, s.gauge(Signal.KV_CACHE_USAGE), s.scrape_interval_seconds)
    gen, prompt = s.increase(Signal.GENERATION_TOKENS), s.increase(Signal.PROMPT_TOKENS)
    contrast = None
    if gen is not None and prompt is not None and running is not None:
        contrast = explain_contrast(gen, prompt, running, s.interval_seconds, s.finished_requests)
    return Guards(session_guard(running, prefill_busy), window, contrast)


class GuardReason(str, Enum):
    """Why a guard limits the verdict (the report renders these, the verdict reads them)."""

    NO_OTHER_SESSION = "at most one request ran: every prefill was the decoder's own next turn"
    TOO_FEW_OTHER = "too few polls had prefill while another session ran"
    WINDOW_TOO_SHORT_FOR_TAIL = "the window cannot hold the lagged tail with clean scrapes on both sides"
    STILL_RAMPING = "the batch and KV usage were still growing for over a third of the window"
    CONTRAST_ABOVE_ONE = "per-stream decode was faster while prompts were counted, for a cause that is not prefill"


# Confidence a verdict may not reach while a guard limits it (below the 0.7 a confident verdict needs).
LIMITED_CONFIDENCE = 0.69


@dataclass(frozen=True)
class VerdictLimits:
    """What the guards allow: the verdict applies these, it does not re-derive them."""

    contrast_allowed: bool  # False: no busy/idle ratio may be claimed (return inconclusive / none with the reason)
    tail_allowed: bool  # False: no lagged tail (eviction by the lag test) may be claimed
    max_confidence: float  # 1.0, or LIMITED_CONFIDENCE when any guard limits the claim
    reasons: tuple[GuardReason, ...]


def verdict_limits(g: Guards, tail_lag_seconds: float = TAIL_WINDOW_SECONDS[1]) -> VerdictLimits:
    """The limits one shape's guards put on its verdict.

    ``tail_lag_seconds``: the longest lag the tail claim rests on (the lag test pools up to
    ``TAIL_WINDOW_SECONDS[1]``).
    """
    reasons: list[GuardReason] = []
    # too few prefill scrapes at all is the verdict's own busy-bucket rule: not repeated here
    session = {SessionContrast.NO_OTHER_SESSION: GuardReason.NO_OTHER_SESSION,
               SessionContrast.TOO_FEW_OTHER: GuardReason.TOO_FEW_OTHER}.get(g.session.contrast)
    if session is not None:
        reasons.append(session)
    if g.window.still_ramping:
        reasons.append(GuardReason.STILL_RAMPING)
    tail_ok = g.window.supports(tail_lag_seconds)
    if not tail_ok and not g.window.still_ramping:
        reasons.append(GuardReason.WINDOW_TOO_SHORT_FOR_TAIL)
    if g.contrast is not None and g.contrast.cause not in (ContrastCause.NOT_ABOVE_ONE,):
        reasons.append(GuardReason.CONTRAST_ABOVE_ONE)
    contrast_ok = g.session.contrast in (SessionContrast.OTHER_SESSIONS, SessionContrast.UNKNOWN,
                                         SessionContrast.TOO_FEW_PREFILL)
    return VerdictLimits(contrast_ok, tail_ok, 1.0 if not reasons else LIMITED_CONFIDENCE, tuple(reasons))


def history_observed(times: np.ndarray, lookback_seconds: float, window: WindowSupport) -> np.ndarray:
    """Per scrape: its last ``lookback_seconds`` lie inside the clean span after the ramp-up.

    A scrape is "clean" (nothing heavy in the tail window before it) only if that history was
    observed: AND this into the lag test's clean mask so the start of a run never serves as
    the clean reference.
    """
    t = np.asarray(times, dtype=np.float64)
    return np.asarray((t - window.observed_from >= lookback_seconds) & (t <= window.observed_until))


def counted_limits(limits: VerdictLimits, inflation_after: float) -> VerdictLimits:
    """The limits once vLLM's counted step ledger ran (``pdcensus.series.vllm_steps``).

    The claim then rests on steps counted per interval, not on the prompt counter's lumps, so a
    contrast above one from those lumps no longer limits it; and where decode-only steps after
    prefill were measured against the undisturbed step (``inflation_after`` finite), residency
    was tested on the steps themselves, so a window too short for the lag test no longer does.
    """
    drop = {GuardReason.CONTRAST_ABOVE_ONE}
    if math.isfinite(inflation_after):
        drop.add(GuardReason.WINDOW_TOO_SHORT_FOR_TAIL)
    return _without(limits, drop)


def no_kv_tier_limits(limits: VerdictLimits) -> VerdictLimits:
    """The limits where the engine's own cache config names no second KV tier (``pdcensus.census.kv_tier``).

    The verdict then does not count eviction as found (a running request's KV leaves only by
    preemption, which is counted), so a window too short to hold the lagged tail hides no eviction
    that a sharing claim could be mistaken for: that limit goes, the others stay.
    """
    return _without(limits, {GuardReason.WINDOW_TOO_SHORT_FOR_TAIL})


def _without(limits: VerdictLimits, drop: set[GuardReason]) -> VerdictLimits:
    kept = tuple(r for r in limits.reasons if r not in drop)
    return replace(limits, reasons=kept, max_confidence=limits.max_confidence if kept else 1.0)
