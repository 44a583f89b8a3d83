"""llama.cpp's server, read as it counts: decode rows, prompt work and the step ledger per interval.

llama.cpp (tag b11434, ``tools/server``) does not count its work the way the census reads a
rate. What each ``llamacpp:`` family means, from the source (``server-context.cpp`` and
``server-task.cpp``, ``server-common.h`` at b11434; see ``docs/engines.md`` for the lines):

- ``n_decode_total``: ``metrics.n_decode++`` in ``metrics_post_decode`` after every successful
  ``llama_decode`` call of the server loop (``decode()``), i.e. per step, as it happens. One call
  carries one token per generating slot and up to ``-b`` (n_batch) prompt tokens; it is split
  into ``-ub`` micro-batches inside ``llama_decode``, but sampling runs after the whole call, so
  a decoding slot waits for the whole call.
- ``n_busy_slots_per_decode`` (a gauge): the cumulative ``n_busy_slots / n_decode``, where every
  call adds the slots that are not idle (generating *and* processing a prompt). Multiplied by
  ``n_decode_total`` it is the cumulative busy slot-calls, so its increase per interval is the
  decode rows plus the prompt slots' calls.
- ``prompt_tokens_total`` and ``prompt_seconds_total``: queued per call and flushed in every call
  that has an output (any call with a generating slot, or the prompt's last chunk); the seconds
  run from the start of the first queued call to the sync after it. With decoders running they
  move per chunk call, and ``prompt_seconds_total`` is then the wall time of the calls that
  carried prompt tokens: the chunk steps' time, server-wide, not per slot. A lone prompt (no
  decoder) is flushed at its last chunk.
- ``tokens_predicted_total`` and ``tokens_predicted_seconds_total``: added in
  ``metrics_on_prediction`` when a request *ends* (its whole ``n_gen`` and its own generation
  time, which overlaps other slots'): never a decode rate.
- ``requests_processing`` / ``requests_deferred``: instant gauges of non-idle slots and queued
  tasks at the scrape.
- Every value is written with ``std::stringstream``'s default 6 significant digits: above 10^6 a
  counter loses its last digits (``1.23457e+06``).

So, per scrape interval (all increases with Prometheus's reset rule):

- calls ``C`` = increase of ``n_decode_total``; busy slot-calls ``S`` = increase of
  ``n_busy_slots_per_decode x n_decode_total``;
- the prompt slots' calls ``K`` (chunk calls): 0 when no prompt token moved; otherwise the slots
  that generate in every call are ``G = floor(S / C)`` and ``K = S - G C`` (``K = C`` when ``S / C``
  is a whole number: every call carried the prompt). Exact while the generating set and one
  prompting slot are steady within the interval;
- decode rows = ``S - K`` (one token per generating slot per call), the running decoders per call
  ``(S - K) / C``, so the per-stream rate is ``C / dt``: calls per second;
- a chunk call longer than the interval is credited, by ``prompt_seconds_total``, to the interval
  where it ended. Its seconds (and prompt tokens, in proportion) are spread back over the
  intervals it ran in, each holding at most its length less its own decode-only calls
  (``(C - K) x`` the undisturbed call time); an interval it covers has no call, so its decoders
  get 0 tokens there, as they did;
- the step ledger: steps ``C``, decode-only steps ``C - K``, chunk seconds the spread prompt
  seconds, decode-only seconds ``dt - chunk seconds`` in intervals with a slot busy at both ends
  (the loop runs calls back to back while any slot is busy, so this is the decode-only wall time
  including sampling and streaming).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.series.increases import cumulative_increase
from pdcensus.series.model import Endpoint
from pdcensus.series.profiles import Signal

PREFIX = "llamacpp:"
N_DECODE = "llamacpp:n_decode_total"
BUSY_PER_DECODE = "llamacpp:n_busy_slots_per_decode"
PROMPT_TOKENS = "llamacpp:prompt_tokens_total"
PROMPT_SECONDS = "llamacpp:prompt_seconds_total"
PROCESSING = "llamacpp:requests_processing"
# Every sample name the derivation reads (the census pulls these from a Prometheus API).
SAMPLE_NAMES = (N_DECODE, BUSY_PER_DECODE, PROMPT_TOKENS, PROMPT_SECONDS, PROCESSING)
SOURCE = ("ggml-org/llama.cpp b11434 tools/server/server-context.cpp (metrics_post_decode, "
          "metrics_flush_prompt, metrics_on_prediction), server-task.cpp (to_metrics)")
# std::stringstream's default precision: 6 significant digits.
SIGNIFICANT_DIGITS = 6


@dataclass(frozen=True)
class LlamacppIntervals:
    """Per interval (row i covers rows i-1..i; NaN on the first and where a counter is missing)."""

    calls: np.ndarray  # llama_decode calls
    slot_calls: np.ndarray  # busy slots summed over calls
    chunk_calls: np.ndarray  # calls that carried a prompt slot (K)
    decode_rows: np.ndarray  # tokens given to generating slots (S - K)
    decoders: np.ndarray  # mean generating slots per call, else the gauge less the prompting slots
    prompt_tokens: np.ndarray  # spread back over the time the chunk calls ran
    chunk_seconds: np.ndarray  # spread likewise
    busy_both_ends: np.ndarray  # a slot was busy at the start and the end of the interval
    undisturbed_call_seconds: float  # median dt / C over intervals with no prompt token


def _column(endpoint: Endpoint, rows: np.ndarray, name: str) -> np.ndarray | None:
    """The summed samples of ``name`` over ``rows`` (NaN where none is present); None if absent."""
    keys = [k for k in endpoint.select(name) if endpoint.column(k)[1].any()]
    if not keys:
        return None
    total = np.zeros(rows.size)
    seen = np.zeros(rows.size, dtype=bool)
    for key in keys:
        values, present = endpoint.column(key)
        total += np.where(present[rows], values[rows], 0.0)
        seen |= present[rows]
    return np.where(seen, total, np.nan)


def increases(cumulative: np.ndarray, times: np.ndarray | None = None) -> np.ndarray:
    """Per-row increase over the row's own interval (``series.increases``: a drop is a reset; a missing
    sample's neighbours share the increase by their intervals' lengths)."""
    return cumulative_increase(cumulative, times)


def print_resolution(value: float) -> float:
    """The step between two values llama.cpp can print near ``value`` (6 significant digits)."""
    if not math.isfinite(value) or value == 0:
        return 0.0
    return float(10.0 ** (math.floor(math.log10(abs(value))) - (SIGNIFICANT_DIGITS - 1)))


def chunk_calls(calls: np.ndarray, slot_calls: np.ndarray, prompt_tokens: np.ndarray, tolerance: np.ndarray,
                chunk_seconds: np.ndarray | None = None, call_seconds: float = 0.0) -> np.ndarray:
    """K per interval: the calls that carried prompt tokens (see the module docstring).

    A prompting slot beside a steady set of generating slots makes ``S / C`` fractional:
    ``K = S - floor(S / C) C``. A whole ``S / C`` with prompt tokens is ambiguous (every call
    carried the same prompting slot, or a decoding stream's next request took its slot's turn
    for one call): the chunk seconds then say how many calls, at least one undisturbed call
    each, ``K = round(chunk seconds / call seconds)`` within ``1..C``.
    """
    k = np.zeros(calls.shape)
    for i, (c, s, p, tol) in enumerate(zip(calls, slot_calls, prompt_tokens, tolerance)):
        if not (math.isfinite(c) and math.isfinite(s)) or c <= 0:
            k[i] = np.nan if not math.isfinite(c) else 0.0
            continue
        if not math.isfinite(p) or p <= 0:
            continue
        ratio = s / c
        whole = round(ratio)
        if whole >= 1 and abs(ratio - whole) <= max(tol, 1e-9):
            seconds = chunk_seconds[i] if chunk_seconds is not None else math.nan
            by_time = round(seconds / call_seconds) if call_seconds > 0 and math.isfinite(seconds) else c
            k[i] = float(min(c, max(1, by_time)))
        else:
            k[i] = min(c, max(0.0, s - math.floor(ratio) * c))
    return k


def _tolerance(n_decode: np.ndarray, per_decode: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """How far S / C may be off a whole number from print rounding alone, per interval."""
    tol = np.zeros(n_decode.shape)
    for i in range(1, n_decode.size):
        c = calls[i]
        if not math.isfinite(c) or c <= 0:
            continue
        err = 0.0
        for j in (i - 1, i):
            n, r = n_decode[j], per_decode[j]
            if math.isfinite(n) and math.isfinite(r):
                err += 0.5 * (print_resolution(r) * n + print_resolution(n) * r)
        tol[i] = err / c
    return tol


def spread_back(seconds: np.ndarray, tokens: np.ndarray, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Move chunk time beyond an interval's room back into the earlier intervals' room.

    Walking back from the last interval, a chunk that ended later ran up to its end without a
    break, so it fills an interval's room before the chunks that ended inside that interval;
    what does not fit moves one interval further back. Prompt tokens go with their chunk's
    seconds, in proportion. Returns ``(seconds, tokens)`` per interval.
    """
    out_s, out_t = np.zeros(seconds.shape), np.zeros(seconds.shape)
    pending: list[list[float]] = []  # [seconds, tokens] per chunk group, the latest first
    for i in range(seconds.size - 1, -1, -1):
        own = seconds[i] if math.isfinite(seconds[i]) else 0.0
        if own > 0:
            pending.append([own, tokens[i] if math.isfinite(tokens[i]) else 0.0])
        free = max(room[i], 0.0) if math.isfinite(room[i]) and i > 0 else math.inf
        while pending and free > 0:
            group = pending[0]
            take = min(group[0], free)
            part = group[1] * take / group[0]
            out_s[i] += take
            out_t[i] += part
            group[0] -= take
            group[1] -= part
            free -= take
            if group[0] <= 1e-12:
                pending.pop(0)
    return out_s, out_t


def derive_intervals(endpoint: Endpoint, rows: np.ndarray, interval_seconds: np.ndarray) -> LlamacppIntervals | None:
    """The per-interval reading of a llama.cpp server; None without ``n_decode_total``."""
    rows = np.asarray(rows, dtype=np.int64)
    n_decode = _column(endpoint, rows, N_DECODE)
    if n_decode is None:
        return None
    nan = np.full(rows.size, np.nan)
    per_decode = _column(endpoint, rows, BUSY_PER_DECODE)
    prompt_cum = _column(endpoint, rows, PROMPT_TOKENS)
    seconds_cum = _column(endpoint, rows, PROMPT_SECONDS)
    processing = _column(endpoint, rows, PROCESSING)
    times = endpoint.timestamps[rows]
    calls = increases(n_decode, times)
    slot_calls = increases(per_decode * n_decode, times) if per_decode is not None else nan.copy()
    prompt = increases(prompt_cum, times) if prompt_cum is not None else nan.copy()
    chunk_s = increases(seconds_cum, times) if seconds_cum is not None else nan.copy()
    tol = _tolerance(n_decode, per_decode, calls) if per_decode is not None else np.zeros(rows.size)
    dt = np.asarray(interval_seconds, dtype=float)
    quiet = np.isfinite(calls) & (calls > 0) & (np.nan_to_num(prompt) <= 0) & np.isfinite(dt)
    if not quiet.any():  # every interval carried a prompt: the median call of all intervals
        quiet = np.isfinite(calls) & (calls > 0) & np.isfinite(dt)
    call_s = float(np.median(dt[quiet] / calls[quiet])) if quiet.any() else 0.0
    k = chunk_calls(calls, slot_calls, prompt, tol, chunk_s, call_s)
    rows_decode = np.clip(slot_calls - k, 0.0, None)
    room = dt - np.nan_to_num(calls - k) * call_s
    spread_s, spread_t = spread_back(chunk_s, prompt, room)
    prompt_spread = np.where(np.isfinite(prompt) | (spread_s > 0), spread_t, np.nan)
    prompt_spread[0] = np.nan
    spread_s = np.where(np.isfinite(dt), spread_s, np.nan)
    gauge = processing if processing is not None else nan.copy()
    prompting = np.where(spread_s > 0, 1.0, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_call = np.where(np.nan_to_num(calls) > 0, rows_decode / np.where(calls > 0, calls, 1.0), np.nan)
    decoders = np.where(np.isfinite(per_call), per_call, np.clip(gauge - prompting, 0.0, None))
    rows_decode = np.where(np.isfinite(calls), rows_decode, np.nan)
    in_flight = prompt_in_flight(calls, spread_s, gauge, per_call)
    # a call still running at the window's end: a prompting slot is busy beside the decoders and no
    # call returned, so the prompt runs at the window's own chunk rate and decoders get nothing
    chunk_rate = _chunk_rate(prompt, chunk_s)
    prompt_spread = np.where(in_flight, chunk_rate * dt, prompt_spread)
    spread_s = np.where(in_flight, dt, spread_s)
    decoders = np.where(in_flight, np.clip(gauge - 1.0, 0.0, None), decoders)
    both = np.zeros(rows.size, dtype=bool)
    both[1:] = (np.nan_to_num(gauge[1:]) > 0) & (np.nan_to_num(gauge[:-1]) > 0)
    return LlamacppIntervals(calls, slot_calls, k, rows_decode, decoders, prompt_spread, spread_s, both, call_s)


def _chunk_rate(prompt: np.ndarray, chunk_seconds: np.ndarray) -> float:
    """Prompt tokens per chunk second over the window's completed chunk calls (NaN without one)."""
    ok = np.isfinite(prompt) & np.isfinite(chunk_seconds) & (chunk_seconds > 0)
    seconds = float(chunk_seconds[ok].sum())
    return float(prompt[ok].sum()) / seconds if seconds > 0 else math.nan


def prompt_in_flight(calls: np.ndarray, spread_seconds: np.ndarray, gauge: np.ndarray,
                     per_call: np.ndarray) -> np.ndarray:
    """Busy intervals with no returned call, no chunk time and a prompting slot: a chunk call in flight.

    A call that has not returned by the window's end moved no counter. Where the busy slots then
    outnumber the decoders of the last interval that had calls, the extra slot is a prompt in that
    call. Otherwise the call in flight is a decode-only one slower than the interval (a starved
    CPU): its decoders get no token in the interval, which is what they see, and it stays so.
    """
    no_call = np.isfinite(calls) & (calls == 0) & (np.nan_to_num(spread_seconds) <= 0) & (np.nan_to_num(gauge) > 0)
    in_flight = np.zeros(calls.shape, dtype=bool)
    last = math.nan
    for i in range(calls.size):
        if math.isfinite(per_call[i]):
            last = per_call[i]
        elif no_call[i] and math.isfinite(last) and gauge[i] > last + 0.5:
            in_flight[i] = True
    return in_flight


def ledger_increases(iv: LlamacppIntervals, interval_seconds: np.ndarray) -> dict[str, np.ndarray]:
    """The step ledger's four increases per interval (NaN where a slot was idle at an end)."""
    dt = np.asarray(interval_seconds, dtype=float)
    ok = iv.busy_both_ends & np.isfinite(iv.calls) & np.isfinite(iv.chunk_seconds) & np.isfinite(dt)
    chunk = np.clip(iv.chunk_seconds, 0.0, dt)
    return {
        "steps": np.where(ok, iv.calls, np.nan),
        "decode_steps": np.where(ok, iv.calls - iv.chunk_calls, np.nan),
        "step_seconds": np.where(ok, dt, np.nan),
        "decode_step_seconds": np.where(ok, dt - chunk, np.nan),
    }


def census_overrides(endpoint: Endpoint, rows: np.ndarray,
                     interval_seconds: np.ndarray) -> tuple[dict[Signal, np.ndarray], dict[Signal, np.ndarray]] | None:
    """``(increases, gauges)`` the census reads on llama.cpp instead of the profile's plain names.

    Generation tokens become the decode rows per interval, prompt tokens the spread prompt
    work, running the decoders per call, and the four ledger counters come from
    :func:`ledger_increases`. None when the recording has no ``n_decode_total``.
    """
    iv = derive_intervals(endpoint, rows, interval_seconds)
    if iv is None:
        return None
    ledger = ledger_increases(iv, interval_seconds)
    incs = {
        Signal.GENERATION_TOKENS: iv.decode_rows,
        Signal.PROMPT_TOKENS: iv.prompt_tokens,
        Signal.STEPS: ledger["steps"],
        Signal.STEPS_DECODE: ledger["decode_steps"],
        Signal.STEP_SECONDS: ledger["step_seconds"],
        Signal.STEP_SECONDS_DECODE: ledger["decode_step_seconds"],
    }
    return incs, {Signal.RUNNING: iv.decoders}
