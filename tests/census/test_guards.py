"""The verdict's guards (pdcensus.census.guards) on series whose answer is known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.guards import (
    MIN_OTHER_SESSION_POLLS,
    ContrastCause,
    SessionContrast,
    explain_contrast,
    session_guard,
    window_support,
)


def test_one_user_has_no_other_session_whatever_its_prefill() -> None:
    running = np.array([0, 1, 1, 1, 0, 1, 1, 1, 1, 0] * 20, dtype=float)
    busy = np.zeros(running.size, bool)
    busy[::4] = True
    g = session_guard(running, busy)
    assert g.contrast is SessionContrast.NO_OTHER_SESSION and not g.allows_contrast
    assert g.prefill_polls_with_other == 0


def test_other_sessions_need_enough_prefill_polls_with_a_second_stream() -> None:
    running = np.ones(100)
    running[:MIN_OTHER_SESSION_POLLS - 2] = 2.0  # a second user only briefly
    busy = np.ones(100, bool)
    assert session_guard(running, busy).contrast is SessionContrast.TOO_FEW_OTHER
    running[:] = 3.0
    assert session_guard(running, busy).contrast is SessionContrast.OTHER_SESSIONS
    assert session_guard(running, np.zeros(100, bool)).contrast is SessionContrast.TOO_FEW_PREFILL
    assert session_guard(None, busy).contrast is SessionContrast.UNKNOWN


def test_a_window_shorter_than_twice_the_lag_does_not_support_it() -> None:
    t = np.arange(0.0, 540.0)  # 9 minutes of 1 s polls, steady from the start
    w = window_support(t, np.full(t.size, 64.0), np.full(t.size, 0.5), 1.0)
    assert not w.still_ramping and w.ramp_up_seconds < 5.0
    assert w.max_tail_lag_seconds == pytest.approx(539.0 / 2)
    assert not w.supports(120.0 * 3) and w.supports(120.0)


def test_ramp_up_and_a_poller_stall_shorten_what_the_window_supports() -> None:
    t = np.arange(0.0, 1800.0)
    kv = np.minimum(1.0, t / 900.0)  # KV usage grows for half the run: batch contexts still growing
    w = window_support(t, np.full(t.size, 32.0), kv, 1.0)
    assert w.still_ramping and w.ramp_up_seconds > 600.0
    assert not w.supports(120.0)
    stalled = np.r_[t[:1000], t[1000:] + 120.0]  # the poller stopped for two minutes
    w2 = window_support(stalled, np.full(t.size, 32.0), None, 1.0)
    assert w2.longest_gap_seconds > 100.0 and w2.clean_span_seconds < 1000.0


def test_a_level_that_swings_between_two_steps_in_steady_state_is_not_a_ramp() -> None:
    """vLLM's KV usage on a small cache steps between whole blocks (0.19 and 0.38 of 16 blocks) as the
    decoders cross them, each step held for a few scrapes. This 75 s window (a fair coin per 4 s run,
    the upper step 45 % of the time) is stationary; its first 12 s happen to sit on the lower step, so
    a 30 s median stayed below 0.9 x the second half's median (the upper step) until 25 s: "still
    ramping" under the median alone. A KV usage that grows for two thirds of the window is a ramp."""
    t = np.arange(0.0, 75.0)
    runs = "llllllllllllHHHHHHHHllllllllHHHHllllllllHHHHllllHHHHHHHHllllHHHHllllHHHHlll"
    kv = np.array([0.38 if c == "H" else 0.19 for c in runs])
    w = window_support(t, np.full(t.size, 3.0), kv, 1.0)
    assert not w.still_ramping and w.ramp_up_seconds < 5.0, w.ramp_up_seconds
    growing = 0.38 * np.minimum(1.0, t / 50.0)
    w = window_support(t, np.full(t.size, 3.0), growing, 1.0)
    assert w.still_ramping, w.ramp_up_seconds


def _polls(n: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    prompt = np.where(rng.random(n) < 0.3, 2000.0, 0.0)
    running = np.full(n, 32.0)
    return prompt, running, np.ones(n), rng


def test_a_contrast_above_one_from_lumped_counters_is_named() -> None:
    prompt, running, dt, rng = _polls()
    counted = prompt > 0
    gen = np.where(counted, 1600.0, 900.0) + rng.normal(0, 20, prompt.size)  # same batch, lumped generation
    finished = np.where(counted, 3.0, 0.0)
    e = explain_contrast(gen, prompt, running, dt, finished)
    assert e.cause is ContrastCause.COUNTERS_MOVE_TOGETHER
    assert e.contrast > 1.5 and e.batch_ratio == pytest.approx(1.0)
    assert e.turnover_counted > e.turnover_other


def test_a_contrast_above_one_from_a_smaller_batch_is_named() -> None:
    prompt, running, dt, rng = _polls()
    running = np.where(prompt > 0, 16.0, 32.0)
    gen = running * 30.0 * np.where(prompt > 0, 1.3, 1.0)
    assert explain_contrast(gen, prompt, running, dt).cause is ContrastCause.BATCH_SMALLER


def test_prefill_counted_late_is_named_and_a_plain_slowdown_is_not_above_one() -> None:
    prompt, running, dt, rng = _polls()
    counted = prompt > 0
    before = np.zeros(prompt.size, bool)
    before[:-1] |= counted[1:]
    before[:-2] |= counted[2:]
    before &= ~counted
    gen = np.where(before, 400.0, np.where(counted, 1100.0, 1000.0))  # slow while the prefill ran, before its count
    assert explain_contrast(gen, prompt, running, dt).cause is ContrastCause.PREFILL_COUNTED_LATE
    slow = np.where(counted, 600.0, 1000.0)
    assert explain_contrast(slow, prompt, running, dt).cause is ContrastCause.NOT_ABOVE_ONE


def test_verdict_limits_cap_confidence_and_forbid_what_the_window_cannot_hold() -> None:
    from pdcensus.census.guards import LIMITED_CONFIDENCE, GuardReason, Guards, history_observed, verdict_limits

    t = np.arange(0.0, 540.0)
    running = np.full(t.size, 1.0)
    busy = np.zeros(t.size, bool)
    busy[::10] = True
    g = Guards(session_guard(running, busy), window_support(t, running, None, 1.0), None)
    lim = verdict_limits(g)
    assert not lim.contrast_allowed and not lim.tail_allowed and lim.max_confidence == LIMITED_CONFIDENCE
    assert GuardReason.NO_OTHER_SESSION in lim.reasons and GuardReason.WINDOW_TOO_SHORT_FOR_TAIL in lim.reasons
    long_t = np.arange(0.0, 3600.0)
    many = np.full(long_t.size, 8.0)
    busy_long = np.zeros(long_t.size, bool)
    busy_long[::10] = True
    ok = verdict_limits(Guards(session_guard(many, busy_long), window_support(long_t, many, None, 1.0), None))
    assert ok.contrast_allowed and ok.tail_allowed and ok.max_confidence == 1.0 and ok.reasons == ()
    seen = history_observed(long_t, 840.0, window_support(long_t, many, None, 1.0))
    assert not seen[:840].any() and seen[900:].all()  # the run's first 14 min never serve as a clean reference


def test_no_kv_tier_lifts_only_the_short_window_limit() -> None:
    """With no second KV tier the verdict counts no eviction, so a window too short for the tail hides none."""
    from pdcensus.census.guards import LIMITED_CONFIDENCE, GuardReason, VerdictLimits, no_kv_tier_limits

    short = VerdictLimits(True, False, LIMITED_CONFIDENCE, (GuardReason.WINDOW_TOO_SHORT_FOR_TAIL,))
    lifted = no_kv_tier_limits(short)
    assert lifted.reasons == () and lifted.max_confidence == 1.0
    assert not lifted.tail_allowed  # the tail test still cannot run on it
    both = VerdictLimits(False, False, LIMITED_CONFIDENCE,
                         (GuardReason.NO_OTHER_SESSION, GuardReason.WINDOW_TOO_SHORT_FOR_TAIL))
    kept = no_kv_tier_limits(both)
    assert kept.reasons == (GuardReason.NO_OTHER_SESSION,) and kept.max_confidence == LIMITED_CONFIDENCE
