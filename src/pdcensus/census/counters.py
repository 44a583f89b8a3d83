"""Per-interval counter increases over aligned scrape rows, with Prometheus's reset rule.

The census reads counters as increases between consecutive scrapes (never as a rate
over a fixed range window): the increase over the interval ``(t[prev], t[i]]`` is
``v[i] - v[prev]``, where ``prev`` is the previous row that holds a sample of the same
series (so an interval that spans a missed scrape is one longer interval, not a gap).
If the value went down the counter was reset, and, as in Prometheus's ``increase``,
the counter is taken to have restarted from zero: the increase is ``v[i]``.

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


def interval_increase(values: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(increase, valid)`` per cell: the increase since the column's previous sample.

    ``valid`` is True where the cell holds a sample and an earlier sample exists. A
    decrease is a reset: the increase is the new value (the counter restarted at 0).
    """
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(present, dtype=bool)
    squeeze = vals.ndim == 1
    if squeeze:
        vals, mask = vals[:, None], mask[:, None]
    prev = previous_present_index(mask)
    valid = mask & (prev >= 0)
    prev_vals = np.take_along_axis(vals, np.maximum(prev, 0), axis=0)
    delta = vals - prev_vals
    reset = valid & (delta < 0)
    increase = np.where(reset, vals, delta)
    increase = np.where(valid, increase, np.nan)
    if squeeze:
        return increase[:, 0], valid[:, 0]
    return increase, valid


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


def summed_increase(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Per-row increase summed over columns (one logical counter split over label sets).

    NaN where no column has a valid interval at that row.
    """
    increase, valid = interval_increase(values, present)
    if increase.ndim == 1:
        return increase
    total = np.where(valid, increase, 0.0).sum(axis=1)
    return np.where(valid.any(axis=1), total, np.nan)


def summed_gauge(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """Per-row sum of the present columns of a gauge (NaN where none is present)."""
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(present, dtype=bool)
    if vals.ndim == 1:
        return np.where(mask, vals, np.nan)
    total = np.where(mask, vals, 0.0).sum(axis=1)
    return np.where(mask.any(axis=1), total, np.nan)
