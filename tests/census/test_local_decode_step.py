"""The decode-only step an interval with none of its own is charged at (``pdcensus.census.ledger.local_decode_step``).

vLLM's counted ledger times no decode-only step in a span with prefill: its steps are charged at their
neighbours' pooled step, not at the window's most common one (which a growing context or the count of steps
per scrape puts under the step those spans' own decode-only steps took).
"""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.ledger import LOCAL_STEP_INTERVALS, half_sample_mode, local_decode_step


def _window(n: int = 60):
    t = np.arange(n, dtype=float)
    step = 0.040 + 0.0002 * t  # a decode-only step that grows with the decoders' contexts: 40 -> 52 ms
    steps = np.round(1.0 / step)
    return t, steps * step, steps


def test_an_untimed_interval_is_charged_at_its_neighbours_step_not_the_windows_mode():
    t, secs, steps = _window()
    untimed = np.zeros(t.size, bool)
    untimed[[50, 55]] = True
    timed = ~untimed
    d0 = np.full(t.size, half_sample_mode(np.where(timed, secs / steps, np.nan)))
    d = local_decode_step(t, np.where(timed, secs, 0.0), np.where(timed, steps, 0.0), timed, untimed, d0)
    near = [47, 48, 51, 52, 53]  # 49 is before an untimed interval: a chunk step may be in flight there
    assert d[50] == pytest.approx(secs[near].sum() / steps[near].sum())
    assert d[50] > 1.1 * d0[50]  # the window's mode is the early, short-context step
    assert d[3] == pytest.approx(secs[3] / steps[3])  # a timed interval keeps its own


def test_the_interval_before_an_untimed_one_is_not_pooled():
    t, secs, steps = _window(20)
    secs = secs.copy()
    secs[9] += 0.6  # the first 0.6 s of a chunk step in flight at the scrape
    untimed = np.zeros(t.size, bool)
    untimed[10] = True
    timed = ~untimed
    d = local_decode_step(t, np.where(timed, secs, 0.0), np.where(timed, steps, 0.0), timed, untimed,
                          np.full(t.size, np.nan))
    near = [11, 8, 12, 7, 13]  # the nearest five that timed a step, 9 left out
    assert d[10] == pytest.approx(secs[near].sum() / steps[near].sum())


def test_too_few_timed_intervals_keep_the_fallback():
    t = np.arange(LOCAL_STEP_INTERVALS + 2, dtype=float)
    timed = np.zeros(t.size, bool)
    timed[: LOCAL_STEP_INTERVALS - 1] = True
    untimed = ~timed
    d = local_decode_step(t, np.where(timed, 1.0, 0.0), np.where(timed, 20.0, 0.0), timed, untimed,
                          np.full(t.size, 0.04))
    assert np.all(d[untimed] == 0.04)
