"""When each request arrived, from vLLM V1's first-token counters.

vLLM V1 counts, in the step that emits a request's first token, the request in the TTFT
histogram (its count and ``_sum``) and its whole prompt in ``prompt_tokens_total``
(``vllm/v1/metrics/stats.py`` l. 517-519, ``loggers.py`` l. 1262-1268 and the TTFT observation in
``record()``, 0.32.0). So per scrape interval the recording says how many requests got their
first token, their prompts' sum and their summed wait; the TTFT buckets say how the wait splits
(each request at its bucket's middle, scaled to the sum: exact for one request), and each
arrived its wait before a moment inside the interval, the longest prompt waiting longest. Drawing arrivals uniformly inside a 15 s block instead (the
fallback where these counters are absent) put a live run's back-to-back 3,000-token prompts
side by side and seconds apart: the twin queued them (waiting 1.1 against 0, TTFT p90 +99 %)
and decoded between them, so its decoders' pace while prefill ran read 5.5 tok/s against 1.1.

llama.cpp counts no request; its decoders' next requests are read where the completion counter
jumps (:func:`restarts_from`).
"""

from __future__ import annotations

import numpy as np

from pdcensus.census.run import ShapeRead
from pdcensus.series.engine_ledger import term_increases
from pdcensus.series.model import Endpoint
from pdcensus.series.profiles import LedgerTerm, Signal

TTFT_SUM = "vllm:time_to_first_token_seconds_sum"
DECODER_MIN_TOKENS = 16  # a completion jump below this is a prompt request's own few tokens
# one interval with first tokens: (start, end) seconds from the window start, requests, their prompts' sum, and
# each request's TTFT
FirstTokens = tuple[float, float, int, float, tuple[float, ...]]


def ttft_sums(endpoint: Endpoint, rows: np.ndarray) -> np.ndarray | None:
    """Per interval, the increase of the TTFT histogram's ``_sum`` (None where it is not exported)."""
    return term_increases(endpoint, np.asarray(rows, dtype=np.int64), LedgerTerm((TTFT_SUM,)))


def first_tokens(read: ShapeRead, waits: np.ndarray | None, computed_share: float) -> tuple[FirstTokens, ...]:
    """The intervals' first tokens (see the module docstring); () where any counter is missing.

    ``computed_share``: the window's computed prompt work over its counted prompts (prefix-cache hits
    are counted in the prompt and not computed; the twin has no prefix cache, so it computes the share)."""
    s = read.signals
    ttft, prompt = s.histograms.get(Signal.TTFT), s.increase(Signal.PROMPT_TOKENS)
    if waits is None or ttft is None or prompt is None or read.detection.profile.name != "vllm-v1":
        return ()
    counts = np.nan_to_num(ttft.increases[:, -1])
    t = s.times - s.times[0]
    out = []
    for i in range(1, t.size):
        k = int(round(counts[i]))
        if k < 1 or not (np.isfinite(waits[i]) and np.isfinite(prompt[i])):
            continue
        out.append((float(t[i - 1]), float(t[i]), k, float(max(prompt[i], 0.0)) * computed_share,
                    split_wait(ttft.upper_bounds, np.nan_to_num(ttft.increases[i]), k, float(max(waits[i], 0.0)))))
    return tuple(out)


def split_wait(bounds: np.ndarray, cumulative: np.ndarray, k: int, total: float) -> tuple[float, ...]:
    """``k`` requests' TTFTs: each at its bucket's middle (the +Inf bucket at 1.5 x its lower edge), scaled so that
    they sum to ``total`` (the ``_sum``'s increase); equal shares where the buckets do not add up to ``k``."""
    per_bucket = np.diff(np.concatenate([[0.0], cumulative]))
    lows = np.concatenate([[0.0], bounds[:-1]])
    mids = np.where(np.isfinite(bounds), (lows + bounds) / 2, 1.5 * lows)
    guesses = [float(m) for m, c in zip(mids, np.round(per_bucket)) for _ in range(int(max(c, 0)))]
    if len(guesses) != k or sum(guesses) <= 0:
        return tuple([total / k] * k)
    scale = total / sum(guesses)
    return tuple(sorted(g * scale for g in guesses))


def restarts_from(t: np.ndarray, completed: np.ndarray | None) -> tuple[tuple[tuple[float, float, int], ...], int]:
    """Where requests ended (each a jump of the completion counter) and their typical size.

    The smallest jump is one request's tokens; a jump of several times it is that many requests
    ending in one interval (three 200-token streams ending together move it by 600). A jump under
    :data:`DECODER_MIN_TOKENS` is a prompt request's own few tokens (a 1-token request marking its
    prompt's end), not a decoding stream's.
    """
    if completed is None:
        return (), 0
    jumps = np.nan_to_num(np.asarray(completed, dtype=np.float64))
    where = np.nonzero(jumps[1:] >= DECODER_MIN_TOKENS)[0] + 1
    if not where.size:
        return (), 0
    one = float(jumps[where].min())
    out = tuple((float(t[i - 1]), float(t[i]), max(1, int(round(jumps[i] / one)))) for i in where)
    return out, max(1, int(round(one)))
