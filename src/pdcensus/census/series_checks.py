"""Series that lie about time: stuck gauges, non-monotonic histograms, counter dips.

Each of these reads as data to the census and none of them is (issue #25, item 4). They are
checked over the whole window the census was given and reported as named traps, each
saying what it changes, so that a reader knows which figures stand on a broken series:

- **stuck-gauge**: a gauge the census reads (decode or prefill rate, running sequences,
  KV use) never changes over the window while the engine works (its counters grow). The
  census then weighs a constant: per-stream rates and the buckets built on it show no
  contrast whatever the engine did.
- **non-monotonic-histogram**: at one scrape a bucket's cumulative count is above a higher
  bucket's. Quantiles and tail shares read from that histogram are not trustworthy.
- **counter-dip**: a counter goes down for one scrape and comes back to (or above) where it
  was: not a restart (a restart does not recover its old value). The shape split reads any
  decrease as a restart, so the window is cut there and the census weighs only the part
  after it (or the shape chosen with ``--segment``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from pdcensus.census.counters import counter_decreases, previous_present_index
from pdcensus.census.model import Trap
from pdcensus.series.model import Endpoint, Family, MetricType, SeriesKey, family_of

STUCK_GAUGE = "stuck-gauge"
NON_MONOTONIC_HISTOGRAM = "non-monotonic-histogram"
COUNTER_DIP = "counter-dip"
# A gauge is judged stuck only over at least this many present samples ...
MIN_STUCK_SAMPLES = 20
# ... while the engine's counters grew in at least this share of the window's intervals.
WORKING_SHARE = 0.5
# A bucket may exceed the next higher one by this relative amount (float noise) before it counts.
BUCKET_TOLERANCE = 1e-9


def _working(ep: Endpoint, counter_cols: list[int]) -> bool:
    """Whether some counter grew in most of the window's intervals (the engine was working)."""
    if not counter_cols or ep.n_scrapes < 2:
        return False
    with np.errstate(invalid="ignore"):
        grew = np.diff(ep.values[:, counter_cols], axis=0) > 0
    return float(grew.any(axis=1).mean()) >= WORKING_SHARE


def stuck_gauges(ep: Endpoint, families: dict[str, Family], read: Iterable[str]) -> list[str]:
    """Gauge series among the ``read`` sample names that never change while the engine works."""
    wanted = set(read)
    counters = [i for i, k in enumerate(ep.keys) if k.name.endswith("_total")]
    if not _working(ep, counters):
        return []
    out = []
    for i, key in enumerate(ep.keys):
        fam = family_of(key.name, families)
        if key.name not in wanted or (fam is not None and fam.type is not MetricType.GAUGE):
            continue
        vals = ep.values[ep.present[:, i], i]
        vals = vals[np.isfinite(vals)]
        if vals.size >= MIN_STUCK_SAMPLES and bool(np.all(vals == vals[0])):  # ptp overflows at +-max float
            out.append(f"{key.name} = {vals[0]:g} on all {vals.size} scrapes")
    return out


def _le(key: SeriesKey) -> float:
    raw = key.label("le", "")
    try:
        return float("inf") if raw in ("+Inf", "inf", "Inf") else float(raw or "nan")
    except ValueError:
        return float("nan")


def non_monotonic_histograms(ep: Endpoint) -> list[str]:
    """Histograms with a bucket count above a higher bucket's at the same scrape."""
    groups: dict[tuple[str, SeriesKey], list[tuple[float, int]]] = {}
    for i, key in enumerate(ep.keys):
        if key.name.endswith("_bucket") and not np.isnan(_le(key)):
            groups.setdefault((key.name, key.without("le")), []).append((_le(key), i))
    out = []
    for (name, _), cols in sorted(groups.items(), key=lambda g: (g[0][0], str(g[0][1]))):
        if len(cols) < 2:
            continue
        idx = [i for _, i in sorted(cols)]
        vals, ok = ep.values[:, idx], ep.present[:, idx]
        lower, higher = vals[:, :-1], vals[:, 1:]
        both = ok[:, :-1] & ok[:, 1:]
        with np.errstate(invalid="ignore"):
            bad = both & (lower > higher + BUCKET_TOLERANCE * np.maximum(np.abs(higher), 1.0))
        rows = np.flatnonzero(bad.any(axis=1))
        if rows.size:
            out.append(f"{name} on {rows.size} scrape(s), first at row {int(rows[0])}")
    return out


def counter_dips(ep: Endpoint) -> list[str]:
    """Counter series that go down for one scrape and come back: a dip, not a restart."""
    cols = [i for i, k in enumerate(ep.keys) if k.name.endswith("_total") or k.name.endswith("_count")]
    if not cols or ep.n_scrapes < 3:
        return []
    vals, ok = ep.values[:, cols], ep.present[:, cols]
    down = counter_decreases(vals, ok)
    prev = previous_present_index(ok)
    out = []
    for c in np.flatnonzero(down.any(axis=0)):
        present_rows = np.flatnonzero(ok[:, c])
        dips = 0
        for r in np.flatnonzero(down[:, c]):
            after = present_rows[present_rows > r]
            before = prev[r, c]
            if after.size and before >= 0 and vals[after[0], c] >= vals[before, c]:
                dips += 1
        if dips:
            out.append(f"{ep.keys[cols[c]].name} {dips}x")
    return out


def series_traps(ep: Endpoint, families: dict[str, Family], read: Iterable[str]) -> tuple[Trap, ...]:
    """The three checks as traps, fired or not, each saying what it changes."""
    stuck = stuck_gauges(ep, families, read)
    mono = non_monotonic_histograms(ep)
    dips = counter_dips(ep)
    return (
        Trap(STUCK_GAUGE, bool(stuck),
             (f"{STUCK_GAUGE}: {'; '.join(stuck[:3])} while the engine's counters grow: the census weighs a "
              "constant there, and per-stream rates and buckets built on it show no contrast whatever the "
              "engine did") if stuck else "no gauge the census reads is stuck while the engine works",
             float(len(stuck))),
        Trap(NON_MONOTONIC_HISTOGRAM, bool(mono),
             (f"{NON_MONOTONIC_HISTOGRAM}: a bucket count above a higher bucket's at the same scrape "
              f"({'; '.join(mono[:3])}): quantiles and tail shares read from it are not trustworthy")
             if mono else "every histogram's buckets are cumulative", float(len(mono))),
        Trap(COUNTER_DIP, bool(dips),
             (f"{COUNTER_DIP}: {'; '.join(dips[:3])} went down for one scrape and came back (not a restart): "
              "the shape split reads it as a restart and cuts the window there, so only one side is weighed")
             if dips else "no counter dips and recovers", float(len(dips))),
    )


__all__ = ["COUNTER_DIP", "NON_MONOTONIC_HISTOGRAM", "STUCK_GAUGE", "counter_dips", "non_monotonic_histograms",
           "series_traps", "stuck_gauges"]
