"""What a usable sample is, decided once at the census's entry; the rest is left out and named.

A scrape can carry any float: an exporter dividing by zero writes ``+Inf`` or ``NaN``, a
broken one writes ``1.7e308`` or ``-1e300``, a re-encoded value can be a denormal. None of
those says anything about decoders, and fed to the census's arithmetic (products of
weights, sums over label sets, logarithms for the background level) they overflow or turn
every figure into NaN. So before the shape is proven, every sample of a series the census
reads (the signals its profiles name, and every counter, which the shape proof reads for
resets) is checked here, and one that is not usable is *left out*: marked absent, exactly as
if that scrape had missed it. The report names each series and how many of its samples
were left out (the ``unusable-samples-left-out`` trap and a warning under the bucket table),
so nothing is dropped silently.

Gauges: a sample is usable when it is finite and its magnitude is within a generous bound
for what the signal measures (:data:`GAUGE_BOUNDS`). Each bound is orders of magnitude
above anything an endpoint can produce, so no real reading is ever left out:

- tokens per second (decode, prefill): ``1e9``. One accelerator prefills on the order of
  1e4-1e5 tokens/s and decodes less; a thousand of them behind one endpoint stay below 1e8.
- a count of sequences (running, waiting, preempted depth): ``1e9``. Every queued
  sequence holds at least its prompt in host memory (a kilobyte or more), so 1e9 of them
  would need a terabyte for the queue alone.
- KV-cache usage: ``100``. It is a fraction in [0, 1]; some exporters scale it to percent.
- process start time: ``1e11`` seconds since the epoch (the year 5138).

Counters (a counter's ``_total``, a histogram's ``_bucket``, ``_count`` and ``_sum``; TGI's
profile reads prompt tokens and forward seconds from ``_sum`` series): a sample is
usable when it is finite and its magnitude is at most ``2**53`` (:data:`MAX_COUNTER_VALUE`):
above it a float64 cannot add one, so increases between scrapes are rounding, not counts. A
counter that goes down within those limits (even below zero) is still a reset, by
Prometheus's rule (``pdcensus.census.counters``), and splits the shape there.

At the other end, a usable magnitude smaller than :data:`RESOLUTION` (``1e-9`` of the signal's unit: a
nanosecond on a seconds counter, a billionth of a token, step or sequence) is read as 0: no
counter counts in such steps and no figure the census reports can tell the difference, and a
denormal (``5e-324``) in a denominator would otherwise overflow every ratio built on it. With
every input 0 or between ``1e-9`` and its bound, the census's ratios and products of weights
stay far inside float64's range, so its arithmetic needs no overflow guard (one exception:
a counter's increase over an interval that a file makes a denormal long, see ``signals.py``).

Rates the census derives from counters (increase / interval, on engines without rate
gauges) get the tokens-per-second bound too (:func:`bounded_rate`), since a jump to a huge
but finite counter value makes a finite rate no engine could reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.model import Trap
from pdcensus.census.shape import is_counter_sample
from pdcensus.series.model import Endpoint, Family, MetricType, SeriesKey, family_of
from pdcensus.series.profiles import COUNTER_SIGNALS, HISTOGRAM_SIGNALS, PROFILES, Signal

TRAP_NAME = "unusable-samples-left-out"
MAX_TOKENS_PER_SECOND = 1e9
MAX_SEQUENCES = 1e9
MAX_KV_CACHE_USAGE = 100.0
MAX_PROCESS_START_SECONDS = 1e11
# Above 2**53 a float64 cannot represent one more: the counter can no longer count.
MAX_COUNTER_VALUE = float(2**53)
# Magnitudes below this (in the signal's own unit: tokens/s, sequences, tokens, steps, seconds) are 0.
RESOLUTION = 1e-9


@dataclass(frozen=True)
class Bound:
    """The largest magnitude a sample can have and still mean something, with its unit."""

    limit: float
    unit: str


GAUGE_BOUNDS: dict[Signal, Bound] = {
    Signal.DECODE_TPS: Bound(MAX_TOKENS_PER_SECOND, "tokens/s"),
    Signal.PREFILL_TPS: Bound(MAX_TOKENS_PER_SECOND, "tokens/s"),
    Signal.RUNNING: Bound(MAX_SEQUENCES, "sequences"),
    Signal.WAITING: Bound(MAX_SEQUENCES, "sequences"),
    Signal.PREEMPTED_DEPTH: Bound(MAX_SEQUENCES, "sequences"),
    Signal.KV_CACHE_USAGE: Bound(MAX_KV_CACHE_USAGE, "(fraction or percent)"),
    Signal.PROCESS_START: Bound(MAX_PROCESS_START_SECONDS, "s since the epoch"),
}
COUNTER_BOUND = Bound(MAX_COUNTER_VALUE, "(2^53, where a float64 stops counting)")
RATE_BOUND = GAUGE_BOUNDS[Signal.DECODE_TPS]


@dataclass(frozen=True)
class LeftOut:
    """One series' samples that were left out, and why."""

    series: str
    samples: int  # left out
    of_samples: int  # the series' samples in the window
    not_finite: int
    beyond_bound: int
    bound: Bound

    @property
    def text(self) -> str:
        why = [f"{self.not_finite} not finite (NaN or +/-Inf)" if self.not_finite else "",
               f"{self.beyond_bound} beyond +/-{self.bound.limit:.3g} {self.bound.unit}" if self.beyond_bound else ""]
        return (f"left out {self.samples} of {self.of_samples} samples of {self.series}: "
                f"{', '.join(w for w in why if w)}; read as missed scrapes")


@dataclass(frozen=True)
class Admission:
    """The endpoint with unusable samples marked absent, and what was left out."""

    endpoint: Endpoint
    left_out: tuple[LeftOut, ...]


def _gauge_bounds_by_name() -> dict[str, Bound]:
    out: dict[str, Bound] = {}
    for profile in PROFILES.values():
        for signal, name in profile.signals.items():
            bound = GAUGE_BOUNDS.get(signal)
            if bound is None or signal in COUNTER_SIGNALS or signal in HISTOGRAM_SIGNALS:
                continue
            if name not in out or out[name].limit < bound.limit:
                out[name] = bound
    return out


_GAUGE_BOUND_OF = _gauge_bounds_by_name()


def _series_name(key: SeriesKey) -> str:
    """The series as a selector, without job and instance (the report is per endpoint already)."""
    return str(key.without("job", "instance"))


def _is_histogram_sum(name: str, families: dict[str, Family]) -> bool:
    """A histogram's ``_sum``: read as a counter by some profiles (TGI's prompt tokens, its forward seconds)."""
    family = family_of(name, families)
    return name.endswith("_sum") and family is not None and family.type == MetricType.HISTOGRAM


def admit_samples(endpoint: Endpoint, families: dict[str, Family]) -> Admission:
    """Mark absent every sample the census reads that is not a usable number (see the module doc).

    Usable magnitudes below :data:`RESOLUTION` are read as 0.

    Series the census never reads (other gauges, ``up``) are kept as they are. The endpoint
    given is not changed; when anything was left out, a copy is returned whose ``present`` mask
    is narrower and whose left-out cells hold NaN (what an absent cell holds everywhere).
    """
    bounds = [COUNTER_BOUND if is_counter_sample(key.name, families) or _is_histogram_sum(key.name, families)
              else _GAUGE_BOUND_OF.get(key.name) for key in endpoint.keys]
    cols = np.array([i for i, b in enumerate(bounds) if b is not None], dtype=np.intp)
    if cols.size == 0 or endpoint.n_scrapes == 0:
        return Admission(endpoint, ())
    limits = np.array([bounds[i].limit for i in cols if bounds[i] is not None])
    v, p = endpoint.values[:, cols], endpoint.present[:, cols]
    finite = np.isfinite(v)
    # magnitudes of finite values only: NaN and inf never reach a comparison or an abs
    magnitude = np.abs(np.where(finite, v, 0.0))
    not_finite = p & ~finite
    beyond = p & (magnitude > limits[None, :])
    bad = not_finite | beyond
    tiny = p & (magnitude > 0.0) & (magnitude < RESOLUTION)
    if not bad.any() and not tiny.any():
        return Admission(endpoint, ())
    values, present = endpoint.values.copy(), endpoint.present.copy()
    values[:, cols] = np.where(tiny, 0.0, np.where(bad, np.nan, v))  # an absent cell holds NaN everywhere
    present[:, cols] = p & ~bad
    left_out: list[LeftOut] = []
    for j in np.flatnonzero(bad.any(axis=0)):
        bound = bounds[cols[j]]
        assert bound is not None
        left_out.append(LeftOut(_series_name(endpoint.keys[cols[j]]), int(bad[:, j].sum()), int(p[:, j].sum()),
                                int(not_finite[:, j].sum()), int(beyond[:, j].sum()), bound))
    cleaned = Endpoint(endpoint.job, endpoint.instance, endpoint.timestamps, list(endpoint.keys), values, present)
    return Admission(cleaned, tuple(left_out))


def bounded_rate(rate: np.ndarray, series: str) -> tuple[np.ndarray, LeftOut | None]:
    """A rate derived from a counter, NaN where it is not finite or beyond the tokens/s bound.

    NaN where the interval was missing is not counted as left out (it never was a sample);
    only a rate that was computed and is unusable is.
    """
    r = np.asarray(rate, dtype=np.float64)
    inf = np.isinf(r)
    finite = np.isfinite(r)
    beyond = finite & (np.abs(np.where(finite, r, 0.0)) > RATE_BOUND.limit)
    bad = inf | beyond
    if not bad.any():
        return r, None
    left = LeftOut(series, int(bad.sum()), int((finite | inf).sum()), int(inf.sum()), int(beyond.sum()), RATE_BOUND)
    return np.where(bad, np.nan, r), left


def left_out_trap(left_out: tuple[LeftOut, ...]) -> Trap:
    """The trap that says what was left out (fired) or that every sample read was usable."""
    total = sum(x.samples for x in left_out)
    if not left_out:
        return Trap(TRAP_NAME, False, "every sample the census read is a finite number within its bound", 0.0)
    series = "; ".join(f"{x.series} {x.samples} of {x.of_samples}" for x in left_out)
    return Trap(TRAP_NAME, True,
                f"{total} samples left out as missed scrapes (not finite, or beyond any physical value "
                f"for their signal): {series}", float(total))
