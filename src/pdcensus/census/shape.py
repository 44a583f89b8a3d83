"""Shape proof: split a window where the process or the build changed.

A *shape* is a run of scrapes from one process of one build. The runbook's failure
(a bucket table ranked across a restart and a build change) is why buckets are never
ranked across shapes. A new shape starts at:

- a counter that went down (every counter resets at a restart);
- a change of ``process_start_time_seconds`` (where exported);
- the first sample of a sample name the window did not carry before, when it changes
  the detected profile (a new build's counters, e.g. 1.0.13 -> 1.8.x);
- an interval far beyond the median scrape interval (:mod:`pdcensus.census.time_checks`):
  a clock jump or an outage, split even where counters run on through it;
- ``up`` = 0 or a gap over twice the scrape interval, unless a counter proves the
  process lived through it (a counter present on both sides, positive, not lower after:
  a restart would have reset it). A missed scrape is then noted, not split.

A shape is *proven* when at least one counter is present on most of its scrapes with a
non-zero value: then any restart inside it would have shown as a decrease.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.counters import counter_decreases, previous_present_index
from pdcensus.census.model import Segment, SegmentStart, ShapeResult
from pdcensus.census.time_checks import break_reason, breaks
from pdcensus.series.model import Endpoint, Family, MetricType, family_of
from pdcensus.series.profiles import PROFILES, Signal, detect_profile

# A gap longer than this many scrape intervals may hide a restart (DESIGN: "twice").
GAP_FACTOR = 2.0
# A counter must be present on at least this share of a shape's scrapes to prove it.
PROOF_PRESENCE_SHARE = 0.5


@dataclass(frozen=True)
class ShapeSplit:
    """The shape result plus, per shape, the endpoint row indices it holds."""

    result: ShapeResult
    rows: tuple[np.ndarray, ...]
    scrape_interval_seconds: float


def is_counter_sample(name: str, families: dict[str, Family]) -> bool:
    """A monotone sample name: a counter's ``_total`` or a histogram's ``_bucket``/``_count``."""
    fam = family_of(name, families)
    if fam is None:
        return name.endswith("_total")
    if fam.type == MetricType.COUNTER:
        return not name.endswith("_created")
    if fam.type == MetricType.HISTOGRAM:
        return name.endswith("_bucket") or name.endswith("_count")
    return False


def data_rows(endpoint: Endpoint) -> np.ndarray:
    """Rows that are good scrapes: ``up`` == 1, or, at a row with no ``up`` sample, any other sample.

    A recording that lost one ``up`` sample (a federation, a recorder, a file cut by hand) still holds
    that scrape's samples: the scrape happened, and only an ``up`` of 0 says it failed."""
    up_cols = [i for i, k in enumerate(endpoint.keys) if k.name == "up"]
    other = [i for i, k in enumerate(endpoint.keys) if k.name != "up"]
    some = (np.asarray(endpoint.present[:, other].any(axis=1), dtype=bool) if other
            else np.zeros(endpoint.n_scrapes, bool))
    if up_cols:
        vals = endpoint.values[:, up_cols]
        up_present = np.asarray(endpoint.present[:, up_cols].any(axis=1), dtype=bool)
        ok = np.asarray((endpoint.present[:, up_cols] & (vals == 1.0)).any(axis=1), dtype=bool)
        return np.flatnonzero(ok | (~up_present & some))
    return np.flatnonzero(some)


def _process_start_names() -> set[str]:
    return {p.signals[Signal.PROCESS_START] for p in PROFILES.values() if Signal.PROCESS_START in p.signals}


def _fmt_time(t: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def split_shapes(endpoint: Endpoint, families: dict[str, Family]) -> ShapeSplit:
    """Split the endpoint's good scrapes into shapes and say why each one starts."""
    rows = data_rows(endpoint)
    if rows.size == 0:
        return ShapeSplit(ShapeResult((), None, False, "no good scrape in the window"), (), float("nan"))
    ts = endpoint.timestamps[rows]
    interval = float(np.median(np.diff(ts))) if rows.size > 1 else float("nan")
    up_cols = [i for i, k in enumerate(endpoint.keys) if k.name == "up"]
    counter_cols = [i for i, k in enumerate(endpoint.keys) if is_counter_sample(k.name, families)]
    ps_names = _process_start_names()
    ps_cols = [i for i, k in enumerate(endpoint.keys) if k.name in ps_names]

    counter_index = np.asarray(counter_cols, dtype=np.intp)
    cvals = endpoint.values[np.ix_(rows, counter_index)]
    cpres = endpoint.present[np.ix_(rows, counter_index)]
    # asarray: numpy's stubs type ``any(axis=1)`` as "array or scalar"; on 2-D input it is an array
    decreased = (np.asarray(counter_decreases(cvals, cpres).any(axis=1)) if counter_cols
                 else np.zeros(rows.size, bool))
    ps_changed = np.zeros(rows.size, bool)
    if ps_cols:
        ps_index = np.asarray(ps_cols, dtype=np.intp)
        pv = endpoint.values[np.ix_(rows, ps_index)]
        pp = endpoint.present[np.ix_(rows, ps_index)]
        prev = previous_present_index(pp)
        prev_v = np.take_along_axis(pv, np.maximum(prev, 0), axis=0)
        ps_changed = (pp & (prev >= 0) & (np.abs(pv - prev_v) > 0.5)).any(axis=1)
    down_between = np.zeros(rows.size, bool)
    if up_cols:
        not_good = np.ones(endpoint.n_scrapes, bool)
        not_good[rows] = False
        cum = np.cumsum(not_good)
        down_between[1:] = cum[rows[1:]] - cum[rows[:-1]] > 0
    gap = np.zeros(rows.size, bool)
    if rows.size > 1 and np.isfinite(interval):
        gap[1:] = np.diff(ts) > GAP_FACTOR * interval
    broken = breaks(ts, interval)  # far beyond the median: a clock jump or an outage, never one interval

    present_rows = endpoint.present[rows]
    names = [k.name for k in endpoint.keys]
    first_row: dict[str, int] = {}
    for col in np.flatnonzero(present_rows.any(axis=0)):
        r = int(np.argmax(present_rows[:, col]))
        first_row[names[col]] = min(first_row.get(names[col], r), r)
    new_names_at: dict[int, set[str]] = {}
    for name, r in first_row.items():
        if r > 0 and name != "up":
            new_names_at.setdefault(r, set()).add(name)

    candidates = sorted(
        set(np.flatnonzero(decreased | ps_changed | down_between | gap | broken).tolist()) | set(new_names_at)
    )
    starts: list[tuple[int, SegmentStart, str]] = [(0, SegmentStart.WINDOW_START, "first scrape of the window")]
    notes: dict[int, list[str]] = {}
    seen: set[str] = set(n for n, r in first_row.items() if r == 0)
    seg_start = 0
    for pos in candidates:
        if pos == 0:
            continue
        seen_before = seen | {n for n, r in first_row.items() if seg_start < r < pos}
        why: tuple[SegmentStart, str] | None = None
        if decreased[pos]:
            cols = np.flatnonzero(counter_decreases(cvals, cpres)[pos])
            first = endpoint.keys[counter_cols[cols[0]]].name
            why = (SegmentStart.COUNTER_RESET, f"{len(cols)} counter series went down (e.g. {first}): a restart")
        elif ps_changed[pos]:
            why = (SegmentStart.PROCESS_START, "process_start_time_seconds changed: a new process")
        elif pos in new_names_at:
            before = detect_profile(seen_before)
            after = detect_profile(seen_before | new_names_at[pos])
            if before is not None and after is not None and before.profile.name != after.profile.name:
                example = sorted(new_names_at[pos])[0]
                why = (SegmentStart.NEW_FAMILY,
                       f"first sample of {example} (absent before): build {before.profile.name} -> "
                       f"{after.profile.name}")
        if why is None and (down_between[pos] or gap[pos]):
            kind = SegmentStart.UP_ZERO if down_between[pos] else SegmentStart.GAP
            what = "up=0" if down_between[pos] else f"a {ts[pos] - ts[pos - 1]:.0f} s gap"
            both = cpres[pos] & cpres[pos - 1] & (cvals[pos - 1] > 0) if counter_cols else np.zeros(0, bool)
            if not both.any():
                why = (kind, f"{what} and no counter shows whether the process restarted")
            elif not broken[pos]:
                notes.setdefault(len(starts) - 1, []).append(
                    f"{what} before {_fmt_time(ts[pos])}: {int(both.sum())} counters continuous, same process")
        # the same process, counters running on, but an interval no rate can be spread over: split anyway
        if why is None and broken[pos]:
            why = (SegmentStart.CLOCK_BREAK, break_reason(float(ts[pos] - ts[pos - 1]), interval))
        if why is not None:
            starts.append((pos, why[0], why[1]))
            seen = seen_before
            seg_start = pos

    segments: list[Segment] = []
    seg_rows: list[np.ndarray] = []
    unproven: list[int] = []
    for i, (pos, kind, reason) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else rows.size
        idx = rows[pos:end]
        sub = endpoint.present[idx]
        seg_names = {names[c] for c in np.flatnonzero(sub.any(axis=0))}
        det = detect_profile(seg_names)
        proof_cols = cpres[pos:end].mean(axis=0) >= PROOF_PRESENCE_SHARE if counter_cols else np.zeros(0, bool)
        positive = (np.nan_to_num(cvals[pos:end]) > 0).any(axis=0) if counter_cols else np.zeros(0, bool)
        proven = bool((proof_cols & positive).any())
        seg_notes = list(notes.get(i, []))
        if not proven:
            unproven.append(i)
            seg_notes.append("no counter present on most scrapes: a restart inside could not be seen")
        segments.append(Segment(i + 1, float(ts[pos]), float(ts[end - 1]), int(end - pos),
                                det.profile.name if det else "unknown", kind, reason, proven, tuple(seg_notes)))
        seg_rows.append(idx)
    reason = "one shape" if len(segments) == 1 else f"{len(segments)} shapes in the window"
    result = ShapeResult(tuple(segments), len(segments), not unproven, reason)
    return ShapeSplit(result, tuple(seg_rows), interval)


def choose_segment(split: ShapeSplit, segment: int | None) -> ShapeResult:
    """The shape result with ``analysed`` set to the chosen 1-based shape (``--segment``; latest if None)."""
    from pdcensus.errors import UsageError

    res = split.result
    n = len(res.segments)
    if segment is None:
        chosen = n if n else None
    elif not 1 <= segment <= n:
        raise UsageError(f"--segment {segment} does not exist; choose 1..{n} (the window has {n} shapes)")
    else:
        chosen = segment
    proven = chosen is not None and res.segments[chosen - 1].proven
    return ShapeResult(res.segments, chosen, proven, res.reason)
