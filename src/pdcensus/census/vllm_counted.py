"""vLLM's counted step ledger, installed into a shape's signals: which intervals carried prefill.

The arithmetic on steps, spans and the inter-token histogram is :mod:`pdcensus.series.vllm_steps`;
this module reads the recording's counters and gauges for it (``pdcensus.census.signals`` calls
:func:`vllm_counted` once per shape) and writes the ledger's four counters into the increases.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.engines import record
from pdcensus.series.engine_ledger import term_increases, term_spanned
from pdcensus.series.model import Endpoint
from pdcensus.series.profiles import VLLM_PREFIX_CACHE_QUERIES, LedgerTerm, Profile, Signal
from pdcensus.series.vllm_steps import (
    CountedSteps,
    counted_ledger,
    counted_steps,
    in_flight_before,
    prefill_cost,
)

# as pdcensus.census.ledger.MIN_REFERENCE_INTERVALS: fewer decode-only intervals than this give no
# undisturbed step, and a counted ledger without one would charge all chunk time to sharing
MIN_REFERENCE_INTERVALS = 10


@dataclass(frozen=True)
class VllmCounted:
    """The counted steps, the intervals that carried prefill, and those with a prefill across scrapes."""

    steps: CountedSteps
    chunk: np.ndarray
    across: np.ndarray | None
    # too few decode-only intervals timed a step: no ledger, but the steps' spans and the prefill mask still
    # place the decoders' long inter-token gaps (pdcensus.series.vllm_gaps.gap_dose)
    timed: bool = True


def vllm_counted(profile: Profile, endpoint: Endpoint, rows: np.ndarray, dt: np.ndarray,
                 increases: dict[Signal, np.ndarray], gauges: dict[Signal, np.ndarray], prefill: np.ndarray | None,
                 itl_scraped: bool, firsts: np.ndarray | None, spans: dict[Signal, np.ndarray]) -> VllmCounted | None:
    """vLLM with the step count and the inter-token histogram: the counted step ledger.

    An interval carried prefill if the prefill signal puts tokens in it, a prompt was counted
    at its end, or ``running`` rose (vLLM counts a request running from the step that admits
    it, prefill included: ``v1/core/sched/scheduler.py`` ``make_stats``). Where that leaves fewer
    than ``MIN_REFERENCE_INTERVALS`` intervals free of prefill (decoders that re-prompt every
    second, a busy endpoint: a prompt lands in nearly every scrape), an interval carried prefill if
    its prompts (completed or reconstructed: their mean over the first tokens counted; or the one
    still pending) cost more than one decode-only step each at the rates fitted on every busy span
    (``pdcensus.series.vllm_steps.prefill_cost``).
    The ledger's four counters go into ``increases`` (``pdcensus.series.vllm_steps.counted_ledger``);
    where even then fewer than ``MIN_REFERENCE_INTERVALS`` are free of prefill, none do, and the result
    is marked untimed (its steps and prefill mask are for the inter-token histogram alone).
    ``itl_scraped``: the inter-token histogram is there; ``firsts``: prompts given their first token per
    interval (the TTFT histogram's count; None without it).
    """
    if not record(profile.engine).counted_step_ledger or not itl_scraped or Signal.STEPS_DECODE in increases:
        return None
    steps = counted_steps(endpoint, rows, gauges.get(Signal.RUNNING))
    if steps is None or not steps.busy.any():
        return None
    run = np.asarray(gauges.get(Signal.RUNNING, np.zeros(rows.size)), dtype=np.float64)
    with np.errstate(invalid="ignore"):
        rose = np.concatenate([[False], run[1:] > run[:-1]])  # a missing sample at either end: unknown, not a rise
    prompt = increases.get(Signal.PROMPT_TOKENS)
    chunk = rose | (np.nan_to_num(prompt) > 0 if prompt is not None else False)
    queries = term_increases(endpoint, rows, LedgerTerm((VLLM_PREFIX_CACHE_QUERIES,)))
    merged = prompt_or_queries_spanned(endpoint, rows, spans, VLLM_PREFIX_CACHE_QUERIES)
    pending = pending_tokens(queries, prompt, merged) if queries is not None and prompt is not None else None
    across = pending > 0 if pending is not None else None
    if across is not None:
        chunk = chunk | across
    if prefill is not None:
        chunk = chunk | (np.nan_to_num(prefill) > 0)
    chunk = chunk | in_flight_before(steps, dt, chunk)  # a chunk step's beginning, cut by the scrape
    ledger = counted_ledger(steps, dt, chunk)
    if _decode_only_intervals(ledger) < MIN_REFERENCE_INTERVALS and prompt is not None:
        # a prompt in (nearly) every busy interval: keep as prefill-carrying only the intervals whose prompt
        # tokens cost more than one decode-only step at the rates fitted on every span (vllm_steps.prefill_cost)
        preempted = increases.get(Signal.PREEMPTIONS)
        stalled = np.nan_to_num(preempted) > 0 if preempted is not None else np.zeros(rows.size, dtype=bool)
        cost = prefill_cost(steps, dt, prompt, stalled)
        if cost is not None:
            material = cost.material(prompt, firsts)
            if prefill is not None:
                material |= cost.material(np.nan_to_num(prefill) * np.nan_to_num(dt), firsts)
            if pending is not None:
                across = cost.material(pending)  # a long prompt in progress, not a re-prompt between two steps
                material |= across
            chunk = material | in_flight_before(steps, dt, material)
            ledger = counted_ledger(steps, dt, chunk)
    if _decode_only_intervals(ledger) < MIN_REFERENCE_INTERVALS:
        # prefill in (nearly) every busy interval: too few decode-only steps to time, so no ledger
        return VllmCounted(steps, chunk, across, timed=False)
    increases[Signal.STEPS] = ledger["steps"]
    increases[Signal.STEPS_DECODE] = ledger["decode_steps"]
    increases[Signal.STEP_SECONDS] = ledger["step_seconds"]
    increases[Signal.STEP_SECONDS_DECODE] = ledger["decode_step_seconds"]
    return VllmCounted(steps, chunk, across)


def _decode_only_intervals(ledger: dict[str, np.ndarray]) -> int:
    return int((np.nan_to_num(ledger["decode_steps"]) > 0).sum())


def prompt_or_queries_spanned(endpoint: Endpoint, rows: np.ndarray, spans: dict[Signal, np.ndarray],
                               queries_name: str) -> np.ndarray | None:
    """Intervals where the prompt count's or the prefix-cache queries' increase is a share of a longer span."""
    prompt, queries = spans.get(Signal.PROMPT_TOKENS), term_spanned(endpoint, rows, LedgerTerm((queries_name,)))
    if prompt is None or queries is None:
        return queries if prompt is None else prompt
    both: np.ndarray = prompt | queries
    return both


def admitted_not_done(queries: np.ndarray, prompt: np.ndarray, merged: np.ndarray | None = None) -> np.ndarray:
    """Per interval, whether prompt tokens were admitted and not yet counted as done (:func:`pending_tokens` > 0)."""
    out: np.ndarray = pending_tokens(queries, prompt, merged) > 0
    return out


def pending_tokens(queries: np.ndarray, prompt: np.ndarray, merged: np.ndarray | None = None) -> np.ndarray:
    """Per interval, the prompt tokens admitted and not yet counted as done at either end.

    vLLM 0.32 counts a prompt's prefix-cache lookup once, when the scheduler admits it
    (``v1/core/sched/scheduler.py`` l. 1314-1318), and the prompt when its first token comes: the
    tokens between the two are a prefill in progress, its middle chunks included (which move no
    counter). A running balance floored at zero (a window that opens mid-prefill owes nothing).

    ``merged``: intervals whose increase of either counter is a share of a longer span (a sample
    missing at one end, ``series.increases``). A run of them is one step of the balance, its
    admissions and completions summed: the shares put part of a completion before its admission,
    which a balance floored at zero would otherwise keep as a prompt pending to the window's end.
    """
    q, p = np.nan_to_num(queries), np.nan_to_num(prompt)
    n = q.size
    joined = np.zeros(n, dtype=bool) if merged is None else np.asarray(merged, dtype=bool)
    pending = np.zeros(n)
    level = 0.0
    i = 0
    while i < n:
        j = i + 1
        while joined[i] and j < n and joined[j]:
            j += 1
        before = level
        level = max(0.0, level + float(q[i:j].sum()) - float(p[i:j].sum()))
        pending[i:j] = max(before, level)  # pending at either end of the interval (or run of them)
        i = j
    return pending
