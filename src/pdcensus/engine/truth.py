"""The truth of a live run, from the client's own timestamps: what decoders got while prompts processed.

A prompt *processes* from its request's start to its first token (its TTFT; the prompt session
sends one at a time, ``max_tokens=1``), or to the window's end if the load was cut before its first
token. Those spans, merged, are the prompt windows. For the
decoding streams:

- per-stream decode rate in and out of the windows: tokens that arrived in the span, over the
  stream-seconds that streams were decoding in it (a stream decodes from its request's first
  token to its last);
- the ratio of the two (the collapse a user sees; 1 = none);
- inter-token gaps (between consecutive tokens of one request), p50 and p99, split by whether
  the gap ends inside a window.

A prompt that waits for admission (a full batch, a KV cache too small) is pending while the
decoders run at full pace, which dilutes the collapse of its window. So beside it, the prompt's
*acting* window (:func:`acting_truth`) starts when its prefill began as the decoders felt it:
walking back from its first token, the earliest moment from which at least half of the decoding
streams were inside a gap of over :data:`ACTING_GAP` clean gaps throughout (a chunk step delays
every decoder at once; a preempted stream's stall delays one). Slowed from when it was sent: from
then; never slowed: the step that gave it its first token; cut before its first token and never
slowed: it never acted in the window.

Every number is measured on the client, never read from the server's metrics: it is what the
census is checked against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pdcensus.engine.streams import RequestRecord

ACTING_GAP = 3.0  # a decoder's gap over this many clean gaps: a step that carried prefill, or a stall


@dataclass(frozen=True)
class SpanTruth:
    """Decoders' experience over one kind of span (in or out of the prompt windows)."""

    seconds: float
    stream_seconds: float
    tokens: int
    per_stream_tokens_per_second: float
    gaps: int
    gap_p50_seconds: float
    gap_p99_seconds: float


@dataclass(frozen=True)
class Truth:
    """The client truth of one run (JSON: ``truth.json``)."""

    start: float
    end: float
    windows: tuple[tuple[float, float], ...]
    prompts: int
    prompt_ttft_seconds: tuple[float, ...]
    prompt_tokens_per_second: float
    during: SpanTruth
    outside: SpanTruth
    ratio: float  # per-stream rate during / outside
    decode_time_lost_share: float  # decoders' time lost in the windows: in-window stream-seconds x (1 - ratio) / all
    errors: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def merge(spans: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of closed spans, sorted."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def overlap(a: float, b: float, windows: Sequence[tuple[float, float]]) -> float:
    """Seconds of ``[a, b]`` inside the windows."""
    return float(sum(max(0.0, min(b, w1) - max(a, w0)) for w0, w1 in windows))


def inside(t: np.ndarray, windows: Sequence[tuple[float, float]]) -> np.ndarray:
    mask = np.zeros(t.shape, dtype=bool)
    for w0, w1 in windows:
        mask |= (t >= w0) & (t <= w1)
    return mask


def _span(seconds: float, stream_seconds: float, tokens: int, gaps: np.ndarray) -> SpanTruth:
    rate = tokens / stream_seconds if stream_seconds > 0 else float("nan")
    p50, p99 = (float(np.quantile(gaps, q)) if gaps.size else float("nan") for q in (0.5, 0.99))
    return SpanTruth(seconds, stream_seconds, tokens, rate, int(gaps.size), p50, p99)


def measure_truth(records: Sequence[RequestRecord], start: float, end: float) -> Truth:
    """The truth over ``[start, end]`` (the census window), each prompt's window from when it was sent."""
    return _truth_over(records, start, end, {id(r): r.started for r in records})


def acting_truth(records: Sequence[RequestRecord], start: float, end: float) -> Truth:
    """The truth over ``[start, end]``, each prompt's window from when its prefill began as the decoders felt it
    (the module docstring); the clean gap is the median gap outside the windows from when prompts were sent."""
    pending = measure_truth(records, start, end)
    clean = pending.outside.gap_p50_seconds
    if not (math.isfinite(clean) and clean > 0):
        return pending
    decoders = [np.asarray(r.token_times) for r in records if r.kind == "decode" and len(r.token_times) >= 2]
    began = {}
    for r in records:
        if r.kind != "prompt" or r.error:
            continue
        done = r.first_token if r.token_times else end
        # the decoders' tokens inside the pending window, latest first (those of the step that gave the prompt its
        # first token, a clean gap or less before it, left out): walk back while most decoders are inside a long
        # gap there (the steps that carried this prompt's chunks), and stop at the first moment they were not
        # (it waited for admission before that); slowed throughout: from when it was sent. Never slowed: the step
        # that gave it its first token (from the decoders' last token before it), or, cut before its first token,
        # it never acted in the window
        moments = sorted({float(x) for t in decoders for x in t if r.started <= x < done - clean}, reverse=True)
        slowed = [_most_in_long_gaps(decoders, c, ACTING_GAP * clean) for c in moments]
        acted = next((i for i, slow in enumerate(slowed) if not slow), len(moments))
        if acted == len(moments):
            began[id(r)] = r.started
        elif acted > 0:
            began[id(r)] = moments[acted - 1]
        else:
            began[id(r)] = moments[0] if r.token_times else done
    return _truth_over(records, start, end, began)


def _most_in_long_gaps(decoders: list[np.ndarray], moment: float, long: float) -> bool:
    """At least half of the streams decoding at ``moment`` are inside a gap longer than ``long`` seconds (the gap
    that begins at or spans ``moment``)."""
    active = stalled = 0
    for t in decoders:
        if not (t[0] <= moment < t[-1]):
            continue
        active += 1
        i = int(np.searchsorted(t, moment, side="right"))  # t[i - 1] <= moment < t[i]
        stalled += bool(t[i] - t[i - 1] > long)
    return active > 0 and 2 * stalled >= active


def _truth_over(records: Sequence[RequestRecord], start: float, end: float, began: dict[int, float]) -> Truth:
    """The truth with each prompt's window from ``began[id(prompt)]`` to its first token."""
    prompts = [r for r in records if r.kind == "prompt" and r.token_times and not r.error]
    # a prompt still without its first token when the load was cut processed until the end
    unanswered = [r for r in records if r.kind == "prompt" and not r.token_times and not r.error and r.started < end]
    windows = merge([(began.get(id(r), r.started), r.first_token) for r in prompts] +
                    [(began.get(id(r), r.started), end) for r in unanswered])
    windows = [(max(a, start), min(b, end)) for a, b in windows if b > start and a < end]
    window_seconds = overlap(start, end, windows)
    in_tokens = out_tokens = 0
    in_stream_s = out_stream_s = 0.0
    gaps_in: list[np.ndarray] = []
    gaps_out: list[np.ndarray] = []
    for r in records:
        if r.kind != "decode" or len(r.token_times) < 2:
            continue
        t = np.asarray(r.token_times)
        a, b = max(float(t[0]), start), min(float(t[-1]), end)
        if b > a:
            w = overlap(a, b, windows)
            in_stream_s += w
            out_stream_s += (b - a) - w
        later = t[1:][(t[1:] > start) & (t[1:] <= end)]  # tokens after the first: each ends a gap
        mask = inside(later, windows)
        in_tokens += int(mask.sum())
        out_tokens += int((~mask).sum())
        gap = np.diff(t)[(t[1:] > start) & (t[1:] <= end)]
        gaps_in.append(gap[mask])
        gaps_out.append(gap[~mask])
    during = _span(window_seconds, in_stream_s, in_tokens, np.concatenate(gaps_in) if gaps_in else np.zeros(0))
    outside = _span(end - start - window_seconds, out_stream_s, out_tokens,
                    np.concatenate(gaps_out) if gaps_out else np.zeros(0))
    ratio = (during.per_stream_tokens_per_second / outside.per_stream_tokens_per_second
             if outside.per_stream_tokens_per_second > 0 else float("nan"))
    total = during.stream_seconds + outside.stream_seconds
    lost = during.stream_seconds * (1 - ratio) / total if total > 0 and math.isfinite(ratio) else float("nan")
    ttft = tuple(r.first_token - r.started for r in prompts if start <= r.started <= end)
    sized = [r for r in prompts if r.prompt_tokens > 0 and start <= r.started <= end]
    rate = (sum(r.prompt_tokens for r in sized) / sum(r.first_token - r.started for r in sized)
            if sized else float("nan"))
    return Truth(start, end, tuple(windows), len(ttft), ttft, rate, during, outside, ratio, lost,
                 sum(1 for r in records if r.error))
