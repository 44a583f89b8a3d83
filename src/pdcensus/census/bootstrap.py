"""Moving-block bootstrap over scrapes, as a weight matrix.

Scrapes are autocorrelated (a long prompt prefills for minutes; a residency tail lasts
minutes), so resampling single scrapes would give intervals that are far too narrow.
A moving-block bootstrap resamples runs of consecutive scrapes instead; the block is
long enough to hold the autocorrelation of the prefill-busy indicator.

Each replicate is represented as a row of counts (how often each scrape was drawn), so
that every statistic of the form ``sum(w * x) / sum(w * y)`` is a matrix product for
all replicates at once: ``(W @ x) / (W @ y)``. Row 0 of :func:`weights` is all ones:
the point estimate, computed by the same code as the replicates.
"""

from __future__ import annotations

import numpy as np

REPLICATES = 200
SEED = 20260101


def block_length(indicator: np.ndarray) -> int:
    """Block length in scrapes: about twice the integrated autocorrelation time.

    Bounded below by ``n ** (1/3)`` (the textbook rate) and above by ``n / 5`` (so at
    least five blocks fit the window).
    """
    x = np.asarray(indicator, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = x.size
    if n < 10:
        return max(1, n)
    lo, hi = max(2, int(np.ceil(n ** (1 / 3)))), max(2, n // 5)
    xc = x - x.mean()
    var = float(xc @ xc)
    if var <= 0:
        return min(lo, hi)
    tau = 0.5
    for lag in range(1, min(n // 2, 400)):
        r = float(xc[:-lag] @ xc[lag:]) / var
        if r < 0.05:
            break
        tau += r
    return int(min(max(int(np.ceil(2 * tau)), lo), hi))


def weights(n: int, block: int, replicates: int = REPLICATES, seed: int = SEED) -> np.ndarray:
    """``(replicates + 1, n)`` counts: row 0 all ones, then moving-block resamples."""
    out = np.ones((replicates + 1, max(n, 0)))
    if n == 0 or replicates == 0:
        return out
    block = int(min(max(block, 1), n))
    n_blocks = int(np.ceil(n / block))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n - block + 1, size=(replicates, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(replicates, -1)[:, :n]
    flat = idx + (np.arange(replicates) * n)[:, None]
    out[1:] = np.bincount(flat.ravel(), minlength=replicates * n).reshape(replicates, n)
    return out


def weighted_ratio(w: np.ndarray, numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``(W @ numerator) / (W @ denominator)`` per replicate; NaN where the denominator is 0."""
    num = w @ np.nan_to_num(numerator)
    den = w @ np.nan_to_num(denominator)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def interval(replicates: np.ndarray, level: float = 0.9) -> tuple[float, float]:
    """Percentile interval of the replicates (row 0, the point estimate, excluded)."""
    reps = np.asarray(replicates, dtype=np.float64)[1:]
    reps = reps[np.isfinite(reps)]
    if reps.size < 10:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(reps, [tail, 100 - tail])
    return float(lo), float(hi)
