"""vLLM's length histograms, paired: which output length went with which prompt length.

vLLM observes ``request_prompt_tokens`` and ``request_generation_tokens`` together, once per
request, when it finishes (``vllm/v1/metrics/loggers.py`` ``record()``: both from the same
``FinishedRequestStats``; 0.32.0). So a scrape interval's increase of the two histograms is the
same requests seen twice, and where the pairing is forced (one request finished, or all of them
in one prompt bucket or one output bucket) it is exact. The window's marginals alone lose it: on
a live vLLM run of 32-token decoders (300 tokens out) beside 3,000-token prompts (1 token out),
independent draws gave long prompts 300-token outputs and decoders single tokens, and the twin
ran a third more requests at once than the recording (running +21 %).

Intervals where the pairing is not forced are paired greedily by the exact intervals' joint
counts (the most frequent pair first), with the marginals' product as the prior where those
say nothing. Draws from a histogram are uniform inside a bucket (:func:`draw_length`,
:func:`draw_in_bucket`); :func:`expected_length` is their mean, which the traffic scales to the
finished requests' own mean output (:func:`finished_requests`: the histogram's ``_sum`` over its
``_count``, the same requests).

The histograms see only requests that finished. A request that outlives the window is in neither, and
the window's generated tokens per request are not the outputs' mean then: on a live run of 8 decoders
of 600 tokens (120 s each in a 150 s window) beside 2,500-token prompts (24 tokens out), they read 258,
and the twin's decoders ended early (running -19 %), while sizing every output to the finished ones
(the long prompts' 24) ended them sooner still (running -88 %). The traffic therefore keeps the
requests that started and did not finish (started less finished) as a class of their own, with the
prompt tokens the finished ones do not account for, that does not end inside the window.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass

import numpy as np

from pdcensus.series.engine_ledger import term_increases
from pdcensus.series.model import Endpoint
from pdcensus.series.profiles import LedgerTerm

PROMPT_LENGTHS, OUTPUT_LENGTHS = "vllm:request_prompt_tokens", "vllm:request_generation_tokens"
INTER_TOKEN = "vllm:inter_token_latency_seconds"
# a pair: (prompt bucket's upper bound, output bucket's upper bound, requests)
Pair = tuple[float, float, float]
# a finished request's output: (its bucket's upper bound, its interval's mean output or NaN)
Claim = tuple[float, float]


def bucket_increases(endpoint: Endpoint, rows: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(upper bounds, per-interval non-cumulative increases [interval, bucket])`` of a histogram over ``rows``."""
    per_bound: dict[float, np.ndarray] = {}
    for key in endpoint.select(name + "_bucket"):
        le = key.label("le")
        if le is None:
            continue
        values, present = endpoint.column(key)
        v = np.where(present[rows], values[rows], np.nan)
        inc = np.nan_to_num(np.clip(np.diff(v), 0.0, None))
        bound = float(le.replace("Inf", "inf"))
        per_bound[bound] = per_bound.get(bound, np.zeros(inc.size)) + inc
    if not per_bound:
        return None
    bounds = np.array(sorted(per_bound))
    cumulative = np.stack([per_bound[b] for b in bounds], axis=1)
    counts = np.diff(np.concatenate([np.zeros((cumulative.shape[0], 1)), cumulative], axis=1), axis=1)
    return bounds, np.clip(np.round(counts), 0.0, None)


@dataclass(frozen=True)
class Finished:
    """The window's finished requests, from the length histograms' ``_sum`` and ``_count`` (same requests)."""

    requests: float
    output_mean: float  # request_generation_tokens _sum / _count
    prompt_tokens: float  # request_prompt_tokens _sum (nan where not exported)
    # (seconds from the window start, output bucket's upper bound, requests): when they finished, how long
    finishes: tuple[tuple[float, float, float], ...] = ()
    # per finish, its requests' mean output where the interval's _sum / _count says it (all of the interval's
    # finished requests in that one bucket), else NaN (a draw inside the bucket)
    finish_means: tuple[float, ...] = ()
    # the window's mean inter-token gap (vllm:inter_token_latency_seconds _sum / _count: observed for each token
    # after a request's first), a decoding request's time per token; NaN where not exported
    seconds_per_token: float = math.nan


def finished_requests(endpoint: Endpoint, rows: np.ndarray) -> Finished | None:
    """The window's finished requests over ``rows``; None where the output histogram's ``_sum`` / ``_count`` are
    not exported or nothing finished."""
    rows = np.asarray(rows, dtype=np.int64)

    def total(name: str) -> float:
        inc = term_increases(endpoint, rows, LedgerTerm((name,)))
        return float(np.nansum(inc)) if inc is not None else math.nan

    n, out = total(OUTPUT_LENGTHS + "_count"), total(OUTPUT_LENGTHS + "_sum")
    if not (n > 0 and math.isfinite(out)):
        return None
    finishes: list[tuple[float, float, float]] = []
    means: list[float] = []
    buckets = bucket_increases(endpoint, rows, OUTPUT_LENGTHS)
    if buckets is not None and rows.size >= 2:
        t = endpoint.timestamps[rows] - endpoint.timestamps[rows[0]]
        bounds, counts = buckets
        # per row (the interval ending there), the outputs' _sum and _count increases: one bucket's mean output
        sums = term_increases(endpoint, rows, LedgerTerm((OUTPUT_LENGTHS + "_sum",)))
        ns = term_increases(endpoint, rows, LedgerTerm((OUTPUT_LENGTHS + "_count",)))
        for i, j in zip(*np.nonzero(counts)):
            finishes.append((float(t[i + 1]), float(bounds[j]), float(counts[i, j])))
            mean = math.nan
            if sums is not None and ns is not None and np.count_nonzero(counts[i]) == 1:
                k = float(ns[i + 1])
                if k > 0 and abs(k - counts[i].sum()) < 0.5 and math.isfinite(float(sums[i + 1])):
                    mean = float(sums[i + 1]) / k
            means.append(mean)
    gaps, gap_seconds = total(INTER_TOKEN + "_count"), total(INTER_TOKEN + "_sum")
    per_token = gap_seconds / gaps if gaps > 0 and math.isfinite(gap_seconds) and gap_seconds > 0 else math.nan
    return Finished(n, out / n, total(PROMPT_LENGTHS + "_sum"), tuple(finishes), tuple(means), per_token)


def claimed_outputs(first: tuple[tuple[float, int], ...], finished: Finished,
                    outputs: tuple[tuple[float, float], ...], output_scale: float,
                    seconds_per_token: float, unfinished: int) -> tuple[tuple[Claim, ...], ...]:
    """Per first-token interval ``(end seconds, requests)``, the outputs ``(bucket's upper bound, mean output or
    NaN)`` of the finished requests whose first token it was; its other requests did not finish in the window.

    Each finished request's first token came about its output's length before it finished (its interval's
    mean output where :attr:`Finished.finish_means` has it, else its bucket's mean draw times
    ``output_scale``, at ``seconds_per_token``); walking the finished ones in the order they
    finished, each claims the unclaimed first token at or before its finish nearest to that start. One
    whose start lies before the window by more than half its decode is taken to have started before it,
    unless more than ``unfinished`` (started less finished) would be left: then it claims one too. What no
    finished request claims did not finish."""
    left = [k for _, k in first]
    claims: list[list[Claim]] = [[] for _ in first]
    times = [t for t, _ in first]  # interval ends, ascending
    starts: list[tuple[float, float, float, Claim]] = []
    means = finished.finish_means or (math.nan,) * len(finished.finishes)
    for (done, upper, count), mean in zip(finished.finishes, means):
        size = mean if math.isfinite(mean) else bucket_mean(outputs, upper) * output_scale
        decode = size * seconds_per_token
        starts += [(done - decode, done, decode, (upper, mean))] * int(round(count))

    def claim(start: float, done: float, output: Claim) -> None:
        # the nearest free slot to ``start`` among those at or before ``done`` (the earlier on a tie), found by
        # walking out from ``start``'s place: a linear scan per request was quadratic in a long window
        end = bisect.bisect_right(times, done + 1e-9)
        hi = min(bisect.bisect_left(times, start), end)
        lo = hi - 1
        while lo >= 0 and left[lo] <= 0:
            lo -= 1
        while hi < end and left[hi] <= 0:
            hi += 1
        if lo < 0 and hi >= end:
            return
        pick = lo if hi >= end or (lo >= 0 and abs(times[lo] - start) <= abs(times[hi] - start)) else hi
        left[pick] -= 1
        claims[pick].append(output)

    before: list[tuple[float, float, Claim]] = []
    # by finish: a slot at or before one finish is at or before every later one, so taking the requests in that
    # order leaves the fewest unclaimed (by start, a long decode that began early took the slot a short one needed)
    for start, done, decode, output in sorted(starts, key=lambda r: (r[1], r[0])):
        if start < -0.5 * decode:
            before.append((start, done, output))  # it began before the window
        else:
            claim(start, done, output)
    for start, done, output in before:
        if sum(left) <= unfinished:
            break
        claim(start, done, output)
    return tuple(tuple(c) for c in claims)


@dataclass(frozen=True)
class Unfinished:
    """The window's unfinished requests as a class of their own, and which first token each finished one claimed."""

    claimed: tuple[tuple[Claim, ...], ...] = ()  # per first-token interval (:func:`claimed_outputs`)
    count: float = 0.0  # started less finished
    prompt_tokens: float = 0.0  # each one's mean prompt: the counted prompt tokens the finished ones leave over
    output_tokens: int = 0  # an output that outlives the window
    by_interval: tuple[int, ...] = ()  # per first-token interval, how many did not finish
    note: str = ""


def unfinished_class(first: tuple[tuple[float, int], ...], outputs: tuple[tuple[float, float], ...],
                     output_scale: float, finished: Finished, started: float, counted_prompt: float,
                     generated: float, seconds_per_token: float) -> Unfinished:
    """The unfinished requests (see the module docstring): started (first tokens) less finished, with the counted
    prompt tokens less the finished ones', and an output of twice the window's generated tokens, more than any one
    request generated in it (the feeder caps it at the context length); finished requests that started before the
    window make the count a lower bound. ``first``: per first-token interval, ``(end seconds, requests)``."""
    unfinished = max(0, math.floor(started - finished.requests + 0.5))
    claims: tuple[tuple[Claim, ...], ...] = ()
    if math.isfinite(finished.seconds_per_token):  # the decoders' own pace, not the running gauge's
        seconds_per_token = finished.seconds_per_token
    if first and finished.finishes and math.isfinite(seconds_per_token):
        claims = claimed_outputs(first, finished, outputs, output_scale, seconds_per_token, unfinished)
    left = counted_prompt - finished.prompt_tokens
    if unfinished < 1 or not math.isfinite(left) or left < unfinished:
        return Unfinished(claims)
    by_interval = tuple(count - len(c) for (_, count), c in zip(first, claims))
    return Unfinished(claims, float(unfinished), left / unfinished, int(2 * max(generated, 1.0)), by_interval,
                      f"{unfinished:.0f} of the {started:.0f} requests that started in the window did not finish in "
                      f"it (first tokens less finished requests): drawn beside the finished ones, ~"
                      f"{left / unfinished:,.0f}-token prompts that do not end inside the window")


def pair_counts(prompts: np.ndarray, outputs: np.ndarray) -> np.ndarray:
    """The joint counts ``[prompt bucket, output bucket]`` of per-interval bucket counts of the same requests."""
    joint = np.zeros((prompts.shape[1], outputs.shape[1]))
    loose: list[tuple[np.ndarray, np.ndarray]] = []
    for p, g in zip(prompts, outputs):
        n = p.sum()
        if n <= 0 or n != g.sum():
            continue  # nothing finished, or the two families were not scraped at the same moment
        pb, ob = np.nonzero(p)[0], np.nonzero(g)[0]
        if pb.size == 1:
            joint[pb[0], :] += g
        elif ob.size == 1:
            joint[:, ob[0]] += p
        else:
            loose.append((p.copy(), g.copy()))
    prior = np.outer(prompts.sum(axis=0), outputs.sum(axis=0))
    prior = prior / prior.sum() if prior.sum() > 0 else prior
    for p, g in loose:
        score = joint + 1e-3 * prior
        while p.sum() > 0:
            allowed = np.outer(p > 0, g > 0)
            i, j = np.unravel_index(np.argmax(np.where(allowed, score, -1.0)), score.shape)
            joint[i, j] += 1
            p[i] -= 1
            g[j] -= 1
    return joint


def length_pairs(endpoint: Endpoint, rows: np.ndarray) -> tuple[Pair, ...]:
    """The window's (prompt bucket, output bucket, requests) pairs; () where either histogram is missing."""
    rows = np.asarray(rows, dtype=np.int64)
    prompts, outputs = bucket_increases(endpoint, rows, PROMPT_LENGTHS), bucket_increases(endpoint, rows,
                                                                                         OUTPUT_LENGTHS)
    if prompts is None or outputs is None or rows.size < 2:
        return ()
    joint = pair_counts(prompts[1], outputs[1])
    return tuple((float(prompts[0][i]), float(outputs[0][j]), float(joint[i, j]))
                 for i, j in zip(*np.nonzero(joint)))


def draw_length(rng: random.Random, histogram: tuple[tuple[float, float], ...]) -> float:
    """One length from a histogram's window counts: a bucket by its count, uniform inside it.

    The ``+Inf`` bucket has no upper edge: its lengths are drawn up to 1.5 x its lower edge.
    """
    total = sum(c for _, c in histogram)
    if total <= 0:
        return 1.0
    pick, low = rng.uniform(0.0, total), 0.0
    for upper, c in histogram:
        if pick <= c:
            high = upper if math.isfinite(upper) else 1.5 * max(low, 1.0)
            return rng.uniform(low, high)
        pick -= c
        low = upper
    return low


def bucket_mean(histogram: tuple[tuple[float, float], ...], upper: float) -> float:
    """The mean of :func:`draw_in_bucket`'s draws in the bucket with this upper bound."""
    low = max([b for b, _ in histogram if b < upper], default=0.0)
    return (low + (upper if math.isfinite(upper) else 1.5 * max(low, 1.0))) / 2


def long_prompt_size(histogram: tuple[tuple[float, float], ...], short: float, long_factor: float,
                     interval_excess: np.ndarray) -> float:
    """The long prompts' mean length: from the prompt-length histogram where there is one (each prompt counted
    once; a fast host finished 2-3 3,000-token prompts in one 1 s interval, whose excess over its short prompts
    read 8,904), its buckets whose draws average above ``long_factor`` short prompts; else the median of the
    intervals' excess (one long prompt an interval). 0 where neither holds a long prompt."""
    longs = [(u, c) for u, c in histogram if c > 0 and bucket_mean(histogram, u) > long_factor * short]
    count = sum(c for _, c in longs)
    if count > 0:
        return sum(c * bucket_mean(histogram, u) for u, c in longs) / count
    return float(np.median(interval_excess)) if interval_excess.size else 0.0


def expected_length(pairs: tuple[tuple[float, float, float], ...],
                    outputs: tuple[tuple[float, float], ...]) -> float:
    """The mean length the draws give: of each pair's second bucket (outputs), else of the marginal histogram."""
    weights = [(o, c) for _, o, c in pairs] if pairs else list(outputs)
    total = sum(c for _, c in weights)
    return sum(c * bucket_mean(outputs, o) for o, c in weights) / total if total > 0 else math.nan


def draw_in_bucket(rng: random.Random, histogram: tuple[tuple[float, float], ...], upper: float) -> float:
    """One length uniform inside the bucket of ``histogram`` with this upper bound (+Inf: to 1.5 x its lower edge)."""
    low = 0.0
    for bound, _ in histogram:
        if bound >= upper:
            break
        low = bound
    high = upper if math.isfinite(upper) else 1.5 * max(low, 1.0)
    return rng.uniform(low, high)


def scaled_count(rng: random.Random, count: int, load: float) -> int:
    """``count x load`` requests, the fraction drawn."""
    x = count * load
    return int(x) + (1 if rng.random() < x - int(x) else 0)


def lognormal(rng: random.Random, mean: float, sigma: float) -> int:
    """A log-normal draw with the given mean."""
    if mean <= 0:
        return 1
    return int(round(mean * math.exp(rng.gauss(0.0, sigma) - sigma * sigma / 2)))
