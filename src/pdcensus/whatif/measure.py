"""The figures a what-if compares: one window read the census's way, on fixed bucket edges.

A recording (the observed one, or a simulated one) is read through the census's own shape
reader and signals (:func:`pdcensus.census.run.read_shape`), so the twin's figures and the
recording's are measured by the same code. Buckets are the census's (decode by prefill from
the same scrape, per-stream = decode / running, TTFT and ITL quantiles from the histogram
increases of the bucket's intervals), but on edges given by the caller: the observed
recording's, so that "the busy bucket" is the same prefill range before and after a change.

Figures: per-stream decode while prefill is idle and while it runs (the busy buckets pooled),
their ratio, mean decode and prefill throughput, mean running, and TTFT / ITL quantiles over
the whole window where the engine exports the histograms (radiance and vLLM do; llama.cpp and
the InferenceX scrapes do not: those figures are absent, never invented).

Where the engine counts its steps (vLLM 0.32's ``iteration_tokens_total_count``), an interval in
which no step ended while requests ran is inside one long step, and belongs to the interval that
ends it (:func:`pdcensus.series.vllm_steps.step_spans`): its own counters say "no prefill, no
decode", which would bucket a prefill chunk's first second as idle at zero decode. Such a span
is bucketed as one: its intervals take the span's prefill and decode rates
(:func:`span_rates`). On a live vLLM run (3,000-token prompts, about 2 s chunk steps at 1 s
scrapes) the idle per-stream decode read 39 tok/s with those seconds in it; the clients saw 61.

The per-stream means of the busy bucket mix, in a 1 s scrape, the chunk steps with the
decode-only steps around them, so a change in the chunk barely moves them (on the live run the
clients' pace while a long prompt waited doubled at a quarter of the budget; the busy bucket's
mean moved 1 %). Where the engine counts steps and exports the inter-token histogram, the
decoders' **felt pace** is given beside it, as the census reads its ITL depth
(:func:`pdcensus.series.vllm_steps.itl_depth`): tokens per second of the decoders' own waiting in
the step spans that carried prefill (those of prefill running across scrapes where there are
enough), and in the spans without (``felt_busy`` / ``felt_idle``); ``stalled_share``, the share of
the decoders' waiting in inter-token gaps of :data:`STALL_SECONDS` or more (each bucket at its middle,
the top one at 1.5 x its lower edge), what a preempted stream or a chunk step longer than that costs: the intervals' pace, its median
weighted by the waiting, so a few intervals where a burst began or ended a scrape late (decode-only
steps beside it: a twin's arrivals are placed to a scrape, not to the step) do not carry it. On that
run the twin's pace while prefill ran came out at 5.5 tok/s as a pooled ratio against the
recording's 1.1 (edge intervals of 30-90 tokens); as the weighted median, 0.50 against 0.58.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.census.buckets import BucketAssignment, assign_buckets, assign_on_edges, bucket_table
from pdcensus.census.model import BucketRow
from pdcensus.census.measure import MIN_FELT_TOKENS
from pdcensus.census.run import ShapeRead, read_shape
from pdcensus.census.signals import Histogram, ShapeSignals
from pdcensus.errors import DataError
from pdcensus.series.model import Endpoint, Recording
from pdcensus.series.profiles import Signal, detect_profile
from pdcensus.series.vllm_steps import span_mask

NAN = math.nan
# the figures in the order reports show them; the first three carry the calibration bound
FIGURES: tuple[str, ...] = (
    "per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second", "decode_tokens_per_second",
    "busy_vs_idle", "prefill_tokens_per_second", "running_mean", "waiting_mean",
    "ttft_p50_seconds", "ttft_p90_seconds", "ttft_p99_seconds", "itl_p50_seconds", "itl_p99_seconds",
    "busy_ttft_p50_seconds", "busy_ttft_p90_seconds", "busy_itl_p50_seconds", "busy_itl_p99_seconds",
    "felt_busy_tokens_per_second", "felt_idle_tokens_per_second", "stalled_share",
    *(f"{side}_{q}_seconds" for side, q in (("busy", "ttft_p99"), ("idle", "ttft_p50"), ("idle", "ttft_p90"),
                                           ("idle", "ttft_p99"), ("idle", "itl_p50"), ("idle", "itl_p99"))),
)
# the per-side quantiles that only `verify-arm --whatif` reads (pdcensus.verify.forecast): in --json, not the terminal
GATE_FIGURES: frozenset[str] = frozenset(FIGURES[FIGURES.index("stalled_share") + 1:])
STALL_SECONDS = 2.5  # a gap from this inter-token bucket edge up is a stall (vLLM's first edge at or above 2 s)


@dataclass(frozen=True)
class WindowFigures:
    """One window's figures (NaN where the recording cannot say) and its bucket table."""

    values: dict[str, float]
    buckets: tuple[BucketRow, ...]
    idle_threshold_tokens_per_second: float
    edges_tokens_per_second: tuple[float, ...]
    busy_samples: int
    idle_samples: int
    idle_at_threshold: bool = False  # the threshold itself is idle (the census's background ceiling)

    def get(self, name: str) -> float:
        return self.values.get(name, NAN)


def choose_endpoint(recording: Recording, instance: str | None = None) -> Endpoint:
    """The endpoint to read: ``instance``, else the only one with engine metrics."""
    if instance is not None:
        return recording.endpoint(instance)
    source = recording.source or "recording"
    engines = [ep for ep in recording.endpoints if detect_profile(ep.names()) is not None]
    if not engines:
        raise DataError(f"{source}: no engine endpoint in the recording")
    if len(engines) > 1:
        raise DataError(f"{source}: {len(engines)} endpoints; choose one with --instance: "
                        + ", ".join(ep.instance for ep in engines))
    return engines[0]


def read_window(recording: Recording, instance: str | None = None) -> ShapeRead:
    """The census's read of the recording's analysed shape (the latest)."""
    return read_shape(choose_endpoint(recording, instance), recording.families, recording.source or "recording")


def _mean(x: np.ndarray | None) -> float:
    return float(np.nanmean(x)) if x is not None and np.isfinite(x).any() else NAN


def span_rates(span: np.ndarray, busy: np.ndarray, dt: np.ndarray,
               *rates: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each rate with every multi-interval span's intervals at the span's mean (tokens / seconds).

    ``span[i]``: the interval that ends interval i's step (itself unless inside a long step); only
    busy intervals (requests at both ends) are joined."""
    out = []
    groups: dict[int, list[int]] = {}
    for i in np.nonzero(busy)[0]:
        groups.setdefault(int(span[i]), []).append(int(i))
    for rate in rates:
        r = np.array(rate, dtype=np.float64)
        for members in groups.values():
            if len(members) < 2:
                continue
            idx = np.array(members)
            seconds = float(np.nansum(dt[idx]))
            if seconds > 0 and np.isfinite(rate[idx]).all():
                r[idx] = float(np.sum(rate[idx] * dt[idx])) / seconds
        out.append(r)
    return tuple(out)


def _median_pace(tokens: np.ndarray, seconds: np.ndarray) -> float:
    """The intervals' tokens per second of waiting, the median weighted by the waiting (NaN: no waiting)."""
    ok = (seconds > 0) & (tokens > 0)
    if not ok.any():
        return NAN
    pace, w = tokens[ok] / seconds[ok], seconds[ok]
    order = np.argsort(pace)
    cum = np.cumsum(w[order])
    return float(pace[order][np.searchsorted(cum, cum[-1] / 2)])


def stalled_share(itl: Histogram | None) -> float:
    """The share of the window's inter-token waiting in gaps of :data:`STALL_SECONDS` or more (NaN: no histogram)."""
    if itl is None or not itl.upper_bounds.size:
        return NAN
    cumulative = np.nansum(itl.increases, axis=0)
    counts = np.clip(np.diff(np.concatenate([[0.0], cumulative])), 0.0, None)
    bounds = itl.upper_bounds
    lows = np.concatenate([[0.0], bounds[:-1]])
    mids = np.where(np.isfinite(bounds), (lows + bounds) / 2, 1.5 * lows)
    total = float(np.sum(counts * mids))
    return float(np.sum((counts * mids)[lows >= STALL_SECONDS]) / total) if total > 0 else NAN


def felt_paces(s: ShapeSignals) -> tuple[float, float]:
    """Decoders' tokens per second of their own waiting in step spans with prefill, and without (NaN: cannot say).

    Spans of prefill that ran across scrapes where they hold :data:`MIN_FELT_TOKENS` tokens (the spans of
    prefills begun and ended inside one scrape left out of both sides), else every span with prefill;
    intervals that counted a preemption are left out (their gaps are stalls)."""
    cs, chunk = s.counted_steps, s.chunk_intervals
    if cs is None or chunk is None or cs.itl_seconds is None or cs.itl_tokens is None:
        return NAN, NAN
    pre = s.increase(Signal.PREEMPTIONS)
    ok = cs.busy & np.isfinite(cs.itl_seconds) & np.isfinite(cs.itl_tokens)
    if pre is not None:
        ok &= ~(np.nan_to_num(pre) > 0)
    marked = span_mask(cs, chunk)
    sides = [(marked, ~marked)]
    if s.prefill_across is not None and s.prefill_across.any():
        across = span_mask(cs, s.prefill_across)
        sides.insert(0, (across, ~marked))
    secs, toks = np.where(ok, cs.itl_seconds, 0.0), np.where(ok, cs.itl_tokens, 0.0)
    for busy, idle in sides:
        if toks[busy].sum() >= MIN_FELT_TOKENS or busy is marked:
            return _median_pace(toks[busy], secs[busy]), _median_pace(toks[idle], secs[idle])
    return NAN, NAN


def measure(read: ShapeRead, edges: tuple[float, ...] | None = None, *,
            idle_at_threshold: bool = False) -> WindowFigures:
    """Figures of one window; ``edges`` None: the census's own edges from this window's data.

    Given edges (and whether their threshold is idle, as the window they came from said) are
    applied by the census's one rule, :func:`pdcensus.census.buckets.assign_on_edges`."""
    s = read.signals
    if s.decode_tokens_per_second is None or s.prefill_tokens_per_second is None:
        raise DataError("no decode/prefill signal in the analysed shape: nothing to calibrate on")
    decode, prefill = s.decode_tokens_per_second, s.prefill_tokens_per_second
    # the step spans, timed or not (a prompt in nearly every scrape leaves no decode-only step to time, but a
    # second inside a long step is still that step's)
    spans = s.counted_steps if s.counted_steps is not None else s.untimed_steps.steps if s.untimed_steps else None
    if spans is not None:
        dt = np.nan_to_num(s.interval_seconds, nan=0.0)
        decode, prefill = span_rates(spans.span, spans.busy, dt, decode, prefill)
    running = s.gauge(Signal.RUNNING)
    a = assign_buckets(prefill) if edges is None else assign_on_edges(prefill, edges,
                                                                      idle_at_threshold=idle_at_threshold)
    ttft, itl = s.histograms.get(Signal.TTFT), s.histograms.get(Signal.ITL)
    common = {"prefill_name": "prefill", "basis": "", "scrape_interval_seconds": read.scrape_interval_seconds,
              "ttft": ttft, "itl": itl}
    table = bucket_table(a, decode, running, **common)  # type: ignore[arg-type]
    pooled = BucketAssignment(np.where(a.index > 0, 1, a.index), a.idle_threshold, a.edges[:1] + (math.inf,),
                              ("idle", "busy"), a.idle_rule)
    two = bucket_table(pooled, decode, running, **common)  # type: ignore[arg-type]
    whole = BucketAssignment(np.where(a.index >= 0, 0, -1), a.idle_threshold, (math.inf,), ("all",), "")
    (all_row,) = bucket_table(whole, decode, running, **common).rows  # type: ignore[arg-type]
    idle_row, busy_row = two.rows
    values = {
        "per_stream_idle_tokens_per_second": idle_row.per_stream_tokens_per_second,
        "per_stream_busy_tokens_per_second": busy_row.per_stream_tokens_per_second,
        "busy_vs_idle": busy_row.per_stream_vs_idle,
        "decode_tokens_per_second": float(np.nanmean(decode)) if np.isfinite(decode).any() else NAN,
        "prefill_tokens_per_second": float(np.nanmean(prefill)) if np.isfinite(prefill).any() else NAN,
        "running_mean": _mean(running),
        "waiting_mean": _mean(s.gauge(Signal.WAITING)),
        "ttft_p50_seconds": all_row.ttft_p50_seconds, "ttft_p90_seconds": all_row.ttft_p90_seconds,
        "ttft_p99_seconds": all_row.ttft_p99_seconds,
        "itl_p50_seconds": all_row.itl_p50_seconds, "itl_p99_seconds": all_row.itl_p99_seconds,
        "busy_ttft_p50_seconds": busy_row.ttft_p50_seconds, "busy_ttft_p90_seconds": busy_row.ttft_p90_seconds,
        "busy_itl_p50_seconds": busy_row.itl_p50_seconds, "busy_itl_p99_seconds": busy_row.itl_p99_seconds,
        "busy_ttft_p99_seconds": busy_row.ttft_p99_seconds,
        "idle_ttft_p50_seconds": idle_row.ttft_p50_seconds, "idle_ttft_p90_seconds": idle_row.ttft_p90_seconds,
        "idle_ttft_p99_seconds": idle_row.ttft_p99_seconds,
        "idle_itl_p50_seconds": idle_row.itl_p50_seconds, "idle_itl_p99_seconds": idle_row.itl_p99_seconds,
    }
    values["felt_busy_tokens_per_second"], values["felt_idle_tokens_per_second"] = felt_paces(s)
    values["stalled_share"] = stalled_share(itl)
    values = {k: (float(v) if v is not None and math.isfinite(v) else NAN) for k, v in values.items()}
    return WindowFigures(values, table.rows, a.idle_threshold, tuple(a.edges), busy_row.samples, idle_row.samples,
                         a.idle_at_threshold)
