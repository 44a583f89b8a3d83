"""The recording's traffic as the twin replays it: requests and prompt work per block, drawn again per seed.

:class:`Traffic` holds what :func:`pdcensus.whatif.traffic_fit.fit_traffic` read from the recording
(per block of scrape intervals: requests and prompt work; the typical short and long prompt; the
length histograms, paired; the first-token intervals and which finished request claimed each) and
draws one seed's trace from it (:meth:`Traffic.trace`). How each figure is read, and why, is in
:mod:`pdcensus.whatif.traffic_fit`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace

from pdcensus.sim.fitted import TraceRequest
from pdcensus.whatif.lengths import Claim, draw_in_bucket, draw_length, lognormal, scaled_count

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
