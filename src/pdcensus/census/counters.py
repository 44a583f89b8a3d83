"""Counter resets and gauge sums over aligned scrape rows, for the shape proof and the signals.

A reset is read against the previous row that holds a sample of the same series: a counter
that went down there restarted (Prometheus's rule), whatever rows it missed in between. The
per-interval *increases* are not here: they live in ``pdcensus.series.increases``, the one
rule for gaps and resets every reader of a counter shares (a series missing at one scrape has
no increase over the two intervals beside it, never one merged over both).

Vectorised over all columns at once (numpy), because a day of 15 s scrapes with a few
hundred series must take milliseconds, not seconds.
"""

from __future__ import annotations

import numpy as np


def previous_present_index(present: np.ndarray) -> np.ndarray:
    """For each cell, the row index of the previous present cell in its column (-1 if none).

    ``present`` is ``(rows, columns)`` or ``(rows,)``; the result has the same shape.
    """
    mask = np.asarray(present, dtype=bool)
    squeeze = mask.ndim == 1
    if squeeze:
        mask = mask[:, None]
    rows = np.arange(mask.shape[0])[:, None]
    last = np.where(mask, rows, -1)
    last = np.maximum.accumulate(last, axis=0) if mask.shape[0] else last
    prev = np.full(mask.shape, -1, dtype=np.int64)
    if mask.shape[0] > 1:
        prev[1:] = last[:-1]
    return prev[:, 0] if squeeze else prev


def counter_decreases(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Boolean ``(rows, columns)``: the sample is lower than the column's previous sample.

    A relative tolerance of 1e-12 keeps float noise in a re-encoded value from reading
    as a restart.
    """
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(present, dtype=bool)
    prev = previous_present_index(mask)
    valid = mask & (prev >= 0)
    prev_vals = np.take_along_axis(vals, np.maximum(prev, 0), axis=0)
    tolerance = 1e-12 * np.maximum(np.abs(prev_vals), 1.0)
    with np.errstate(invalid="ignore", over="ignore"):  # a counter at -max float: its tolerance overflows to -inf
        return valid & (vals < prev_vals - tolerance)


def summed_gauge(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Per-row sum of the present columns of a gauge (NaN where none is present)."""
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(present, dtype=bool)
    if vals.ndim == 1:
        return np.where(mask, vals, np.nan)
    total = np.where(mask, vals, 0.0).sum(axis=1)
    return np.where(mask.any(axis=1), total, np.nan)
