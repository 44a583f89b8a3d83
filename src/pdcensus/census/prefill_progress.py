"""Prefill in progress, reconstructed from counters that move only when a prefill ends.

Why: vLLM's V1 engine adds a request's whole prompt to ``vllm:prompt_tokens_total`` in the
one step that emits its first token, never while its chunks run. Read in vLLM 0.15.0 and
0.19.1 (release sources, ``vllm/v1/...``; line numbers are 0.19.1's, 0.15.0's in brackets):

- ``v1/engine/output_processor.py:_update_stats_from_output`` (l. 763 [774]) passes
  ``req_state.is_prefilling``, which is True until the request's first ``EngineCoreOutput``
  and set False right after (l. 621 [626]);
- ``v1/core/sched/scheduler.py:update_from_output`` appends an ``EngineCoreOutput`` only
  ``if new_token_ids or pooler_output ... or stopped`` (l. 1451-1458 [1369-1376]): a partial prefill
  chunk samples no token, so it produces no output and no stats;
- ``v1/metrics/stats.py:IterationStats.update_from_output`` adds ``prompt_len`` (0.15:
  ``num_prompt_tokens += prompt_len``, l. 269; 0.19: ``PromptTokenStats.update_from_output``,
  l. 352) for that first output, cache hits included; 0.19 splits it by source
  (``computed = prompt_len - num_cached_tokens``);
- ``v1/metrics/loggers.py:PrometheusStatLogger.record`` (l. 1117-1131 [1072-1078]) moves
  ``prompt_tokens_total``, ``prompt_tokens_by_source_total{source}`` and observes
  ``iteration_tokens_total`` with ``num_prompt_tokens + num_generation_tokens`` of the same
  iteration stats: that histogram is counted at the same instant, so it does not show
  prefill as it runs either.

A 100k-token prompt in 8192-token chunks therefore runs for many scrapes with the counter
flat, then jumps. :func:`reconstruct` spreads each interval's increase of *computed* prefill
back over the time it took, at the endpoint's prefill speed measured in the same recording
(the highest mean rate over any ``SPEED_WINDOW_SECONDS`` window: long enough that one
prompt's jump is a small part of it). The fill runs backwards in time and one engine shares
one token budget, so overlapping prefills queue for the same capacity (``S x dt`` per
interval). The result is an estimate and says what it cannot see: which prefill ran in which
scrape when several overlap, queueing before admission, and preempted re-prefill.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

# The window over which the endpoint's prefill speed is measured (seconds, and scrapes).
SPEED_WINDOW_SECONDS = 60.0
SPEED_WINDOW_POLLS = 20
# An interval counts as "the raw counter moved" above this many tokens.
MOVED_TOKENS = 0.5
# prefix_cache_queries counted once per prompt: queries / prompt tokens inside this band.
QUERIES_ONCE = (0.8, 1.25)
# The measured speed is the engine's own when requests waited in at least this share of scrapes.
SATURATED_SHARE = 0.5


class PrefillBasis(str, Enum):
    """What the census's prefill signal is made of."""

    GAUGE = "same-scrape prefill gauge"
    COUNTER_AS_COMPUTED = "counter that moves as prefill is computed (interval mean)"
    COMPLETION_COUNTER = "completion-time counter, taken as is (interval mean)"
    ARRIVAL_COUNTER = "counter that moves when a request arrives, before its prefill (interval mean)"
    REQUEST_END_COUNTER = "counter that moves when a request ends, after its decode (interval mean)"
    SPREAD_BACK = "completion-time counter spread back over its duration at the measured prefill speed"
    ADMISSION_TO_COMPLETION = ("each prompt spread from its admission (prefix_cache_queries_total) to its "
                               "completion (prompt_tokens_total), first in first out")


class ComputedSource(str, Enum):
    """Where the computed (not cache-hit) prefill tokens come from."""

    LOCAL_COMPUTE = "prompt_tokens_by_source_total{source=\"local_compute\"}"
    MISS_SHARE = "prompt tokens x (1 - prefix_cache_hits / prefix_cache_queries)"
    ALL_PROMPT = "all prompt tokens (cache hits, if any, counted as computed)"


@dataclass(frozen=True)
class PrefillProgress:
    """The reconstructed prefill signal of one shape, and what it rests on."""

    basis: PrefillBasis
    tokens_per_second: np.ndarray  # computed prefill per interval, reconstructed (NaN on the first row)
    raw_tokens_per_second: np.ndarray  # the counter's own increase / interval (all prompt tokens)
    computed_source: ComputedSource
    computed_share: float  # computed / all prompt tokens over the window (NaN where unknown)
    queries_per_prompt: float  # prefix_cache_queries / prompt tokens (1 = each prompt looked up once)
    speed_tokens_per_second: float  # measured prefill speed the spread uses (NaN if none)
    speed_is_lower_bound: bool  # prompts seldom waited: the best window did not keep prefill busy
    hidden_share: float  # share of reconstructed prefill seconds in scrapes whose raw counter was flat
    cannot_see: tuple[str, ...]
    hint: str | None
    reprefill_share: float = 0.0  # share of the signal that is estimated re-prefill after preemptions
    reprefill_tokens_per_second: np.ndarray | None = None  # that estimate per interval (in tokens_per_second)


def _interval_rate(tokens: np.ndarray, dt: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(np.isfinite(dt) & (dt > 0), tokens / dt, np.nan)


def measured_speed(times: np.ndarray, tokens: np.ndarray, window_seconds: float) -> float:
    """The highest mean rate of ``tokens`` over any window of ``window_seconds`` (NaN if none).

    ``tokens[i]`` is the increase over ``(times[i-1], times[i]]``. A window's rate counts the
    intervals that end inside it over the time they cover, so a scraper stall is one long
    interval, not a burst.
    """
    tok = np.nan_to_num(tokens)
    if times.size < 3 or not (tok > 0).any():
        return float("nan")
    cum = np.concatenate([[0.0], np.cumsum(tok[1:])])  # cum[k]: tokens in intervals 1..k
    t = times
    best = 0.0
    j = 0
    for i in range(1, t.size):  # window ends at t[i], starts at t[j] with t[i] - t[j] >= window
        while j + 1 < i and t[i] - t[j + 1] >= window_seconds:
            j += 1
        span = t[i] - t[j]
        if span >= window_seconds:
            best = max(best, (cum[i] - cum[j]) / span)
    if best == 0.0:  # the window is longer than the recording: the whole span
        best = float(cum[-1] / (t[-1] - t[0])) if t[-1] > t[0] else float("nan")
    return best


def spread_back(tokens: np.ndarray, dt: np.ndarray, speed: float) -> np.ndarray:
    """Each interval's completed tokens, moved back into earlier intervals at ``speed``.

    Backward water-filling: walking from the last interval to the first, the work that
    completed at or after an interval is owed to it up to its capacity ``speed x dt``; the rest
    is carried further back. Work that cannot fit before the window's start stays in the
    first intervals (its prefill began before the window).
    """
    out = np.zeros(tokens.size)
    owed = 0.0
    tok = np.nan_to_num(tokens)
    cap = np.where(np.isfinite(dt), dt, 0.0) * speed
    for i in range(tokens.size - 1, 0, -1):
        owed += tok[i]
        take = min(owed, cap[i])
        out[i] = take
        owed -= take
    if owed > 0 and tokens.size > 1:
        out[1] += owed
    out[0] = np.nan
    return out


def _cumulative(inc: np.ndarray) -> np.ndarray:
    c = np.nan_to_num(inc).copy()
    c[0] = 0.0
    return np.cumsum(c)


def admission_to_completion(times: np.ndarray, admitted: np.ndarray, completed: np.ndarray,
                            computed_share: np.ndarray, merged: np.ndarray | None = None) -> np.ndarray:
    """Computed prefill per interval, each prompt token spread from its admission to its completion.

    vLLM looks a request up in the prefix cache when the scheduler admits it, i.e. in the step
    its first chunk is scheduled (``kv_cache_manager.get_computed_blocks``, counted in
    ``prefix_cache_queries_total`` with the whole prompt, cache hits included), and adds the same
    prompt length to ``prompt_tokens_total`` when its last chunk ends. Matching the two
    cumulative counts first in first out gives each prompt token an admission and a completion
    time; its computed share (``computed_share`` of the completion interval) is spread
    uniformly in between. Prompts admitted before the window are placed at its start.

    ``merged``: the intervals where either count's increase is a share of a longer span (a sample
    missing at one end, ``series.increases``). Inside such a run the cumulative counts are
    interpolations, which may put a completion before its admission; the tokens in flight at the
    start are read only where both counts were observed (outside the runs and at their ends), so
    one missing sample does not shift every admission of the window.
    """
    n = times.size
    out = np.full(n, np.nan)
    if n < 2:
        return out
    a_cum, c_cum = _cumulative(admitted), _cumulative(completed)
    exact = np.ones(n, dtype=bool)
    if merged is not None:
        run = np.asarray(merged, dtype=bool)
        exact = ~run | np.concatenate([~run[1:], [True]])  # outside a run, or its last row (a real sample)
    a_cum = a_cum + max(0.0, float(np.max((c_cum - a_cum)[exact])))  # in flight at the start: admitted before it
    total = float(c_cum[-1])
    if total <= 0:
        out[1:] = 0.0
        return out
    # between consecutive values of either cumulative count both inverses are linear: one point each
    edges = np.unique(np.concatenate([c_cum, np.clip(a_cum, 0.0, total)]))
    x, width = 0.5 * (edges[1:] + edges[:-1]), np.diff(edges)
    t_c = np.interp(x, c_cum, times)
    t_a = np.minimum(np.interp(x, a_cum, times), t_c)
    idx = np.clip(np.searchsorted(c_cum, x, side="left"), 1, n - 1)
    w = np.nan_to_num(computed_share[idx], nan=1.0) * width
    span = np.maximum(t_c - t_a, 1e-9)
    r = np.empty(n)
    for lo in range(0, n, 256):
        tt = times[lo:lo + 256, None]
        r[lo:lo + 256] = (w * np.clip((tt - t_a) / span, 0.0, 1.0)).sum(axis=1)
    out[1:] = np.diff(r)
    return out


def _share(num: np.ndarray | None, den: np.ndarray | None) -> float:
    if num is None or den is None:
        return float("nan")
    d = float(np.nansum(den))
    return float(np.nansum(num)) / d if d > 0 else float("nan")


def computed_prefill(prompt: np.ndarray, local_compute: np.ndarray | None, hits: np.ndarray | None,
                     queries: np.ndarray | None) -> tuple[np.ndarray, ComputedSource, float, float]:
    """``(computed tokens per interval, source, computed share, queries per prompt token)``.

    ``local_compute`` (vLLM >= 0.19) is the prefill that ran. Without it, the prefix-cache
    counters correct the prompt counter with the window's miss share, but only where each
    prompt was looked up once: vLLM records a lookup each time the scheduler tries to admit
    a waiting request (``v1/core/kv_cache_manager.py:get_computed_blocks``, l. 210 in 0.19.1,
    called from ``scheduler.py`` l. 613 while ``num_computed_tokens == 0``), so a request that
    waits for KV blocks is looked up (and counted) again on every step.
    """
    qpp = _share(queries, prompt)
    if local_compute is not None and np.isfinite(local_compute).any():
        return local_compute, ComputedSource.LOCAL_COMPUTE, _share(local_compute, prompt), qpp
    if hits is not None and queries is not None and QUERIES_ONCE[0] <= qpp <= QUERIES_ONCE[1]:
        miss = 1.0 - _share(hits, queries)
        if np.isfinite(miss):
            return prompt * miss, ComputedSource.MISS_SHARE, miss, qpp
    return prompt, ComputedSource.ALL_PROMPT, float("nan"), qpp


def reconstruct(times: np.ndarray, dt: np.ndarray, prompt: np.ndarray, *, completion_time: bool,
                local_compute: np.ndarray | None = None, hits: np.ndarray | None = None,
                queries: np.ndarray | None = None, waiting: np.ndarray | None = None,
                request_prefill_seconds: np.ndarray | None = None,
                request_prefill_tokens: np.ndarray | None = None,
                preemptions: np.ndarray | None = None, generation: np.ndarray | None = None,
                finished: np.ndarray | None = None,
                iteration_tokens_scraped: bool = False, merged: np.ndarray | None = None) -> PrefillProgress:
    """The prefill signal for one shape from its prompt counter (and cache counters if scraped).

    ``completion_time``: the counter moves when a prefill ends (vLLM V1); otherwise the
    increase per interval is taken as computed in that interval. ``waiting``: the waiting
    gauge; where requests waited in fewer than ``SATURATED_SHARE`` of the scrapes, prefill was
    not kept busy and the measured speed is only a lower bound (the spread is then too long,
    which blurs busy and idle scrapes together: a contrast drawn from it leans towards 1).
    ``merged``: see :func:`admission_to_completion`.
    """
    raw = _interval_rate(prompt, dt)
    computed, source, share, qpp = computed_prefill(prompt, local_compute, hits, queries)
    polls = float(np.nanmedian(dt)) * SPEED_WINDOW_POLLS if np.isfinite(dt).any() else SPEED_WINDOW_SECONDS
    window = max(SPEED_WINDOW_SECONDS, polls)
    cannot: list[str] = []
    if source is ComputedSource.MISS_SHARE:
        cannot.append("which prompts hit the prefix cache: one miss share for the whole window")
    elif source is ComputedSource.ALL_PROMPT:
        cannot.append("cache hits: prompt tokens that were never computed count as prefill")
    if not completion_time:
        return PrefillProgress(PrefillBasis.COUNTER_AS_COMPUTED, _interval_rate(computed, dt), raw, source, share,
                               qpp, float("nan"), False, 0.0, tuple(cannot), None)
    if queries is not None and QUERIES_ONCE[0] <= qpp <= QUERIES_ONCE[1]:
        with np.errstate(invalid="ignore", divide="ignore"):
            per_interval = np.where(np.nan_to_num(prompt) > 0, np.nan_to_num(computed) / prompt, np.nan)
        if not np.isfinite(per_interval).any():
            per_interval = np.full(prompt.size, share if np.isfinite(share) else 1.0)
        tokens = admission_to_completion(times, queries, prompt, per_interval, merged)
        cannot += ["which prompt ran in which poll when several are in flight: first in first out is assumed",
                   "the speed of each chunk: a prompt's work is spread evenly from its admission to its end"]
        re_tokens, re_share, re_note = _reprefill(times, dt, prompt, computed, preemptions, generation, finished, window)
        if re_note:
            cannot.append(re_note)
            tokens = tokens + re_tokens
        return PrefillProgress(PrefillBasis.ADMISSION_TO_COMPLETION, _interval_rate(tokens, dt), raw, source, share,
                               qpp, float("nan"), False, _hidden(tokens, prompt), tuple(cannot),
                               None if iteration_tokens_scraped else _HINT, re_share,
                               _interval_rate(re_tokens, dt) if re_note else None)
    speed = measured_speed(times, computed, window)
    per_request = _share(request_prefill_tokens, request_prefill_seconds)
    if np.isfinite(per_request) and per_request > 0 and not (speed >= per_request):
        speed = per_request
    if not np.isfinite(speed) or speed <= 0:
        cannot.append("when prefill ran: no prefill speed could be measured, the counter is taken as is")
        return PrefillProgress(PrefillBasis.COMPLETION_COUNTER, _interval_rate(computed, dt), raw, source, share,
                               qpp, float("nan"), False, 0.0, tuple(cannot), _HINT)
    saturated = waiting is not None and np.isfinite(waiting).any() and \
        float(np.nanmean(np.nan_to_num(waiting[np.isfinite(waiting)]) > 0)) >= SATURATED_SHARE
    if not saturated:
        cannot.append("the engine's full prefill speed: requests seldom waited, so the measured speed is a lower "
                      "bound and each prefill is spread over more polls than it ran in")
    tokens = spread_back(computed, dt, speed)
    re_tokens, re_share, re_note = _reprefill(times, dt, prompt, computed, preemptions, generation, finished, window)
    if re_note:
        tokens = tokens + re_tokens
    hidden = _hidden(tokens, prompt)
    cannot += [
        f"which prefill ran in which poll when several overlap: all are spread at one speed ({speed:,.0f} tok/s, "
        f"the best {window:.0f} s mean of this window or the requests' own prefill rate, the higher)",
        "a prefill's start: it is placed as late as the speed allows (queueing before it is not seen)",
    ] + ([re_note] if re_note else [])
    return PrefillProgress(PrefillBasis.SPREAD_BACK, _interval_rate(tokens, dt), raw, source, share, qpp, speed,
                           not saturated, hidden, tuple(cannot), None if iteration_tokens_scraped else _HINT, re_share,
                           _interval_rate(re_tokens, dt) if re_note else None)


def _reprefill(times: np.ndarray, dt: np.ndarray, prompt: np.ndarray, computed: np.ndarray,
               preemptions: np.ndarray | None, generation: np.ndarray | None, finished: np.ndarray | None,
               window: float) -> tuple[np.ndarray, float, str | None]:
    """Re-prefill after preemptions, which no token counter carries: ``(tokens, share, note)``.

    vLLM V1 frees a preempted request's KV, sets its computed tokens to 0 and puts it at the
    head of the waiting queue (``scheduler.py:_preempt_request``, l. 956-976 in 0.19.1); its
    ``PREEMPTED`` event rides on the request's next output, so ``num_preemptions_total`` moves
    when the resumed request has re-prefilled and emits a token, as the prompt counter does
    for a new prompt. Each preemption is taken as one mean context (mean prompt + half the
    mean output, no cache hits) spread back at the window's best prefill speed.
    """
    n = prompt.size
    if preemptions is None or generation is None or finished is None:
        return np.zeros(n), 0.0, None
    pre = np.nan_to_num(preemptions)
    done = float(np.nansum(finished))
    if pre.sum() <= 0 or done <= 0:
        return np.zeros(n), 0.0, None
    context = (float(np.nansum(prompt)) + 0.5 * float(np.nansum(generation))) / done
    work = pre * context
    speed = measured_speed(times, np.nan_to_num(computed) + work, window)
    if not np.isfinite(speed) or speed <= 0:
        return np.zeros(n), 0.0, None
    placed = np.nan_to_num(spread_back(work, dt, speed))
    total = float(placed.sum()) + float(np.nansum(computed))
    note = (f"re-prefill after {pre.sum():.0f} preemptions: estimated as one mean context each ({context:,.0f} "
            "tokens, cache hits not seen) and spread back from the preemption counter, which moves when the "
            "resumed request emits its next token")
    return placed, float(placed.sum()) / total if total > 0 else 0.0, note


def _hidden(tokens: np.ndarray, prompt: np.ndarray) -> float:
    """Share of reconstructed prefill (tokens, i.e. time at one speed) in scrapes where the counter was flat."""
    moved = np.nan_to_num(prompt) > MOVED_TOKENS
    tok = np.nan_to_num(tokens)
    total = float(tok.sum())
    return float(tok[~moved].sum()) / total if total > 0 else 0.0


# What to scrape to see more. vLLM has no family that counts prefill chunks as they run
# (iteration_tokens_total is observed with the same completion-time prompt count); the
# request histograms give each finished request's prefill seconds and computed tokens.
_HINT = ("vLLM counts a prompt when its prefill ends; scrape vllm:request_prefill_time_seconds and "
         "vllm:request_prefill_kv_computed_tokens (sums) to measure prefill speed, and keep 1 s polls: "
         "no vLLM family shows prefill chunks as they run")
