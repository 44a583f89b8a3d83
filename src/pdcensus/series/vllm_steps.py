"""vLLM's counted step ledger: engine steps per scrape, and the time decoders waited in them.

vLLM has no step time on ``/metrics``, but (0.32.0, read in the installed release source):

- ``vllm:iteration_tokens_total`` is observed once per engine-core output batch that holds at
  least one output (``vllm/v1/engine/async_llm.py`` l. 852-853 builds ``IterationStats`` only
  ``if log_stats and num_outputs``; ``vllm/v1/metrics/loggers.py`` l. 1242 returns before the
  histogram without it, l. 1273-1276 observe it). While a request decodes every step emits
  its token, so the ``_count``'s increase is the number of steps that ran beside decoders.
- ``vllm:inter_token_latency_seconds`` observes, per decoding request and step, the time since
  that request's previous token (``vllm/v1/metrics/stats.py`` l. 548-552, at the step's engine
  timestamp): its ``_sum`` over a scrape is the decoders' waiting time ended in that scrape,
  a chunk step's full length included, however long it ran.

So, with decoders running through an interval, its wall time is step time: the mean step of
an interval is wall / steps. An interval in which no step ended while requests ran is part of
one long step (a prefill chunk far longer than the scrape) and belongs to the interval that
ends it: :func:`step_spans` joins them. Which intervals carried prefill is the census's call
(``pdcensus.census.signals``); :func:`counted_ledger` turns that mask into the ledger's four
per-interval counters: decode-only steps and seconds in prefill-free spans, every step and the
busy wall time as step seconds. The chunk-interval mean (wall / steps) mixes chunk steps with
the decode-only steps between them when prefill bursts are shorter than a scrape, but the
excess ``wall - steps x decode-only step`` does not depend on which steps carried the chunk:
the lost time is counted exactly, the per-step depth is diluted. :func:`itl_spans` gives the
inter-token histogram per span, the depth as decoders felt it (tokens per second of waiting).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.series.engine_ledger import term_increases
from pdcensus.series.model import Endpoint
from pdcensus.series.profiles import LedgerTerm

STEP_COUNT = "vllm:iteration_tokens_total_count"
ITL_SUM = "vllm:inter_token_latency_seconds_sum"
ITL_COUNT = "vllm:inter_token_latency_seconds_count"
TTFT_SUM = "vllm:time_to_first_token_seconds_sum"


@dataclass(frozen=True)
class CountedSteps:
    """Per interval (aligned with the rows; NaN on the first and where a counter is missing)."""

    steps: np.ndarray  # engine steps that emitted output
    busy: np.ndarray  # requests ran at both ends of the interval: its wall time is step time
    span: np.ndarray  # index of the interval that ends this one's step (itself unless a long step)
    itl_seconds: np.ndarray | None  # decoders' summed inter-token time ended in the interval
    itl_tokens: np.ndarray | None  # tokens those gaps ended in
    ttft_seconds: np.ndarray | None = None  # the prompts' summed waits for their first token, ended in the interval


def _increase(endpoint: Endpoint, rows: np.ndarray, name: str) -> np.ndarray | None:
    return term_increases(endpoint, rows, LedgerTerm((name,)))


def counted_steps(endpoint: Endpoint, rows: np.ndarray, running: np.ndarray | None) -> CountedSteps | None:
    """The step count and its spans over ``rows``; None without the step count or a running gauge."""
    rows = np.asarray(rows, dtype=np.int64)
    steps = _increase(endpoint, rows, STEP_COUNT)
    if steps is None or running is None or not np.isfinite(steps).any():
        return None
    run = np.nan_to_num(np.asarray(running, dtype=np.float64))
    prev = np.concatenate([[0.0], run[:-1]])
    busy = (run > 0) & (prev > 0) & np.isfinite(steps)
    return CountedSteps(steps, busy, step_spans(steps, busy), _increase(endpoint, rows, ITL_SUM),
                        _increase(endpoint, rows, ITL_COUNT), _increase(endpoint, rows, TTFT_SUM))


def step_spans(steps: np.ndarray, busy: np.ndarray) -> np.ndarray:
    """Per interval, the interval whose end closes its step: a busy interval with no step ended
    joins the next one that ends a step (itself where it ended one, or where the run is cut)."""
    n = len(steps)
    span = np.arange(n)
    nxt = -1
    for i in range(n - 1, -1, -1):
        ended = np.isfinite(steps[i]) and steps[i] > 0
        if not busy[i]:
            nxt = -1
            continue
        if ended:
            nxt = i
        elif nxt >= 0:
            span[i] = nxt
    return span


IN_FLIGHT_STEPS = 3.0  # an interval's wall beyond its steps at the clean pace, in clean steps, that is a step in flight
IN_FLIGHT_SHARE = 0.1  # ... and in shares of the interval (host jitter beside short prompts stays under it)


def in_flight_before(cs: CountedSteps, interval_seconds: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Busy intervals whose end cut a long step that the next, prefill-carrying span ends.

    vLLM publishes a step's stats when the step is done, so the scrape in which a chunk step
    begins shows only the decode-only steps before it: its wall exceeds those steps at the clean
    pace by the chunk's first part. Where that excess is over ``IN_FLIGHT_STEPS`` clean steps (a
    decode-only step in flight is at most one) and a tenth of the interval (the host's jitter beside
    a short prompt's arrival stays under it), and the next interval's span carried prefill, the
    interval holds the chunk's beginning. The clean pace is the mean step of the busy intervals
    in no prefill-carrying span and not so cut. Without ten of them (a prompt in nearly every
    scrape, each cut by one), each interval's own mean inter-token gap is its pace where the
    inter-token histogram is scraped: the gaps that end in an interval before the span that ends
    the chunk are its decode-only steps (live vLLM: a 1 s scrape of 2 steps, 48 ms gaps, 1 s of
    wall, before the interval that counts the prompt). Else nothing is marked.
    """
    dt = np.asarray(interval_seconds, dtype=np.float64)
    steps = np.nan_to_num(cs.steps)
    marked = span_mask(cs, chunk)
    n = steps.size
    nxt = np.zeros(n, dtype=bool)
    nxt[:-1] = marked[1:] & cs.busy[1:]
    clean = cs.busy & ~marked & ~nxt & np.isfinite(dt) & (steps > 0)
    pace: float | np.ndarray
    if int(clean.sum()) >= 10:
        pace = float(dt[clean].sum()) / float(steps[clean].sum())
    elif cs.itl_seconds is not None and cs.itl_tokens is not None:
        tokens = np.nan_to_num(cs.itl_tokens)
        pace = np.where(tokens > 0, np.nan_to_num(cs.itl_seconds) / np.where(tokens > 0, tokens, 1.0), np.nan)
    else:
        return np.zeros(n, dtype=bool)
    # (an interval in which no gap ended has no pace to measure its excess by: never marked)
    excess = np.where(np.isfinite(pace), np.where(np.isfinite(dt), dt, 0.0) - steps * np.nan_to_num(pace), -np.inf)
    out: np.ndarray = cs.busy & ~marked & nxt & (excess > np.maximum(IN_FLIGHT_STEPS * pace, IN_FLIGHT_SHARE * dt))
    return out


def span_mask(cs: CountedSteps, mask: np.ndarray) -> np.ndarray:
    """A per-interval mark spread over each span: an interval is marked if any of its span is."""
    marked = np.asarray(mask, dtype=bool) & cs.busy
    by_span = np.zeros(len(cs.span), dtype=bool)
    np.logical_or.at(by_span, cs.span, marked)
    out: np.ndarray = (by_span[cs.span] | marked) & cs.busy
    return out


def counted_ledger(cs: CountedSteps, interval_seconds: np.ndarray,
                   chunk: np.ndarray) -> dict[str, np.ndarray]:
    """The ledger's four per-interval counters from counted steps and a per-interval chunk mark.

    ``chunk``: the intervals that carried prefill (spread over their spans here). Intervals not
    busy at both ends are NaN (the engine idled part of them: wall time is not step time).
    """
    marked = span_mask(cs, chunk)
    dt = np.asarray(interval_seconds, dtype=np.float64)
    ok = cs.busy & np.isfinite(dt)
    steps = np.where(ok, np.nan_to_num(cs.steps), np.nan)
    secs = np.where(ok, dt, np.nan)
    return {
        "steps": steps,
        "step_seconds": secs,
        "decode_steps": np.where(ok, np.where(marked, 0.0, steps), np.nan),
        "decode_step_seconds": np.where(ok, np.where(marked, 0.0, secs), np.nan),
    }


def itl_depth(cs: CountedSteps, chunk: np.ndarray,
              exclude: np.ndarray | None = None) -> tuple[float, float, int, int]:
    """Per-token pace while prefill ran / without, from the inter-token histogram over spans.

    Returns ``(ratio, lost_share, chunk_tokens, clean_tokens)``: ratio is tokens per second of
    decoders' waiting in chunk spans over the same in prefill-free spans (the clients' depth);
    lost_share the waiting in chunk spans beyond the clean pace, as a share of all waiting.
    NaN where either side has no token. ``exclude``: intervals left out of both sides (where
    preemptions are counted, their gaps are stalls, not steps).
    """
    if cs.itl_seconds is None or cs.itl_tokens is None:
        return float("nan"), float("nan"), 0, 0
    marked = span_mask(cs, chunk)
    ok = cs.busy & np.isfinite(cs.itl_seconds) & np.isfinite(cs.itl_tokens)
    if exclude is not None:
        ok &= ~np.asarray(exclude, dtype=bool)
    s, c = np.where(ok, cs.itl_seconds, 0.0), np.where(ok, cs.itl_tokens, 0.0)
    s_in, c_in = float(s[marked].sum()), float(c[marked].sum())
    s_out, c_out = float(s[~marked].sum()), float(c[~marked].sum())
    if s_in <= 0 or s_out <= 0 or c_in <= 0 or c_out <= 0:
        return float("nan"), float("nan"), int(c_in), int(c_out)
    clean = s_out / c_out  # seconds per token without prefill
    lost = max(s_in - c_in * clean, 0.0) / (s_in + s_out)
    return (c_in / s_in) / (c_out / s_out), lost, int(c_in), int(c_out)


@dataclass(frozen=True)
class PromptWindows:
    """Decoders' pace over the prompts' waits for a first token (:func:`prompt_window_depth`)."""

    depth: float  # tokens per second of a decoder's time in the waits, over the clean pace
    prompts: float  # waits beyond ``long_steps`` clean gaps ended in the spans (vLLM's TTFT histogram)
    mean_wait_seconds: float  # their mean (their sum at most the spans' wall: overlapping waits are one window)
    chunk_steps: float  # chunk steps per wait: the mean wait over one chunk step's mean length


MIN_PROMPT_WINDOWS = 2.0  # one wait is no mean
# a wait holds the chunk step that ends it, so the mean wait is at least one mean chunk step, but for the waits of
# re-prompts that ran no chunk step and long gaps from other causes, which both means also hold: below half a
# step the waits are not these chunk steps' (live vLLM: 0.9 where each prompt is one chunk step, 0.2-0.3 beside
# short prompts only or prompts far shorter than the host's other long gaps)
MIN_CHUNK_STEPS_PER_WAIT = 0.5


def clean_pace(cs: CountedSteps, clean: np.ndarray, ok: np.ndarray) -> float:
    """Decoders' seconds per token in the ``clean`` intervals (inter-token sum / count); NaN under ten tokens."""
    if cs.itl_seconds is None or cs.itl_tokens is None:
        return float("nan")
    c = ok & np.asarray(clean, dtype=bool) & np.isfinite(cs.itl_seconds) & np.isfinite(cs.itl_tokens)
    tokens = float(cs.itl_tokens[c].sum())
    return float(cs.itl_seconds[c].sum()) / tokens if tokens >= 10 else float("nan")


def prompt_window_depth(cs: CountedSteps, chunk: np.ndarray, left_out: np.ndarray, clean: np.ndarray,
                        interval_seconds: np.ndarray, ttft_bounds: np.ndarray, ttft_increases: np.ndarray,
                        chunk_depth: float, long_steps: float = 3.0,
                        clean_gap: float | None = None) -> PromptWindows | None:
    """Decoders' pace while the prompts waited for their first token, over the clean pace ``p``.

    A prompt's wait ends with the step that gives its first token, and it begins inside the step
    then in flight: a decoder gets that step's token, then one per chunk step of the prompt. So a
    wait of ``k`` chunk steps gives a decoder ``k + 1`` tokens in about ``k`` chunk steps, and
    its pace there is ``(k + 1) / k`` times one chunk step's own (``chunk_depth``, from the long
    inter-token gaps). ``k`` is the mean wait ``W`` over one chunk step's mean length
    ``p / chunk_depth``, so the depth is ``chunk_depth + p / W``.

    The waits are the TTFT histogram's observations beyond ``long_steps`` clean gaps in the spans
    (a prompt answered at the clean pace waited through no chunk step: it is no window) and their
    sum, the TTFT sum less the shorter ones read at their buckets' midpoints. A wait that also holds
    decode-only steps (a queue) gives more tokens than this counts, so the reading is at most as
    deep as the clients' there. None without the TTFT sum and histogram, ten clean tokens or
    ``MIN_PROMPT_WINDOWS`` waits, and where the mean wait is under ``MIN_CHUNK_STEPS_PER_WAIT`` chunk
    steps (the long gaps are then no prompt's chunk steps: a host's hiccups beside short prompts).
    ``clean_gap``: the clean pace where no ``clean`` interval times it (the intervals' median gaps).
    """
    if cs.ttft_seconds is None or not np.isfinite(chunk_depth) or chunk_depth <= 0:
        return None
    inc, dt = np.asarray(ttft_increases, dtype=np.float64), np.asarray(interval_seconds, dtype=np.float64)
    ok = cs.busy & np.isfinite(dt) & np.isfinite(cs.ttft_seconds) & np.isfinite(inc).all(axis=1)
    pace = clean_pace(cs, clean, cs.busy) if clean_gap is None else clean_gap
    marked = span_mask(cs, chunk) & ok & ~np.asarray(left_out, dtype=bool)
    if not np.isfinite(pace):
        return None
    bounds, counts = np.asarray(ttft_bounds, dtype=np.float64), inc[marked].sum(axis=0)
    prompts = observations_above(bounds, counts, long_steps * pace)
    waits = min(float(cs.ttft_seconds[marked].sum()) - summed_below(bounds, counts, long_steps * pace),
                float(dt[marked].sum()))
    if prompts < MIN_PROMPT_WINDOWS or waits <= 0:
        return None
    mean_wait, chunk_seconds = waits / prompts, pace / chunk_depth
    if mean_wait < MIN_CHUNK_STEPS_PER_WAIT * chunk_seconds:
        return None
    return PromptWindows(chunk_depth + pace / mean_wait, prompts, mean_wait, mean_wait / chunk_seconds)


def observations_above(bounds: np.ndarray, counts: np.ndarray, x: float) -> float:
    """Observations above ``x`` in a cumulative histogram (``le`` bounds, +Inf last), read as spread evenly inside
    each bucket (the reading ``histogram_quantile`` makes)."""
    total = float(counts[-1])
    lower = np.r_[0.0, bounds[:-1]]
    cum_lo = np.r_[0.0, counts[:-1]]
    at = int(np.searchsorted(bounds, x, side="left"))
    if at >= bounds.size or not np.isfinite(bounds[at]):
        return float(total - cum_lo[min(at, bounds.size - 1)]) if at < bounds.size and x <= lower[at] else 0.0
    width = bounds[at] - lower[at]
    inside = (counts[at] - cum_lo[at]) * ((bounds[at] - x) / width if width > 0 else 0.0)
    return float(total - counts[at] + inside)


def summed_below(bounds: np.ndarray, counts: np.ndarray, x: float) -> float:
    """The sum of the observations at or below ``x`` in a cumulative histogram, each bucket's read as spread
    evenly (its part below ``x`` at that part's midpoint); ``x`` beyond the last finite bound counts to it."""
    lower = np.r_[0.0, bounds[:-1]]
    per = np.diff(np.r_[0.0, counts])
    total = 0.0
    for lo, hi, n in zip(lower, bounds, per, strict=True):
        if n <= 0 or lo >= x or not np.isfinite(hi):
            continue
        top = min(hi, x)
        total += n * ((top - lo) / (hi - lo) if hi > lo else 1.0) * (lo + top) / 2.0
    return total


def chunk_step_depth(cs: CountedSteps, marked: np.ndarray, clean: np.ndarray, upper_bounds: np.ndarray,
                     increases: np.ndarray, long_steps: float = 3.0) -> float:
    """Decoders' pace in one chunk step over the clean pace: the clean pace (seconds per token without prefill)
    over the mean of the gaps in ``marked`` spans beyond ``long_steps`` clean gaps (the rest counted at the
    clean pace). A bound for prefills shorter than a scrape, where a span's pace mixes the chunk step with
    the decode-only steps around it: the depth while the chunk acts lies between the two. NaN without."""
    if cs.itl_seconds is None or cs.itl_tokens is None:
        return float("nan")
    ok = cs.busy & np.isfinite(cs.itl_seconds) & np.isfinite(cs.itl_tokens) & np.isfinite(increases).all(axis=1)
    m, pace = ok & np.asarray(marked, dtype=bool), clean_pace(cs, clean, ok)
    if not np.isfinite(pace) or not m.any():
        return float("nan")
    counts = increases[m].sum(axis=0)
    n_long = observations_above(np.asarray(upper_bounds, dtype=float), counts, long_steps * pace)
    n_fast = float(cs.itl_tokens[m].sum()) - n_long
    long_seconds = float(cs.itl_seconds[m].sum()) - n_fast * pace
    return pace / (long_seconds / n_long) if n_long >= 1 and long_seconds > 0 else float("nan")


MIN_FIT_SPANS = 20  # busy step spans the per-token prefill cost is fitted on (below: no fit)


@dataclass(frozen=True)
class PrefillCost:
    """The busy spans' wall fitted as ``decode_step x steps + per_token x prompt tokens`` (least squares)."""

    decode_step_seconds: float
    seconds_per_prompt_token: float
    spans: int

    @property
    def tokens_per_decode_step(self) -> float:
        """The prompt tokens that cost one decode-only step."""
        return self.decode_step_seconds / self.seconds_per_prompt_token

    def material(self, prompt_tokens: np.ndarray, prompts: np.ndarray | None = None) -> np.ndarray:
        """Per interval: its prompts cost more than one decode-only step each at the fitted rates.

        ``prompts``: how many prompts the tokens are (the interval's first tokens); their mean is
        judged, so three 32-token re-prompts are three prompts under the line, not one over it.
        None: the tokens are one prompt (a prefill in progress).
        """
        tokens = np.nan_to_num(np.asarray(prompt_tokens, dtype=np.float64))
        if prompts is not None:
            count = np.nan_to_num(np.asarray(prompts, dtype=np.float64))
            tokens = np.where(count > 1, tokens / np.where(count > 1, count, 1.0), tokens)
        out: np.ndarray = self.seconds_per_prompt_token * tokens > self.decode_step_seconds
        return out


def prefill_cost(cs: CountedSteps, interval_seconds: np.ndarray, prompt_tokens: np.ndarray,
                 left_out: np.ndarray) -> PrefillCost | None:
    """What a prompt token costs the step it rides in, beside what a decode-only step costs, from the counted steps.

    Where nearly every scrape holds a prompt (decoders that re-prompt every second, a busy endpoint)
    no interval is free of prefill to time a decode-only step on. But each busy span's wall is its
    steps' time: ``steps x d + prompt tokens x c`` plus noise, so a least-squares fit over the spans
    (no intercept) gives ``d`` and ``c`` wherever the prompt tokens per span vary. A decoder's own
    32-token re-prompt then costs ``32 c``, a 3,000-token prompt ``3000 c``: the ledger can tell the
    spans whose prefill cost more than one decode-only step from those whose prefill was noise
    (:meth:`PrefillCost.material`, per prompt: a scrape of three re-prompts is three prompts under the
    line, not one over it). Spans with an interval in ``left_out`` (a preemption) are not
    fitted. None with fewer than ``MIN_FIT_SPANS`` spans, no spread in the prompt tokens, or a fit
    whose rates are not both positive.
    """
    dt = np.asarray(interval_seconds, dtype=np.float64)
    prompt = np.asarray(prompt_tokens, dtype=np.float64)
    ok = cs.busy & np.isfinite(dt) & np.isfinite(cs.steps) & np.isfinite(prompt)
    n = len(cs.span)
    wall, steps, tokens, bad = (np.zeros(n) for _ in range(4))
    np.add.at(wall, cs.span, np.where(ok, dt, 0.0))
    np.add.at(steps, cs.span, np.where(ok, np.nan_to_num(cs.steps), 0.0))
    np.add.at(tokens, cs.span, np.where(ok, np.nan_to_num(prompt), 0.0))
    np.add.at(bad, cs.span, (~ok | np.asarray(left_out, dtype=bool)).astype(float))
    use = (bad == 0) & (steps > 0) & (wall > 0)
    if int(use.sum()) < MIN_FIT_SPANS or np.ptp(tokens[use]) <= 0:
        return None
    (d, c), *_ = np.linalg.lstsq(np.column_stack([steps[use], tokens[use]]), wall[use], rcond=None)
    if not (np.isfinite(d) and np.isfinite(c) and d > 0 and c > 0):
        return None
    return PrefillCost(float(d), float(c), int(use.sum()))
