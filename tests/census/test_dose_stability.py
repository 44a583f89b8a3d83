"""The dose-response fit is evidence only where its bootstrap supports it.

A ratio of slope to intercept swings to either sign when the intercept (the idle per-stream
rate) sits near 0 in some replicates; such a fit is reported as unstable and never reaches
the verdict. A well-determined fit on the same design stays stable and recovers its stall.
"""

from __future__ import annotations

import numpy as np

from pdcensus.census.bootstrap import block_length, weights
from pdcensus.census.dose import DoseFit, dose_response
from pdcensus.census.detect import dose_signature


def _fit(per_stream: np.ndarray, prefill: np.ndarray) -> DoseFit:
    n = per_stream.size
    busy = prefill > 0
    w = weights(n, block_length(busy.astype(float)))
    return dose_response(per_stream, np.full(n, 3.0), prefill, None, busy, w)


def test_a_clear_stall_is_stable_recovered_and_used_as_evidence() -> None:
    rng = np.random.default_rng(3)
    prefill = np.where(np.arange(300) % 10 < 4, 400.0, 0.0)
    stall = 2e-3  # seconds per prefill token: 400 tok/s leaves 0.2 of idle
    per_stream = 40.0 * np.clip(1 - stall * prefill, 0, None) + rng.normal(0, 1.0, prefill.size)
    fit = _fit(per_stream, prefill)
    assert fit.result.stable
    lo, hi = fit.result.stall_interval
    assert lo <= 2000.0 <= hi
    test = dose_signature(fit.stall_seconds_per_token, fit.depth_at_top)
    assert test is not None and test.found


def test_an_idle_rate_near_zero_makes_the_fit_unstable_and_no_evidence() -> None:
    rng = np.random.default_rng(5)
    prefill = np.where(np.arange(300) % 10 < 4, 400.0, 0.0)
    # Idle decode is noise around 0: the intercept crosses 0 between replicates.
    per_stream = rng.normal(0.0, 1.0, prefill.size) - 0.001 * prefill
    fit = _fit(per_stream, prefill)
    assert not fit.result.stable
    assert "unstable" in fit.result.reason
    assert fit.stall_seconds_per_token is None and fit.depth_at_top is None
    assert dose_signature(fit.stall_seconds_per_token, fit.depth_at_top) is None
