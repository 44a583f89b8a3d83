"""The recording's traffic, fitted: requests and prompt work per block, drawn again per seed as a trace.

What a recording says about its traffic, per scrape interval: how many requests (the TTFT or
e2e histogram's count, else the finished-requests counter), how much prefill ran (the census's
prefill signal: computed tokens, cache hits excluded, spread over when they ran), and how many
tokens were generated. It does not say each request's length. So per block of intervals (at
least :data:`BLOCK_SECONDS`, so that a request's arrival and its counted work fall in the same
block), the block's requests are short prompts of the window's typical size, and whatever prompt
work exceeds them is long prompts of the window's typical excess: work-conserving, so the twin
computes the prefill the recording computed, in about the sizes that mattered.

Blocks of 15 s rather than 30 s: on the simulator's ``step-time-sharing`` (seed 1, 15 s
scrapes) 30 s blocks merged neighbouring long prompts (typical long 57k tokens against the
scenario's ~41k; 15 s: 37k), and the twin's TTFT p90 missed by +37 % against -12 %; on the
real vLLM run ``tp1_bs128`` the busy per-stream calibration error was -23 % against -12 %.

- typical short prompt: the 10th percentile of the intervals' prompt work per request
  (intervals carrying a long prompt's work sit above it; on the simulator's ``step-time-sharing``
  scenario this gives 164 tokens for chat prompts of mean ~180);
- a block carries long prompts only where its work per request is above :data:`SHORTS_SPREAD` x the
  typical short (2.59: a log-normal's mean over its 10th percentile at sigma 0.6), i.e. beyond what
  the shorts' own spread carries: on busy chat (the real Llama-3.3-70B runs at 2-7 requests/s, ~100
  a block, 220 tokens a request against a 134-token 10th percentile) the excess is that spread, not
  one ~9k-token prompt a block; read as one, the twin's prefill came in bursts (busy intervals 10 % of
  the window at ~6k tok/s against 3 % at ~3.2k recorded) and its busy per-stream decode missed by
  -33 % to -55 %. The simulator's ``step-time-sharing`` (38 a block, 6.7 shorts' worth) is unchanged;
- short prompts and outputs are log-normal around their typical size (sigmas
  :data:`PROMPT_SIGMA`, :data:`OUTPUT_SIGMA`: assumptions, said in the notes);
- arrivals: uniform inside their block, drawn per seed;
- where requests are counted when they finish (the finished-requests counter: on the real DeepSeek-R1
  runs, 3k-token reasoning outputs end a minute after their 30k-120k-token prefill), a block with prompt
  work and no counted request borrows one from the blocks after it. Without it the twin computed 14-79 %
  of those recordings' prompt work.

Where the engine exports its length histograms (vLLM's ``request_prompt_tokens`` and
``request_generation_tokens``), a block's requests are drawn from them, outputs paired with their
prompts (:mod:`pdcensus.whatif.lengths`), and of up to :data:`CANDIDATE_DRAWS` draws the first
within :data:`CLOSE_ENOUGH` of the block's work (else the closest) is kept, scaled to it: scaled
independent draws turned a live vLLM block's 3,000-token prompts into 5,000-token ones, or its
32-token ones into hundreds. Where vLLM V1 counts each prompt whole with its first token
(``prompt_tokens_total`` and the TTFT histogram in the same step, ``v1/metrics/stats.py``
l. 517-519), the typical sizes come from that counter per interval, a long one an interval (the
spread prefill signal and a block's excess read that run's 3,000-token prompts as ~14,500), and
the requests arrive by their first tokens (:mod:`pdcensus.whatif.arrivals`).

Where the recording counts no request at all (llama.cpp exports no request counter), the caller
gives the mean prompt size (``--mean-prompt-tokens``): prompts then arrive as the prompt work
crosses each multiple of it, and the decoders that run throughout are a standing population of
the median number of generating slots.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

import numpy as np

from pdcensus.census.run import ShapeRead
from pdcensus.errors import UsageError
from pdcensus.series.profiles import Signal
from pdcensus.sim.fitted import TraceRequest
from pdcensus.whatif import counted
from pdcensus.whatif.arrivals import first_tokens, restarts_from
from pdcensus.whatif.lengths import (Claim, Finished, draw_in_bucket, draw_length, expected_length, lognormal,
                                     long_prompt_size, scaled_count, with_open_requests)

BLOCK_SECONDS = 15.0
PROMPT_SIGMA = 0.6
OUTPUT_SIGMA = 0.5
SHORT_QUANTILE_Z = 1.2816  # the standard normal's 90th percentile: the 10th percentile is mean-z sigma below
# a block's work per request up to this many typical (10th-percentile) shorts is the shorts' own spread: the
# mean of a log-normal over its 10th percentile, exp(z sigma + sigma^2 / 2), 2.59 at sigma 0.6
SHORTS_SPREAD = math.exp(SHORT_QUANTILE_Z * PROMPT_SIGMA + PROMPT_SIGMA ** 2 / 2)
SHORT_QUANTILE = 0.10
LONG_FACTOR = 3.0  # a block's work per request above this many typical prompts carries long prompt(s)
# a prompt starts when the work passes this share of a mean prompt beyond the previous ones'
CROSS_TOLERANCE = 0.05  # (a prompt a few tokens longer than the mean would otherwise count as two)
CANDIDATE_DRAWS = 256  # draws of a block's lengths from the histograms at most; the closest to its prompt work is kept
CLOSE_ENOUGH = 0.05  # ... or the first within 5 % of it
MIN_FINISHED = 3  # finished requests whose mean output sizes the twin's outputs (fewer: generated per request)
RESTART_PROMPT_TOKENS = 16  # a decoding stream's next request: a short prompt


@dataclass(frozen=True)
class Traffic:
    """Per block: start, end (seconds from the window start), requests and prompt work; typical sizes."""

    window_seconds: float
    block_starts: tuple[float, ...]
    block_ends: tuple[float, ...]
    requests: tuple[float, ...]
    prompt_tokens: tuple[float, ...]
    short_prompt_tokens: float
    long_prompt_tokens: float
    mean_output_tokens: float
    request_basis: str
    standing_decoders: int = 0
    standing_output_tokens: int = 0
    prompt_sigma: float = PROMPT_SIGMA
    notes: tuple[str, ...] = field(default=())
    # closed-loop decoders (no request count): (start, end, count) of the decode requests that
    # replace finished ones, and their output size
    restarts: tuple[tuple[float, float, int], ...] = ()
    restart_output_tokens: int = 0
    # the window's prompt / output length histograms where the engine exports them (vLLM's
    # request_prompt_tokens / request_generation_tokens): ((upper bound, count in the window), ...)
    prompt_lengths: tuple[tuple[float, float], ...] = ()
    output_lengths: tuple[tuple[float, float], ...] = ()
    # a block with prompt work and no counted request borrows one from the blocks after it: the requests are
    # counted when they end (the finished-requests counter), not when their prefill runs
    borrow: bool = False
    # (prompt bucket upper bound, output bucket upper bound, requests): the histograms paired per scrape
    length_pairs: tuple[tuple[float, float, float], ...] = ()
    # histogram-drawn outputs times this: the finished requests' mean output (else the window's generated tokens
    # per request) over the draws' expected mean (a bucket's draws are uniform inside it: 300-token outputs in
    # vLLM's (200, 500] bucket drew 350 on average)
    output_scale: float = 1.0
    # requests that started in the window and did not finish in it (first tokens less finished requests):
    # drawn beside the finished pairs by their count, with the prompt tokens the finished ones leave over,
    # and an output that outlives the window (:mod:`pdcensus.whatif.lengths`)
    open_requests: float = 0.0
    open_prompt_tokens: float = 0.0
    open_output_tokens: int = 0
    open_by_interval: tuple[int, ...] = ()  # per first_tokens interval, how many did not finish
    # per first_tokens interval, the outputs (bucket's upper bound, mean or NaN) of the finished requests whose
    # first token it was (pdcensus.whatif.lengths.claimed_outputs): a decoder's output goes where a decoder started
    claimed: tuple[tuple[Claim, ...], ...] = ()
    # the same for prompts, where the prompt counter counts whole prompts with the requests (vLLM V1): a draw
    # inside the (2000, 5000] bucket is 3,500 on average, a live run's prompts there were 3,000
    prompt_scale: float = 1.0
    # vLLM V1: per interval with first tokens, (start, end, requests, prompts' sum, each request's TTFT)
    # (pdcensus.whatif.arrivals): the counted requests arrive their wait before a moment inside the interval
    first_tokens: tuple[tuple[float, float, int, float, tuple[float, ...]], ...] = ()

    @property
    def prompt_tokens_total(self) -> float:
        return float(sum(self.prompt_tokens))

    @property
    def request_rate_per_second(self) -> float:
        return float(sum(self.requests)) / self.window_seconds if self.window_seconds > 0 else math.nan

    def trace(self, seed: int, load: float = 1.0) -> list[TraceRequest]:
        """The requests of one seed (``load`` multiplies the request and prompt work of every block)."""
        rng = random.Random(seed)
        out: list[TraceRequest] = [TraceRequest(0.0, RESTART_PROMPT_TOKENS, self.standing_output_tokens, "standing")
                                   for _ in range(self.standing_decoders)]
        for start, end, count in self.restarts:
            out += [TraceRequest(rng.uniform(start, end), RESTART_PROMPT_TOKENS, self.restart_output_tokens, "standing")
                    for _ in range(count)]
        if self.first_tokens and self.prompt_lengths:
            opened = self.open_by_interval or (0,) * len(self.first_tokens)
            claimed = self.claimed or ((),) * len(self.first_tokens)
            for (start, end, count, work, waits), still, outputs in zip(self.first_tokens, opened, claimed):
                n = scaled_count(rng, count, load)
                # at the recorded load each first token keeps the output of the finished request that claimed it
                drawn = sorted(self._from_histograms(rng, start, end, n, work * n / count,
                                                     min(n, scaled_count(rng, still, load)) if still else 0,
                                                     outputs if n == count else ()),
                               key=lambda r: r.prompt_tokens)
                # the longest prompt waited longest (its prefill is in its wait); a load above 1 repeats the waits
                ranked = sorted(waits[i % count] for i in range(n))
                out += [replace(r, arrival_seconds=max(0.0, r.arrival_seconds - w)) for r, w in zip(drawn, ranked)]
            return out
        counts = self.block_counts(load)
        # borrowed requests left unpaid at the window's end: outputs shrink so the generated work holds
        output_scale = min(1.0, sum(self.requests) * load / sum(counts)) if sum(counts) > 0 else 1.0
        for start, end, count, work in zip(self.block_starts, self.block_ends, counts, self.prompt_tokens):
            work = work * load
            if count <= 0:
                continue
            # long prompts: the block's excess over its short prompts in units of the typical long one; an
            # excess under half of one (a long prompt's tail counted in the next block) is spread over the shorts
            excess = work - count * self.short_prompt_tokens
            longs = 0
            spread = work <= SHORTS_SPREAD * count * self.short_prompt_tokens  # the shorts' own spread carries it
            if excess > LONG_FACTOR * self.short_prompt_tokens and self.long_prompt_tokens > 0 and not spread:
                longs = min(count, int(math.floor(excess / self.long_prompt_tokens + 0.5)))
            shorts = count - longs
            long_size = (work - shorts * self.short_prompt_tokens) / longs if longs else 0.0
            short_mean = self.short_prompt_tokens if longs else max(work / count, 1.0)
            if self.prompt_lengths:
                out += self._from_histograms(rng, start, end, count, work)
                continue
            for i in range(count):
                t = rng.uniform(start, end)
                prompt = int(round(long_size)) if i < longs else lognormal(rng, short_mean, self.prompt_sigma)
                output = lognormal(rng, self.mean_output_tokens * output_scale, OUTPUT_SIGMA)
                out.append(TraceRequest(t, max(1, prompt), max(1, output), "long" if i < longs else "short"))
        return out

    def block_counts(self, load: float = 1.0) -> list[int]:
        """Requests per block: the counted ones (fractions carried on), and one borrowed where prompt work ran
        with none counted (:attr:`borrow`), repaid by the blocks after it."""
        out: list[int] = []
        carry = 0.0
        for n, work in zip(self.requests, self.prompt_tokens):
            carry += n * load
            count = int(math.floor(carry)) if carry >= 1.0 else 0  # below 0: a borrowed request not yet repaid
            carry -= count
            if count <= 0 and self.borrow and work * load > LONG_FACTOR * self.short_prompt_tokens:
                # prompt work ran here but no request was counted here (a finished-requests counter counts a
                # request when its decode ends, minutes after its prefill): one request is borrowed from the
                # blocks that follow, so the work runs where it ran and the window's request count holds
                count, carry = 1, carry - 1.0
            out.append(count)
        return out

    def _from_histograms(self, rng: random.Random, start: float, end: float, count: int,
                         work: float, opened: int | None = None, outputs: tuple[Claim, ...] = ()) -> list[TraceRequest]:
        """A block's requests with lengths drawn from the window's histograms (paired where they are), of
        up to :data:`CANDIDATE_DRAWS` draws the first close to the block's work (else the closest), its prompts
        scaled to that work. ``opened``: how many of them do not finish in the window (None: drawn by the
        unfinished requests' count beside the finished ones); ``outputs``: the outputs of as many of the others
        (:func:`pdcensus.whatif.lengths.claimed_outputs`), whose prompts are drawn given them."""
        best: list[tuple[float, float]] = []
        miss = math.inf
        for _ in range(CANDIDATE_DRAWS):
            if opened is None:
                drawn = [self._draw_pair(rng) for _ in range(count)]
            else:
                given = outputs[:count - opened]
                drawn = [self._given_output(rng, *o) for o in given] + \
                    [self._draw_pair(rng, False) for _ in range(count - opened - len(given))] + \
                    [self._open(rng) for _ in range(opened)]
            off = abs(math.log(max(sum(p for p, _ in drawn), 1.0) / max(work, 1.0)))
            if off < miss:
                best, miss = drawn, off
            if miss < CLOSE_ENOUGH:
                break
        total = sum(p for p, _ in best)
        scale = work / total if total > 0 else 1.0
        return [TraceRequest(rng.uniform(start, end), max(1, int(round(p * scale))), max(1, int(round(o))),
                             "histogram") for p, o in best]

    def _given_output(self, rng: random.Random, upper: float, mean: float) -> tuple[float, float]:
        """One finished request whose output is in the bucket with this upper bound (``mean``: its size, where
        its interval says it; NaN: a draw inside the bucket): its prompt drawn from the prompt buckets paired
        with that bucket (the prompt histogram where none is)."""
        with_it = [(p, c) for p, o, c in self.length_pairs if o == upper and c > 0]
        if with_it:
            pick = rng.uniform(0.0, sum(c for _, c in with_it))
            for p_upper, c in with_it:
                if pick <= c:
                    break
                pick -= c
            prompt = draw_in_bucket(rng, self.prompt_lengths, p_upper)
        else:
            prompt = draw_length(rng, self.prompt_lengths)
        output = mean if math.isfinite(mean) else draw_in_bucket(rng, self.output_lengths, upper) * self.output_scale
        return prompt * self.prompt_scale, output

    def _open(self, rng: random.Random) -> tuple[float, float]:
        """One request that does not finish inside the window: its prompt, and an output that outlives it."""
        return lognormal(rng, self.open_prompt_tokens, self.prompt_sigma), float(self.open_output_tokens)

    def _draw_pair(self, rng: random.Random, may_open: bool = True) -> tuple[float, float]:
        """One (prompt, output) length: a scraped pair where the histograms are paired, else independent draws;
        or (``may_open``), by their count beside the finished ones, a request that does not finish in the window."""
        finished = sum(c for _, _, c in self.length_pairs) if self.length_pairs else \
            sum(c for _, c in self.output_lengths)
        if may_open and self.open_requests > 0 and rng.uniform(0.0, finished + self.open_requests) > finished:
            return self._open(rng)
        if self.length_pairs:
            pick = rng.uniform(0.0, finished)
            for p_upper, o_upper, c in self.length_pairs:
                if pick <= c:
                    break
                pick -= c
            return (draw_in_bucket(rng, self.prompt_lengths, p_upper) * self.prompt_scale,
                    draw_in_bucket(rng, self.output_lengths, o_upper) * self.output_scale)
        output = (draw_length(rng, self.output_lengths) if self.output_lengths
                  else lognormal(rng, self.mean_output_tokens, OUTPUT_SIGMA))
        return draw_length(rng, self.prompt_lengths) * self.prompt_scale, float(output) * self.output_scale


def fit_traffic(read: ShapeRead, mean_prompt_tokens: float | None = None,
                completed_tokens: np.ndarray | None = None,
                lengths: tuple[tuple[tuple[float, float], ...], tuple[tuple[float, float], ...]] = ((), ()),
                pairs: tuple[tuple[float, float, float], ...] = (),
                waits: np.ndarray | None = None,
                finished: Finished | None = None) -> Traffic:
    """The window's traffic per block (see the module docstring).

    ``completed_tokens``: per interval, the tokens of the requests that ended in it (llama.cpp's
    ``tokens_predicted_total`` moves only then), for decoders that send their next request when one ends.
    ``lengths``: the window's prompt and output length histograms, where the engine exports them;
    then each block's prompts are drawn from the histogram and scaled to the block's work.
    ``pairs``: the two histograms paired per scrape (:func:`pdcensus.whatif.lengths.length_pairs`).
    ``waits``: per interval, the TTFT histogram's ``_sum`` increase (:mod:`pdcensus.whatif.arrivals`).
    ``finished``: the window's finished requests (:func:`pdcensus.whatif.lengths.finished_requests`): the
    finished outputs' size where at least ``MIN_FINISHED`` finished (else the window's generated tokens per
    request), and the requests that started and did not finish.
    """
    s = read.signals
    t = s.times - s.times[0]
    window = float(t[-1]) if t.size > 1 else 0.0
    prompt = counted.work(read, Signal.PROMPT_TOKENS, s.prefill_tokens_per_second)
    progress = s.prefill_progress
    if s.rates_from_counters and progress is not None and progress.reprefill_tokens_per_second is not None:
        # the census's signal carries its estimate of re-prefill after preemptions, which the twin runs itself
        # where it preempts: new prompts' work is the rest (counted in, a simulated vLLM recording of 150-400-token
        # prompts beside 1,487 preemptions was replayed as 2,193-token prompts)
        dt = np.nan_to_num(s.interval_seconds, nan=0.0)
        prompt = np.maximum(0.0, prompt - np.nan_to_num(progress.reprefill_tokens_per_second) * dt)
    generated = counted.work(read, Signal.GENERATION_TOKENS, s.decode_tokens_per_second)
    counts, basis = counted.request_counts(read)
    if counts is None:
        return _without_counts(read, t, prompt, generated, window, mean_prompt_tokens, [], completed_tokens)
    notes = [f"short prompts log-normal (sigma {PROMPT_SIGMA}), outputs log-normal (sigma {OUTPUT_SIGMA}): assumed"]
    blocks = counted.blocks(t, max(BLOCK_SECONDS, read.scrape_interval_seconds))
    starts = tuple(float(t[i - 1]) for i, _ in blocks)
    ends = tuple(float(t[j - 1]) for _, j in blocks)
    n = tuple(float(counts[i:j].sum()) for i, j in blocks)
    work = tuple(float(prompt[i:j].sum()) for i, j in blocks)
    # the typical short prompt: a low quantile of each interval's work per request (most intervals
    # between long prompts carry short ones only); blocks as a fallback
    whole = counted.whole_at_first_token(read, basis)
    sizes = np.nan_to_num(whole) if whole is not None else prompt
    sel = (counts >= 1) & (sizes > 0)
    per_request = sizes[sel] / counts[sel] if sel.any() else np.array([w / k for w, k in zip(work, n) if k >= 1])
    short = float(np.quantile(per_request, SHORT_QUANTILE)) if per_request.size else 1.0
    if whole is not None:  # one long prompt an interval: the counter's jump less its shorts
        over = sizes[sel] - counts[sel] * short
        excess = over[over > LONG_FACTOR * short]
    else:
        excess = np.array([w - k * short for w, k in zip(work, n) if k >= 1 and w - k * short > LONG_FACTOR * short])
    long_size = long_prompt_size(lengths[0], short, LONG_FACTOR, excess)
    total = float(np.sum(n))
    mean_output = float(np.sum(generated)) / total if total > 0 else 1.0
    sized = finished is not None and finished.requests >= MIN_FINISHED and finished.output_mean > 0
    if finished is not None and sized:
        mean_output = finished.output_mean
    notes.append(f"requests from the {basis}; prompt work from the census's prefill signal")
    prompt_lengths, output_lengths = lengths
    if prompt_lengths:
        notes[0] = ("prompt lengths from the request_prompt_tokens histogram (scaled to each block's computed "
                    "work), outputs from " + ("request_generation_tokens" if output_lengths else
                                              f"a log-normal (sigma {OUTPUT_SIGMA}): assumed"))
        if pairs and output_lengths:
            notes[0] += ", paired with their prompts per scrape (both observed when a request finishes)"
        if output_lengths and sized and finished is not None:
            notes[0] += (f"; outputs sized to the {finished.requests:.0f} finished requests' mean "
                         f"({finished.output_mean:,.0f} tokens: request_generation_tokens _sum / _count)")
    borrow = basis == "finished-requests counter"
    out = Traffic(window, starts, ends, n, work, max(1.0, short), long_size, max(1.0, mean_output), basis,
                  notes=tuple(notes), prompt_lengths=prompt_lengths, output_lengths=output_lengths, borrow=borrow,
                  length_pairs=pairs if prompt_lengths and output_lengths else ())
    counted_prompt = float(np.nansum(whole)) if whole is not None else 0.0
    # computed over counted prompt work: below 1 where prefix-cache hits were counted and not computed; above 1
    # only by recompute after preemption (the prompt is counted once, at its first token), which the twin runs
    # itself where it preempts, so the share is at most 1
    arrivals = first_tokens(read, waits,
                            min(1.0, float(np.sum(prompt)) / counted_prompt) if counted_prompt > 0 else 1.0)
    if arrivals and prompt_lengths:
        out = replace(out, first_tokens=arrivals, notes=out.notes + (
            "arrivals: each request its interval's mean TTFT before a moment inside the interval of its first "
            "token (TTFT histogram count and _sum); prompts sum to the interval's prompt counter",))
    if prompt_lengths and output_lengths:
        drawn = expected_length(out.length_pairs, output_lengths)
        if math.isfinite(drawn) and drawn > 0 and total > 0:
            out = replace(out, output_scale=mean_output / drawn)
        drawn = expected_length(tuple((o, p, c) for p, o, c in out.length_pairs), prompt_lengths)
        if counted_prompt > 0 and math.isfinite(drawn) and drawn > 0 and total > 0:
            out = replace(out, prompt_scale=counted_prompt / total / drawn)
    if prompt_lengths and output_lengths and sized and finished is not None:
        out = with_open_requests(out, finished, total, counted_prompt, float(np.sum(generated)),
                                  counted.seconds_per_token(read, float(np.sum(generated))))
    borrowed = sum(1 for k, c in zip(n, out.block_counts()) if c >= 1 and k < 1)
    if borrowed:
        out = replace(out, notes=out.notes + (
            f"requests are counted when they finish: {borrowed} of {len(n)} blocks had prompt work and none "
            "counted, and borrow one from the blocks after them (the prefill runs where it ran)",))
    return out


def _without_counts(read: ShapeRead, t: np.ndarray, prompt: np.ndarray, generated: np.ndarray, window: float,
                    mean_prompt_tokens: float | None, notes: list[str],
                    completed_tokens: np.ndarray | None = None) -> Traffic:
    if mean_prompt_tokens is None or mean_prompt_tokens <= 0:
        raise UsageError("the recording counts no requests (no TTFT/e2e histogram, no finished-requests "
                         "counter): give --mean-prompt-tokens N")
    s = read.signals
    running = s.gauge(Signal.RUNNING)
    # decoders that run throughout: the running gauge where no prompt work moved (there it counts decoders only)
    quiet = np.isfinite(running) & (prompt <= 0) if running is not None else np.zeros(t.size, bool)
    if running is not None and quiet[1:].sum() < 3:
        quiet = np.isfinite(running)
    standing = int(round(float(np.median(running[quiet])))) if running is not None and quiet.any() else 0
    dt = np.diff(t)
    # each interval's prompts: the multiples of the mean prompt its cumulative work crosses (its first work)
    cumulative = np.concatenate([[0.0], np.cumsum(prompt[1:])])
    starts, ends, n, work = [], [], [], []
    for k in range(1, t.size):
        crossed = math.ceil(cumulative[k] / mean_prompt_tokens - CROSS_TOLERANCE) - math.ceil(
            cumulative[k - 1] / mean_prompt_tokens - CROSS_TOLERANCE)
        if crossed > 0 and dt[k - 1] > 0:
            starts.append(float(t[k - 1]))
            ends.append(float(t[k]))
            n.append(float(crossed))
            work.append(float(crossed * mean_prompt_tokens))
    rate = float(np.sum(generated)) / max(window, 1.0) / max(standing, 1)
    never_ending = int(rate * window * 4) + 64
    restarts, output = restarts_from(t, completed_tokens)
    notes.append(f"no request count: {standing} decoder(s) (median running where no prompt ran); prompts of "
                 f"--mean-prompt-tokens {mean_prompt_tokens:.0f} (1 output token) arriving as the prompt work "
                 "reaches each")
    if restarts:
        notes.append(f"decoders send their next request when one ends: {sum(c for _, _, c in restarts)} request "
                     f"end(s) of ~{output} tokens in the window (tokens_predicted_total's jumps)")
    return Traffic(window, tuple(starts), tuple(ends), tuple(n), tuple(work), float(mean_prompt_tokens), 0.0, 1.0,
                   "prompt work / --mean-prompt-tokens", standing, output if restarts else never_ending, 0.0,
                   tuple(notes), restarts, output)
