"""Per engine, the step ledger's cumulative inputs derived from that engine's own metrics.

The census's ledger needs four counters per scrape: steps, decode-only steps, step seconds
and decode-only step seconds (radiance exports them by name). Other engines carry the same
facts under other shapes, described by :data:`pdcensus.series.profiles.LEDGER_SPECS`:

- SGLang: ``gpu_execution_seconds_total`` split by ``category`` (the forward mode) gives step
  seconds and decode-only step seconds; ``cuda_graph_passes_total`` counts decode batches. It
  counts no extend passes, so the mean chunk step is unavailable (its share of time is not).
- TGI: ``tgi_batch_forward_duration{method=prefill|decode}`` ``_count``/``_sum`` give all four.
- vLLM and llama.cpp: a step count only; the reason says where the rest could come from.

:func:`derive_ledger` returns the inputs (NaN where a quantity is unavailable) and an honest
reason; :func:`ledger_inputs` gives them per scrape. :func:`ledger_increases` is the one call
the census makes: per-interval increases keyed by the census's ledger signals, with the one
rule of ``series.increases`` (a drop is a reset; a series missing at a scrape shares its
increase over the intervals beside it by their length), so an engine without radiance's counters feeds the same
ledger code. :func:`term_increases` does the
same for any one :class:`~pdcensus.series.profiles.LedgerTerm` (e.g. SGLang's realtime token
counters, :data:`~pdcensus.series.profiles.RATE_TERMS`). :func:`ledger_samples` is the
inverse (ledger counters -> an engine's sample names), for the simulator's exporter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdcensus.errors import UsageError
from pdcensus.series.increases import spanned, summed_increase
from pdcensus.series.model import Endpoint, SeriesKey
from pdcensus.series.profiles import (
    LedgerQuantity,
    LedgerSpec,
    LedgerTerm,
    Profile,
    Signal,
    get_profile,
    ledger_spec,
)

_FOUR = (
    LedgerQuantity.STEPS,
    LedgerQuantity.DECODE_STEPS,
    LedgerQuantity.STEP_SECONDS,
    LedgerQuantity.DECODE_STEP_SECONDS,
)


@dataclass(frozen=True)
class LedgerInputs:
    """Cumulative ledger counters per scrape, aligned with ``timestamps`` (NaN = no sample).

    A quantity the engine cannot give is all-NaN and named in ``unavailable`` with the reason;
    ``sources`` says which series each available quantity was summed from. Counters keep
    their resets: the census computes increases with Prometheus's reset rule.
    """

    profile: str
    timestamps: np.ndarray
    steps: np.ndarray
    decode_steps: np.ndarray
    step_seconds: np.ndarray
    decode_step_seconds: np.ndarray
    held_steps: np.ndarray
    sources: dict[str, str] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """True when all four of steps, decode steps, step seconds, decode seconds exist."""
        return not any(q.value in self.unavailable for q in _FOUR)

    def column(self, quantity: LedgerQuantity) -> np.ndarray:
        values: np.ndarray = getattr(self, quantity.value)  # each quantity names an array field
        return values

    def means(self, lo: int = 0, hi: int | None = None) -> LedgerMeans:
        """The ledger over scrape rows ``lo..hi`` (inclusive ends): the phase ratio."""
        hi = len(self.timestamps) - 1 if hi is None else hi
        inc = {q: counter_increase(self.column(q)[lo : hi + 1]) for q in LedgerQuantity}
        steps, dsteps = inc[LedgerQuantity.STEPS], inc[LedgerQuantity.DECODE_STEPS]
        secs, dsecs = inc[LedgerQuantity.STEP_SECONDS], inc[LedgerQuantity.DECODE_STEP_SECONDS]
        return LedgerMeans(
            steps=steps,
            decode_steps=dsteps,
            step_seconds=secs,
            decode_step_seconds=dsecs,
            held_steps=inc[LedgerQuantity.HELD_STEPS],
            decode_step_mean_seconds=_ratio(dsecs, dsteps),
            chunk_step_mean_seconds=_ratio(secs - dsecs, steps - dsteps),
            chunk_share_of_steps=_ratio(steps - dsteps, steps),
            chunk_share_of_step_seconds=_ratio(secs - dsecs, secs),
        )


@dataclass(frozen=True)
class LedgerMeans:
    """Increases over a window and the means they give (NaN where not derivable)."""

    steps: float
    decode_steps: float
    step_seconds: float
    decode_step_seconds: float
    held_steps: float
    decode_step_mean_seconds: float
    chunk_step_mean_seconds: float
    chunk_share_of_steps: float
    chunk_share_of_step_seconds: float


@dataclass(frozen=True)
class LedgerDerivation:
    """What :func:`derive_ledger` found: the inputs (None if nothing usable) and why."""

    inputs: LedgerInputs | None
    reason: str


def _ratio(num: float, den: float) -> float:
    if not np.isfinite(num) or not np.isfinite(den) or den <= 0:
        return float("nan")
    return float(num / den)


def counter_increase(values: np.ndarray) -> float:
    """Increase of a cumulative counter over its present samples, resets counted as restarts.

    A drop means the process restarted from zero, so the new value is the increase since the
    reset (Prometheus's ``increase`` without extrapolation). NaN with fewer than two samples.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if len(v) < 2:
        return float("nan")
    d = np.diff(v)
    return float(np.where(d >= 0, d, v[1:]).sum())


def _term_keys(endpoint: Endpoint, term: LedgerTerm) -> tuple[str, list[SeriesKey], list[str]]:
    """The first candidate name with samples, its selected keys, and label values left out."""
    for name in term.sample_names:
        keys = [k for k in endpoint.select(name) if endpoint.column(k)[1].any()]
        if not keys:
            continue
        if term.values is None:
            return name, keys, []
        chosen: list[SeriesKey] = []
        left_out: list[SeriesKey] = []
        for key in keys:
            raw = key.label(term.label) or ""
            value = raw[len(term.strip_prefix):] if raw.startswith(term.strip_prefix) else raw
            (chosen if value in term.values else left_out).append(key)
        return name, chosen, sorted({k.label(term.label) or "" for k in left_out})
    return "", [], []


def _sum_columns(endpoint: Endpoint, keys: list[SeriesKey]) -> np.ndarray:
    """Row-wise sum; a row where no key has a sample is NaN, an absent label child is 0."""
    total = np.zeros(endpoint.n_scrapes)
    any_present = np.zeros(endpoint.n_scrapes, dtype=bool)
    for key in keys:
        vals, ok = endpoint.column(key)
        total += np.where(ok, vals, 0.0)
        any_present |= ok
    return np.where(any_present, total, np.nan)


def _family_rows(endpoint: Endpoint, name: str) -> np.ndarray:
    """Rows where any series of ``name`` has a sample (the family was scraped)."""
    rows = np.zeros(endpoint.n_scrapes, dtype=bool)
    for key in endpoint.select(name):
        rows |= endpoint.column(key)[1]
    return rows


def derive_ledger(endpoint: Endpoint, profile: Profile) -> LedgerDerivation:
    """Derive the ledger inputs for one endpoint under its engine's profile."""
    spec = ledger_spec(profile)
    nan = np.full(endpoint.n_scrapes, np.nan)
    columns: dict[LedgerQuantity, np.ndarray] = {}
    sources: dict[str, str] = {}
    unavailable = {q.value: why for q, why in spec.missing.items()}
    notes = list(spec.notes)
    for quantity, term in spec.terms.items():
        name, keys, left_out = _term_keys(endpoint, term)
        if not name:
            names = " or ".join(term.sample_names)
            unavailable[quantity.value] = f"{names} not in the recording"
            continue
        column = _sum_columns(endpoint, keys) if keys else nan.copy()
        # a scraped family whose selected children have not appeared yet counts zero
        column = np.where(np.isnan(column) & _family_rows(endpoint, name), 0.0, column)
        columns[quantity] = column
        picked = f"{{{term.label}=~{'|'.join(sorted(term.values))}}}" if term.values else ""
        sources[quantity.value] = f"sum({name}{picked})"
        if left_out:
            notes.append(f"{name}: left out {term.label} " + ", ".join(left_out))
    for quantity in LedgerQuantity:
        if quantity not in columns and quantity.value not in unavailable:
            unavailable[quantity.value] = f"profile {spec.profile!r} has no {quantity.value}"
    inputs = LedgerInputs(
        profile=spec.profile,
        timestamps=endpoint.timestamps,
        steps=columns.get(LedgerQuantity.STEPS, nan),
        decode_steps=columns.get(LedgerQuantity.DECODE_STEPS, nan),
        step_seconds=columns.get(LedgerQuantity.STEP_SECONDS, nan),
        decode_step_seconds=columns.get(LedgerQuantity.DECODE_STEP_SECONDS, nan),
        held_steps=columns.get(LedgerQuantity.HELD_STEPS, nan),
        sources=sources,
        unavailable=unavailable,
        notes=tuple(dict.fromkeys(notes)),
    )
    if not columns:
        return LedgerDerivation(None, _reason(spec, unavailable, usable=False))
    return LedgerDerivation(inputs, _reason(spec, unavailable, usable=True))


def _reason(spec: LedgerSpec, unavailable: dict[str, str], usable: bool) -> str:
    missing = {q: why for q, why in unavailable.items() if q != LedgerQuantity.HELD_STEPS.value}
    if not missing:
        return f"{spec.profile}: full step ledger from {spec.source}"
    lead = "partial step ledger" if usable else "no step ledger"
    detail = "; ".join(f"{q}: {why}" for q, why in missing.items())
    return f"{spec.profile}: {lead} ({detail})"


def ledger_inputs(endpoint: Endpoint, profile: Profile) -> LedgerInputs | None:
    """The ledger inputs for one endpoint, or None when the engine gives none of them."""
    return derive_ledger(endpoint, profile).inputs


def _sglang_ledger(steps: float, decode_steps: float, step_seconds: float, decode_step_seconds: float,
                   chunk_steps: float, chunk_seconds: float) -> list[tuple[str, dict[str, str], float]]:
    seconds = "sglang:gpu_execution_seconds_total"
    return [
        (seconds, {"category": "decode"}, decode_step_seconds),
        (seconds, {"category": "extend"}, chunk_seconds),
        ("sglang:cuda_graph_passes_total", {"mode": "decode_none"}, decode_steps),
    ]


def _tgi_ledger(steps: float, decode_steps: float, step_seconds: float, decode_step_seconds: float,
                chunk_steps: float, chunk_seconds: float) -> list[tuple[str, dict[str, str], float]]:
    base = "tgi_batch_forward_duration"
    return [
        (base + "_count", {"method": "prefill"}, chunk_steps),
        (base + "_sum", {"method": "prefill"}, chunk_seconds),
        (base + "_count", {"method": "decode"}, decode_steps),
        (base + "_sum", {"method": "decode"}, decode_step_seconds),
    ]


def _radiance_ledger(steps: float, decode_steps: float, step_seconds: float, decode_step_seconds: float,
                     chunk_steps: float, chunk_seconds: float) -> list[tuple[str, dict[str, str], float]]:
    prof = get_profile("radiance-1.8")
    return [
        (str(prof.name_of(Signal.STEPS)), {}, steps),
        (str(prof.name_of(Signal.STEPS_DECODE)), {}, decode_steps),
        (str(prof.name_of(Signal.STEP_SECONDS)), {}, step_seconds),
        (str(prof.name_of(Signal.STEP_SECONDS_DECODE)), {}, decode_step_seconds),
    ]


# profile -> its ledger counters as samples (the profiles whose names carry the ledger)
_LEDGER_EXPORTS = {"sglang": _sglang_ledger, "tgi": _tgi_ledger, "radiance-1.8": _radiance_ledger}


def ledger_samples(
    profile_name: str,
    steps: float,
    decode_steps: float,
    step_seconds: float,
    decode_step_seconds: float,
) -> list[tuple[str, dict[str, str], float]]:
    """The inverse: cumulative ledger counters as ``(sample name, labels, value)`` samples.

    For an exporter writing a run under another engine's names. Only engines whose names
    carry the ledger are accepted (sglang puts chunk seconds under ``category="extend"``;
    its decode-batch counter is ``mode="decode_none"``).
    """
    chunk_steps, chunk_seconds = steps - decode_steps, step_seconds - decode_step_seconds
    export = _LEDGER_EXPORTS.get(profile_name)
    if export is not None:
        return export(steps, decode_steps, step_seconds, decode_step_seconds, chunk_steps, chunk_seconds)
    raise UsageError(
        f"profile {profile_name!r} carries no step ledger to export; choose one of: "
        "radiance-1.8, sglang, tgi"
    )


_SIGNAL_OF = {
    LedgerQuantity.STEPS: Signal.STEPS,
    LedgerQuantity.DECODE_STEPS: Signal.STEPS_DECODE,
    LedgerQuantity.STEP_SECONDS: Signal.STEP_SECONDS,
    LedgerQuantity.DECODE_STEP_SECONDS: Signal.STEP_SECONDS_DECODE,
    LedgerQuantity.HELD_STEPS: Signal.STEPS_HELD,
}


def term_increases(endpoint: Endpoint, rows: np.ndarray, term: LedgerTerm) -> np.ndarray | None:
    """Per-interval increases over ``rows`` of the series a term selects; None if it has none."""
    rows = np.asarray(rows, dtype=np.int64)
    name, keys, _ = _term_keys(endpoint, term)
    if not name:
        return None
    if not keys:  # the family is scraped but the selected children never appeared
        zero = np.where(_family_rows(endpoint, name)[rows], 0.0, np.nan)
        zero[:1] = np.nan  # the first row has no interval
        return zero
    index = {key: i for i, key in enumerate(endpoint.keys)}
    cols = np.asarray([index[k] for k in keys], dtype=np.intp)
    return summed_increase(endpoint.values[np.ix_(rows, cols)], endpoint.present[np.ix_(rows, cols)],
                           endpoint.timestamps[rows])


def term_spanned(endpoint: Endpoint, rows: np.ndarray, term: LedgerTerm) -> np.ndarray | None:
    """Per row over ``rows``, whether the term's increase there is a share of a longer span (``series.increases``)."""
    rows = np.asarray(rows, dtype=np.int64)
    _, keys, _ = _term_keys(endpoint, term)
    if not keys:
        return None
    index = {key: i for i, key in enumerate(endpoint.keys)}
    cols = np.asarray([index[k] for k in keys], dtype=np.intp)
    return spanned(endpoint.present[np.ix_(rows, cols)])


def ledger_increases(endpoint: Endpoint, rows: np.ndarray, profile: Profile) -> dict[Signal, np.ndarray]:
    """Per-interval increases of the ledger counters over ``rows``, keyed by census signal.

    Only the quantities the engine gives are present (e.g. SGLang: no ``STEPS``); the census
    treats a missing key as "no ledger for this quantity", as for radiance 1.0.13.
    """
    out: dict[Signal, np.ndarray] = {}
    for quantity, term in ledger_spec(profile).terms.items():
        inc = term_increases(endpoint, rows, term)
        if inc is not None:
            out[_SIGNAL_OF[quantity]] = inc
    return out


def ledger_spanned(endpoint: Endpoint, rows: np.ndarray, profile: Profile) -> dict[Signal, np.ndarray]:
    """Per ledger signal, the rows over ``rows`` whose increase is a share of a longer span (``series.increases``)."""
    rows = np.asarray(rows, dtype=np.int64)
    index = {key: i for i, key in enumerate(endpoint.keys)}
    out: dict[Signal, np.ndarray] = {}
    for quantity, term in ledger_spec(profile).terms.items():
        _, keys, _ = _term_keys(endpoint, term)
        if keys:
            cols = np.asarray([index[k] for k in keys], dtype=np.intp)
            out[_SIGNAL_OF[quantity]] = spanned(endpoint.present[np.ix_(rows, cols)])
    return out
