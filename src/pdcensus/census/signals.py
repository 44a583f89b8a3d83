"""The census's inputs for one shape: logical signals read through the metric profile.

Every pass reads :class:`ShapeSignals`, never a sample name: the profile
(``pdcensus.series.profiles``) maps each logical signal to the engine's name. Gauges
are summed over label sets (e.g. several ``model_name`` values) per scrape; counters
become per-interval increases; classic histograms become per-interval bucket
increases by ``le``, all by the one rule of ``pdcensus.series.increases`` (a series missing
at a scrape shares its increase over the intervals beside it by their length, never putting
two intervals' worth into one).

Decode and prefill come from the same-scrape gauges where the engine exports them
(radiance). Where they exist only as counters (plain vLLM, SGLang), each is the
counter's increase over the scrape interval divided by the interval's length, and
``rates_from_counters`` says so: those are interval means, not same-instant gauges.
Engines that carry the step ledger under other names (TGI's per-method forward
histograms, SGLang's per-mode execution seconds) get it from
``pdcensus.series.engine_ledger``. Where an engine carries token counts more promptly under
another name (SGLang's ``realtime_tokens_total{mode}``: ``RATE_TERMS``), that one is read.

vLLM's V1 engine counts a prompt when its prefill *ends* (``pdcensus.census.prefill_progress``
has the source lines): on a vLLM shape the prefill signal is that module's reconstruction,
computed tokens (``prompt_tokens_by_source_total{source="local_compute"}`` where exported)
spread back over the time they took; ``prefill_basis`` says which basis was used and
``prefill_progress`` what it rests on and what it cannot see.
llama.cpp's server counts generated tokens at request end and prompt work at call end:
``pdcensus.series.llamacpp`` gives its decode rows, spread prompt work, decoders and ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdcensus.census.counters import summed_gauge
from pdcensus.census.prefill_progress import PrefillBasis, PrefillProgress, reconstruct
from pdcensus.census.usable import LeftOut, bounded_rate
from pdcensus.census.vllm_counted import VllmCounted, prompt_or_queries_spanned, vllm_counted
from pdcensus.engines import PromptCounting, record
from pdcensus.series.engine_ledger import ledger_increases, ledger_spanned, term_increases
from pdcensus.series.increases import spanned, summed_increase
from pdcensus.series.llamacpp import census_overrides as llamacpp_overrides
from pdcensus.series.model import Endpoint
from pdcensus.series.profiles import (
    COUNTER_SIGNALS,
    HISTOGRAM_SIGNALS,
    LEDGER_SIGNALS,
    RATE_TERMS,
    VLLM_COMPUTED_PROMPT,
    VLLM_FINISHED,
    VLLM_PREFIX_CACHE_HITS,
    VLLM_PREFIX_CACHE_QUERIES,
    VLLM_V1_MARKERS,
    LedgerTerm,
    Profile,
    Signal,
)
from pdcensus.series.vllm_steps import CountedSteps



@dataclass(frozen=True)
class Histogram:
    """Per-interval increases of a classic histogram's cumulative buckets."""

    family: str
    upper_bounds: np.ndarray
    increases: np.ndarray  # (rows, buckets); NaN where no valid interval


@dataclass(frozen=True)
class ShapeSignals:
    """One shape's rows (good scrapes) and the signals the census reads from them."""

    times: np.ndarray
    interval_seconds: np.ndarray  # seconds since the previous row; NaN on the first
    scrape_interval_seconds: float
    profile: Profile
    names: frozenset[str]
    gauges: dict[Signal, np.ndarray] = field(default_factory=dict)
    increases: dict[Signal, np.ndarray] = field(default_factory=dict)
    histograms: dict[Signal, Histogram] = field(default_factory=dict)
    decode_tokens_per_second: np.ndarray | None = None
    prefill_tokens_per_second: np.ndarray | None = None
    rates_from_counters: bool = False
    # rates derived from counters that were left out as unusable (see pdcensus.census.usable)
    left_out: tuple[LeftOut, ...] = ()
    # what the prefill signal is made of (None: no prefill signal)
    prefill_basis: PrefillBasis | None = None
    # vLLM: the completion-time counter's reconstruction (pdcensus.census.prefill_progress)
    prefill_progress: PrefillProgress | None = None
    # requests finished per interval (vllm:request_success_total), for pdcensus.census.guards
    finished_requests: np.ndarray | None = None
    # vLLM: counted steps and the intervals that carried prefill (pdcensus.series.vllm_steps)
    counted_steps: CountedSteps | None = None
    chunk_intervals: np.ndarray | None = None
    # intervals with a prompt admitted and not yet done at either end: a prefill that runs across scrapes
    prefill_across: np.ndarray | None = None
    # vLLM where too few intervals are free of prefill to time a decode-only step (no ledger, and the three
    # fields above None): its counted steps and prefill mask, read by the long inter-token gaps alone
    untimed_steps: VllmCounted | None = None
    # per counter signal, the rows whose increase is a share of a span over a missing sample
    # (pdcensus.series.increases.spanned); absent: none is
    spanned: dict[Signal, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.times)

    def gauge(self, signal: Signal) -> np.ndarray | None:
        return self.gauges.get(signal)

    def increase(self, signal: Signal) -> np.ndarray | None:
        return self.increases.get(signal)


def _parse_le(text: str | None) -> float:
    if text is None:
        return float("nan")
    try:
        return float(text.replace("Inf", "inf"))
    except ValueError:
        return float("nan")


def extract_signals(endpoint: Endpoint, rows: np.ndarray, profile: Profile,
                    scrape_interval_seconds: float, *, scraped_names: frozenset[str] = frozenset()) -> ShapeSignals:
    """Read every signal the profile names from the given endpoint rows (one shape).

    ``scraped_names``: names that were scraped in these rows but whose every sample was left
    out as unusable (``pdcensus.census.usable``); such a gauge or counter is read as all
    missing (NaN), not as never exported, so the metric set stays what the endpoint exports.
    """
    rows = np.asarray(rows, dtype=np.int64)
    times = endpoint.timestamps[rows]
    dt = np.full(rows.size, np.nan)
    if rows.size > 1:
        dt[1:] = np.diff(times)
    by_name: dict[str, list[int]] = {}
    for i, key in enumerate(endpoint.keys):
        by_name.setdefault(key.name, []).append(i)
    values = endpoint.values[rows]
    present = endpoint.present[rows]
    names = frozenset(n for n, cols in by_name.items() if present[:, cols].any())

    gauges: dict[Signal, np.ndarray] = {}
    increases: dict[Signal, np.ndarray] = {}
    spans: dict[Signal, np.ndarray] = {}
    histograms: dict[Signal, Histogram] = {}
    for signal, name in profile.signals.items():
        if signal in HISTOGRAM_SIGNALS:
            cols = by_name.get(name + "_bucket", [])
            groups: dict[float, list[int]] = {}
            for c in cols:
                le = _parse_le(endpoint.keys[c].label("le"))
                if not np.isnan(le):
                    groups.setdefault(le, []).append(c)
            if not groups or not present[:, cols].any():
                continue
            bounds = np.array(sorted(groups))
            inc = np.column_stack([summed_increase(values[:, groups[b]], present[:, groups[b]], times)
                                   for b in bounds])
            histograms[signal] = Histogram(name, bounds, inc)
            continue
        cols = by_name.get(name, [])
        if not cols:
            continue
        if not present[:, cols].any():
            if name in scraped_names:
                (increases if signal in COUNTER_SIGNALS else gauges)[signal] = np.full(rows.size, np.nan)
            continue
        if signal in COUNTER_SIGNALS:
            increases[signal] = summed_increase(values[:, cols], present[:, cols], times)
            spans[signal] = spanned(present[:, cols])
        else:
            gauges[signal] = summed_gauge(values[:, cols], present[:, cols])

    prompt_term = False
    for sig, term in RATE_TERMS.get(profile.name, {}).items():
        term_inc = term_increases(endpoint, rows, term)
        if term_inc is not None:
            increases[sig] = term_inc
            prompt_term |= sig is Signal.PROMPT_TOKENS

    rules = record(profile.engine)
    if rules.prompt_counting is PromptCounting.PER_CALL_AT_END:  # read as it counts (series.llamacpp)
        read = llamacpp_overrides(endpoint, rows, dt)
        if read is not None:
            increases.update(read[0])
            for sig in read[0]:  # read as llama.cpp counts, not from the plain counters
                spans.pop(sig, None)
            gauges.update(read[1])

    if not all(sig in increases for sig in LEDGER_SIGNALS):
        # Engines whose ledger is derived from other names (TGI, SGLang, ...): see engine_ledger.
        derived_spans = ledger_spanned(endpoint, rows, profile)
        for sig, inc in ledger_increases(endpoint, rows, profile).items():
            if sig not in increases:
                increases[sig] = inc
                if sig in derived_spans:
                    spans[sig] = derived_spans[sig]

    decode = gauges.get(Signal.DECODE_TPS)
    prefill = gauges.get(Signal.PREFILL_TPS)
    from_counters = False
    left_out: list[LeftOut] = []
    if decode is None or prefill is None:
        gen, prompt = increases.get(Signal.GENERATION_TOKENS), increases.get(Signal.PROMPT_TOKENS)
        if gen is not None and prompt is not None:
            # admitted increases are at most 2**53, but a file may put two scrapes a denormal apart:
            # the overflow is then +inf, which bounded_rate leaves out (and counts) like any rate
            # beyond the tokens/s bound
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                raw_decode, raw_prefill = gen / dt, prompt / dt
            decode, gen_left = bounded_rate(raw_decode, f"rate of {profile.name_of(Signal.GENERATION_TOKENS)}")
            prefill, prompt_left = bounded_rate(raw_prefill, f"rate of {profile.name_of(Signal.PROMPT_TOKENS)}")
            left_out += [x for x in (gen_left, prompt_left) if x is not None]
            from_counters = True
        else:
            decode = prefill = None
    basis = None if prefill is None else _counter_basis(profile, prompt_term) if from_counters else PrefillBasis.GAUGE
    progress = None
    finished = _counter(values, present, by_name, VLLM_FINISHED, times) if rules.prefill_progress else None
    # V1 counts a prompt when its prefill ends; V0 counted each chunk as it was scheduled
    # (vllm/engine/llm_engine.py ``_get_stats``: ``num_prompt_tokens_iter += token_chunk_size``).
    # V1 before 0.9.2 still exported V0's gpu_cache_usage_perc, but only V1 has prefix-cache counters.
    v1 = profile.name == "vllm-v1" or (rules.prefill_progress and bool(names & VLLM_V1_MARKERS))
    if from_counters and v1 and prefill is not None:
        progress = _vllm_progress(endpoint, rows, times, dt, increases, values, present, by_name,
                                  gauges.get(Signal.WAITING), finished, Signal.ITERATION_TOKENS in histograms, spans)
        prefill, _ = bounded_rate(progress.tokens_per_second, "reconstructed prefill rate")
        basis = progress.basis
    ttft = histograms.get(Signal.TTFT)
    counted = vllm_counted(profile, endpoint, rows, dt, increases, gauges, prefill, Signal.ITL in histograms,
                           ttft.increases[:, -1] if ttft is not None else None, spans)
    timed = counted if counted is not None and counted.timed else None
    untimed = counted if counted is not None and not counted.timed else None
    return ShapeSignals(times, dt, scrape_interval_seconds, profile, names, gauges, increases, histograms,
                        decode, prefill, from_counters, tuple(left_out), basis, progress, finished,
                        timed.steps if timed else None, timed.chunk if timed else None,
                        timed.across if timed else None, untimed, spans)


def _counter_basis(profile: Profile, prompt_term: bool) -> PrefillBasis:
    """When an engine's prompt counter moves (see pdcensus.series.profiles for the sources)."""
    counting = record(profile.engine).prompt_counting
    if counting is PromptCounting.AT_ARRIVAL:  # tgi_request_input_length is observed at validation
        return PrefillBasis.ARRIVAL_COUNTER
    if counting is PromptCounting.PER_CALL_AT_END:  # spread back by prompt_seconds_total (series.llamacpp)
        return PrefillBasis.SPREAD_BACK
    if counting is PromptCounting.AT_REQUEST_END and not prompt_term:  # sglang's prompt_tokens_total
        return PrefillBasis.REQUEST_END_COUNTER
    return PrefillBasis.COUNTER_AS_COMPUTED


def _counter(values: np.ndarray, present: np.ndarray, by_name: dict[str, list[int]], name: str,
             times: np.ndarray) -> np.ndarray | None:
    cols = by_name.get(name, [])
    return summed_increase(values[:, cols], present[:, cols], times) if cols and present[:, cols].any() else None


def _vllm_progress(endpoint: Endpoint, rows: np.ndarray, times: np.ndarray, dt: np.ndarray,
                   increases: dict[Signal, np.ndarray], values: np.ndarray, present: np.ndarray,
                   by_name: dict[str, list[int]], waiting: np.ndarray | None, finished: np.ndarray | None,
                   iteration_tokens: bool, spans: dict[Signal, np.ndarray]) -> PrefillProgress:
    """vLLM's prompt counter moves when a prefill ends: reconstruct when it ran."""
    prompt = increases[Signal.PROMPT_TOKENS]
    local = term_increases(endpoint, rows, LedgerTerm((VLLM_COMPUTED_PROMPT,), "source",
                                                      frozenset({"local_compute"})))
    hits, queries = (_counter(values, present, by_name, VLLM_PREFIX_CACHE_HITS, times),
                     _counter(values, present, by_name, VLLM_PREFIX_CACHE_QUERIES, times))
    queries_name = VLLM_PREFIX_CACHE_QUERIES
    if queries is None:  # vLLM V1 < 0.9.2 (in blocks in its first builds: the once-per-prompt check rejects those)
        queries_name = "vllm:gpu_prefix_cache_queries_total"
        hits, queries = (_counter(values, present, by_name, "vllm:gpu_prefix_cache_hits_total", times),
                         _counter(values, present, by_name, queries_name, times))
    merged = prompt_or_queries_spanned(endpoint, rows, spans, queries_name) if queries is not None \
        else spans.get(Signal.PROMPT_TOKENS)
    return reconstruct(times, dt, prompt, completion_time=True, local_compute=local, hits=hits, queries=queries,
                       request_prefill_seconds=_counter(values, present, by_name,
                                                        "vllm:request_prefill_time_seconds_sum", times),
                       request_prefill_tokens=_counter(values, present, by_name,
                                                       "vllm:request_prefill_kv_computed_tokens_sum", times),
                       preemptions=increases.get(Signal.PREEMPTIONS), generation=increases.get(Signal.GENERATION_TOKENS),
                       finished=finished,
                       waiting=waiting, iteration_tokens_scraped=iteration_tokens, merged=merged)
