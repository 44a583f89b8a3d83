"""Per-interval counter increases over aligned scrape rows: the one rule for gaps and resets.

Every per-interval quantity the census builds from a counter (the step ledger, the token
rates, histogram bucket counts, vLLM's prefill reconstruction and counted steps, llama.cpp's
calls) comes from here, so that all of them agree on what an interval holds. The interval
ending at row ``i`` is ``(t[i-1], t[i]]``; a series' increase over it is ``v[i] - v[i-1]``,
and if the value went down the counter was reset and, as in Prometheus's ``increase``,
restarted from zero: the increase is ``v[i]``.

*A gap is neither zero nor merged.* A series that misses a sample at row ``g`` (never
scraped there, or a NaN/+Inf sample the census left out) while other series were scraped
still has a delta between its samples on either side; it is spread over the intervals it
spans in proportion to their lengths (the counter's delta over its true elapsed time, as
``rate`` would read it), so no row ever holds two intervals' worth. Putting the whole delta
into the interval after the gap (the old rule) paired it with other series read over one
interval: with ``engine_steps_total`` missing at every 11th scrape, chunk steps = steps -
decode steps doubled there and the ledger's chunk step fell from 41 ms to 15 ms. Dropping
the two intervals instead would lose the tokens of a counter that vLLM's reconstruction
balances cumulatively (admissions against completions). Totals are kept either way.

:func:`spanned` names the rows whose increase is such a share. A quantity that pairs
several counters interval by interval into a ratio (seconds per step) leaves those rows
out for all of them (``pdcensus.census.ledger``): a share is right for a rate, not for a ratio.

A scrape missed by *every* series is no gap: its row does not exist, and the interval over
it is one longer interval whose length every reader takes from the timestamps. A counter
summed over label sets adds each column's increases; a column that has not appeared yet (a
label child created later) or has gone for good adds nothing outside its life, as in a
PromQL ``sum``.

Vectorised over all columns at once (numpy): a day of 15 s scrapes with a few hundred
series must take milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def interval_increase(values: np.ndarray, present: np.ndarray,
                      times: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(increase, valid)`` per cell: the column's increase over the interval ending at this row.

    ``valid`` is True from the row after the column's first sample to its last sample. Where
    samples ``a < b`` are adjacent in the column, the rows ``a+1..b`` share ``v[b] - v[a]`` (or
    ``v[b]`` after a reset) in proportion to their intervals' lengths (``times``; equal shares
    without them): the counter's delta over its true elapsed time, so a row never holds more
    than its own interval. ``values``/``present`` are ``(rows,)`` or ``(rows, columns)``;
    ``times`` is ``(rows,)``, strictly increasing.
    """
    vals = np.asarray(values, dtype=np.float64)
    mask = np.asarray(present, dtype=bool)
    squeeze = vals.ndim == 1
    if squeeze:
        vals, mask = vals[:, None], mask[:, None]
    n = vals.shape[0]
    rows = np.arange(n)[:, None]
    last = np.maximum.accumulate(np.where(mask, rows, -1), axis=0) if n else np.empty(mask.shape, np.int64)
    before = np.full(mask.shape, -1, dtype=np.int64)  # the column's last sample before this row
    before[1:] = last[:-1]
    after = np.minimum.accumulate(np.where(mask, rows, n)[::-1], axis=0)[::-1] if n else before.copy()
    valid = (before >= 0) & (after < n)  # a sample on either side: the interval lies in the column's life
    a, b = np.clip(before, 0, max(n - 1, 0)), np.clip(after, 0, max(n - 1, 0))
    va, vb = np.take_along_axis(vals, a, axis=0), np.take_along_axis(vals, b, axis=0)
    with np.errstate(invalid="ignore"):
        span = np.where(vb < va, vb, vb - va)  # a drop is a reset: the counter restarted from zero
    clock = np.arange(n, dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
    own = np.zeros(n)
    own[1:] = np.diff(clock)
    length = clock[b] - clock[a]
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(b - a > 1, own[:, None] / np.where(length > 0, length, 1.0), 1.0)
    increase = np.where(valid, span * share, np.nan)
    if squeeze:
        return increase[:, 0], valid[:, 0]
    return increase, valid


def spanned(present: np.ndarray) -> np.ndarray:
    """Per row: some column's increase there is a share of a longer span (a missing sample at either end).

    ``present`` is ``(rows,)`` or ``(rows, columns)``. A quantity that pairs several counters'
    increases interval by interval (the step ledger's seconds per step) leaves these rows out
    for all of them: a share by elapsed time is right for a rate, not for a ratio of two counters.
    """
    mask = np.asarray(present, dtype=bool)
    if mask.ndim == 1:
        mask = mask[:, None]
    if mask.shape[0] == 0:
        return np.zeros(0, dtype=bool)
    seen_before = np.logical_or.accumulate(mask, axis=0)
    seen_after = np.logical_or.accumulate(mask[::-1], axis=0)[::-1]
    gap = ~mask & seen_before & seen_after  # absent inside the column's life
    touched = gap.copy()
    touched[1:] |= gap[:-1]
    out = np.asarray(touched.any(axis=1), dtype=bool)
    return out


def summed_increase(values: np.ndarray, present: np.ndarray, times: np.ndarray | None = None) -> np.ndarray:
    """Per-row increase summed over columns (one logical counter split over label sets).

    NaN where no column has an interval at that row (before any column's second sample, or
    after every column's last).
    """
    increase, valid = interval_increase(values, present, times)
    if increase.ndim == 1:
        return increase
    total = np.where(valid, increase, 0.0).sum(axis=1)
    return np.where(valid.any(axis=1), total, np.nan)


def cumulative_increase(cumulative: np.ndarray, times: np.ndarray | None = None) -> np.ndarray:
    """The same rule for one already-summed cumulative column (NaN = no sample at that row)."""
    column = np.asarray(cumulative, dtype=np.float64)
    return interval_increase(column, np.isfinite(column), times)[0]
