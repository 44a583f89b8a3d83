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
from dataclasses import replace

import numpy as np

from pdcensus.census.run import ShapeRead
from pdcensus.errors import UsageError
from pdcensus.series.profiles import Signal
import pdcensus.whatif.counted as counted
from pdcensus.whatif.arrivals import first_tokens, restarts_from
from pdcensus.whatif.lengths import Finished, expected_length, long_prompt_size, unfinished_class
from pdcensus.whatif.traffic import (BLOCK_SECONDS, CROSS_TOLERANCE, LONG_FACTOR, MIN_FINISHED, OUTPUT_SIGMA,
                                     PROMPT_SIGMA, SHORT_QUANTILE, Traffic)


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
        found = unfinished_class(tuple((end, count) for _, end, count, _, _ in out.first_tokens), out.output_lengths,
                                 out.output_scale, finished, total, counted_prompt, float(np.sum(generated)),
                                 counted.seconds_per_token(read, float(np.sum(generated))))
        out = replace(out, claimed=found.claimed, open_requests=found.count, open_prompt_tokens=found.prompt_tokens,
                      open_output_tokens=found.output_tokens, open_by_interval=found.by_interval,
                      notes=out.notes + ((found.note,) if found.note else ()))
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
