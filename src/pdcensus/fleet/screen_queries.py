"""The fleet screen as PromQL: the census's per-endpoint contrasts, evaluated by the store for every endpoint at once.

A census of one endpoint pulls its raw samples and buckets decode by prefill scrape by scrape.
A fleet of a thousand endpoints cannot be pulled, so the screen asks the store for *sums*
instead: each query is an instant query whose subquery ``[chunk:step]`` walks the chunk at the
query step (the scrape interval) and returns one number per endpoint. Because every number is a
sum (``sum_over_time``, ``count_over_time``, a counter's ``increase``), a long window is cut into
chunks that each engine accepts and the chunks are added up locally; ratios are taken only at
the end (:mod:`pdcensus.fleet.screen`).

The numbers, per endpoint (``sum by (job, instance)`` everywhere, as ``pdcensus promql`` does):

* lag 0: running and decode summed over scrapes where prefill is idle / busy (per-stream decode
  with and without prefill = decode sum / running sum, the runbook's bucket pair);
* tail: the same over scrapes idle now but with prefill 2-14 min before (the eviction tail's
  window), against scrapes idle for the whole 14 min (clean; only where the endpoint was already
  scraped 14 min before, so a series that starts inside the window is not called clean early);
* lags: idle now and busy exactly ``L`` before (``offset``), one pair per lag;
* the step ledger's four counter increases where the build exports them (phase ratio);
* preemptions: the counter's increase, the scrapes with an increase (bursts), and the preempted
  depth's sum where the engine exports it (stalled sequence-time, Little's law);
* counter resets (a restart or a build change: a second shape, which only the census splits);
* the waiting queue's mean in the window's first and last quarter (queue growth).

The decode, prefill and ledger expressions are the ones :func:`pdcensus.queries.promql_export.
census_queries` writes for ``pdcensus promql --rules`` (one place for each); with
``recorded=True`` the screen reads the recorded series by their rule names instead.
Idle is the census's rule (:mod:`pdcensus.census.buckets`) as far as PromQL can say it, per
endpoint over the whole window: prefill below ``max(1, 0.05 x median non-zero prefill)``; where
fewer than 10 % of scrapes are below that (background prompts keep the gauge up), prefill at or
below ``BACKGROUND_FACTOR`` x its 25th percentile (the census takes the background's log-spread,
which PromQL cannot; its ceiling is at least 10^0.3 = 2x the 25th percentile and is about 4x on the
simulator's chat loads). The threshold is one subexpression with ``@ <window end>``, so each
query computes it once for the whole window, whatever chunk it sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdcensus.queries.promql_export import BY, census_queries, offset_clause, prometheus_duration
from pdcensus.series.profiles import Profile, Signal

TAIL_FROM_SECONDS = 120.0  # the runbook's lagged tail: 2-14 min after the prefill
TAIL_TO_SECONDS = 840.0
LAGS_SECONDS = (120.0, 300.0, 600.0)
RATE_WINDOW = "1m"  # at the default 15 s step; in general RATE_SCRAPES steps (:func:`rate_window`)
RATE_SCRAPES = 4
SMOOTH_SECONDS = 4.0  # a counter's per-step rate covers at least this long (see :func:`counter_rate`)
IDLE_FLOOR = 1.0  # the census's IDLE_FLOOR_TOKENS_PER_SECOND
IDLE_FRACTION = 0.05  # the census's IDLE_FRACTION
MIN_IDLE_SHARE = 0.10  # the census's MIN_IDLE_SHARE
BACKGROUND_FACTOR = 4.0
QUANTILE_POINTS = 2000  # a window quantile reads at most about this many scrapes


@dataclass(frozen=True)
class ScreenQuery:
    """One number per endpoint: its name, and the PromQL for one chunk ending at the query time."""

    name: str
    expr: str
    additive: bool = True  # summed over chunks (False: evaluated once, at a time of its own)


def _sel(name: str, inner: str, suffix: str = "") -> str:
    return f"{name}{suffix}{{{inner}}}" if inner else f"{name}{suffix}"


def rate_window(step_seconds: float) -> str:
    """The counters' rate window: ``RATE_SCRAPES`` query steps (1m at 15 s scrapes, 4s at 1 s scrapes).

    The census buckets decode by prefill scrape by scrape; a fixed 1m window over 1 s scrapes would
    average 60 of them and leave no busy/idle contrast to see (real vLLM runs, docs/fleet.md).
    """
    return prometheus_duration(RATE_SCRAPES * step_seconds)


def counter_rate(name: str, inner: str, *, step_seconds: float, offset_seconds: float = 0.0) -> str:
    """A counter's rate at each query step: its increase over the last ``max(step, SMOOTH_SECONDS)``, per second.

    The census reads a counter scrape by scrape: the increase over one scrape interval. Here that
    is the difference of the counter's last sample now and one span before, per endpoint, so that

    * at 15 s scrapes and the default 15 s step it is exactly the census's per-scrape increase;
      a 1-minute ``rate()``, as before, spread each prompt over four scrapes (on simulated
      vLLM-named runs the screen read ~0 where the census found 0.21 lost to step-time sharing);
    * on faster scrapes it holds every scrape of the step (``irate`` alone would look at the last scrape
      only: vLLM moves its prompt counter when a prefill ends, so one scrape sees the prefill only in
      the second it ended), and at least ``SMOOTH_SECONDS`` of them (at ``--step 1s`` on 1 s
      scrapes, one scrape's increase ranked the real runs at Spearman 0.18-0.30 against the census;
      4 scrapes' at 0.86);
    * Prometheus and VictoriaMetrics compute it alike: each sample is the last one in
      ``rate_window`` (both engines' ``last_over_time``), where ``rate()`` differs between them
      (VictoriaMetrics takes the sample before the window and does not extrapolate) and a bare
      selector does too (Prometheus carries a sample through a gap for its 5-minute lookback).
      A counter reset inside the span reads 0, not a negative rate.
    """
    span = max(step_seconds, SMOOTH_SECONDS)
    window = rate_window(step_seconds)
    sel = _sel(name, inner)
    last_now = f"last_over_time({sel}[{window}]{offset_clause(offset_seconds)})"
    last_then = f"last_over_time({sel}[{window}]{offset_clause(offset_seconds + span)})"
    return f"({BY} (clamp_min({last_now} - {last_then}, 0)) / {span:g})"


def signal_exprs(profile: Profile, inner: str, *, recorded: bool = False,
                 offset_seconds: float = 0.0, step_seconds: float = 15.0) -> dict[str, str]:
    """decode, prefill, running, waiting (and depth) per endpoint as instant-vector PromQL.

    With ``offset_seconds``, each as it was that long ago: every selector carries the offset, so
    a lag costs the store what the signal itself costs (a one-point subquery per step, the form
    this replaced, cost Prometheus and VictoriaMetrics about twice as much). A counter's rate is
    :func:`counter_rate` (``step_seconds``: the query step, the scrape interval by default).
    """
    window = RATE_WINDOW if recorded else rate_window(step_seconds)
    queries = {q.key: q for q in census_queries(profile, selector=inner, window=window,
                                                 offset_seconds=offset_seconds)}
    off = offset_clause(offset_seconds)
    out: dict[str, str] = {}
    for key, short, gauge, counter in (
            ("decode_tokens_per_second", "decode", Signal.DECODE_TPS, Signal.GENERATION_TOKENS),
            ("prefill_tokens_per_second", "prefill", Signal.PREFILL_TPS, Signal.PROMPT_TOKENS)):
        if key in queries:
            q = queries[key]
            counter_name = profile.name_of(counter)
            if recorded:
                out[short] = f"({_sel(q.record_name(), inner)}{off})"
            elif not profile.has(gauge) and counter_name is not None:  # census_queries' rate of the counter
                out[short] = counter_rate(counter_name, inner, step_seconds=step_seconds, offset_seconds=offset_seconds)
            else:
                out[short] = f"({q.expr})"
    for signal, short in ((Signal.RUNNING, "running"), (Signal.WAITING, "waiting"),
                          (Signal.PREEMPTED_DEPTH, "depth")):
        name = profile.name_of(signal)
        if name is not None:
            # a gauge only where it was scraped in the rate window, as the rates: Prometheus would carry
            # the last sample through a gap for its 5 min lookback, VictoriaMetrics would not
            out[short] = f"{BY} (last_over_time({_sel(name, inner)}[{window}]{off}))"
    return out


def _recent_prefill(prefill: str, step_seconds: float) -> tuple[str, str]:
    """(max prefill 2-14 min ago, max prefill in the last 14 min), as nested subqueries."""
    step = prometheus_duration(step_seconds)
    span = prometheus_duration(TAIL_TO_SECONDS - TAIL_FROM_SECONDS)
    tail = f"max_over_time(({prefill})[{span}:{step}] offset {prometheus_duration(TAIL_FROM_SECONDS)})"
    clean = f"max_over_time(({prefill})[{prometheus_duration(TAIL_TO_SECONDS)}:{step}])"
    return tail, clean


def _idle_now_busy_then(threshold: str, now: str, then: str) -> str:
    """Idle now (``now <= threshold``) and busy then (``then > threshold``), with the threshold said once.

    ``(threshold >= now) < then`` keeps the threshold where both hold: the store evaluates the
    threshold's three window quantiles once per occurrence, so writing it once instead of twice
    takes a third to a half off these queries on both engines (measured in BENCHMARKS.md).
    """
    return f"(({threshold} >= on (job, instance) {now}) < on (job, instance) {then})"


def quantile_step(window_seconds: float, step_seconds: float) -> float:
    """The step of a window quantile: every scrape, or every n-th one so that at most QUANTILE_POINTS are read.

    A window quantile from a systematic 1-in-n sample of ~2,000 scrapes has a sampling error far
    below the factor-of-two margins of the rules it feeds (the idle threshold, the fast step);
    reading every scrape of a day (5,760) made the threshold most of each query's cost.
    """
    return step_seconds * max(1, math.ceil(window_seconds / step_seconds / QUANTILE_POINTS))


def idle_threshold(prefill: str, *, window_seconds: float, window_end: float, step_seconds: float) -> str:
    """Per endpoint, the prefill rate at or below which a scrape is idle (see the module docstring)."""
    every = quantile_step(window_seconds, step_seconds)
    rng = f"[{prometheus_duration(window_seconds)}:{prometheus_duration(every)}] @ {window_end:.3f}"
    median = f"quantile_over_time(0.5, ({prefill} > {IDLE_FLOOR:g}){rng})"
    fraction = f"clamp_min({IDLE_FRACTION:g} * {median}, {IDLE_FLOOR:g})"
    low = f"quantile_over_time({MIN_IDLE_SHARE:g}, ({prefill}){rng})"
    background = f"clamp_min({BACKGROUND_FACTOR:g} * quantile_over_time(0.25, ({prefill}){rng}), {IDLE_FLOOR:g})"
    # ``fraction > low`` keeps the fraction where under it lie at least MIN_IDLE_SHARE of the
    # scrapes: the fraction said once (the store evaluates each occurrence's window quantile anew)
    return f"(({fraction}) > on (job, instance) ({low})) or on (job, instance) ({background})"


def decode_step_reference(profile: Profile, inner: str, *, window_seconds: float, window_end: float,
                          step_seconds: float, quantile: float = 0.1) -> str:
    """A quantile over the window of the per-minute mean decode-only step (the 10th: a fast, unimpaired step)."""
    steps, seconds = profile.name_of(Signal.STEPS_DECODE), profile.name_of(Signal.STEP_SECONDS_DECODE)
    assert steps is not None and seconds is not None
    per_minute = (f"{BY} (increase({_sel(seconds, inner)}[{RATE_WINDOW}])) / "
                  f"({BY} (increase({_sel(steps, inner)}[{RATE_WINDOW}])) > 0)")
    every = quantile_step(window_seconds, step_seconds)
    rng = f"[{prometheus_duration(window_seconds)}:{prometheus_duration(every)}] @ {window_end:.3f}"
    return f"quantile_over_time({quantile:g}, ({per_minute}){rng})"


def screen_queries(profile: Profile, inner: str, *, chunk_seconds: float, step_seconds: float,
                   window_seconds: float, window_end: float, recorded: bool = False,
                   stride_seconds: float | None = None) -> list[ScreenQuery]:
    """The additive screen numbers of one chunk for every endpoint of ``profile`` under ``inner``.

    ``step_seconds`` is the scrape interval (inner windows: the tail, the lags, the threshold);
    ``stride_seconds`` (default: the step) how far apart the summed points are. A stride of n
    steps sums every n-th scrape: each point is still one scrape's own decode and prefill, so the
    ratios are the same in expectation, with more variance, at 1/n of the store's work.
    """
    s = signal_exprs(profile, inner, recorded=recorded, step_seconds=step_seconds)
    if not {"decode", "prefill", "running"} <= s.keys():
        return []
    threshold = "(" + idle_threshold(s["prefill"], window_seconds=window_seconds,
                                     window_end=window_end, step_seconds=step_seconds) + ")"
    thr = f"on (job, instance) {threshold}"
    stride = stride_seconds or step_seconds
    rng = f"[{prometheus_duration(chunk_seconds - 0.001)}:{prometheus_duration(stride)}]"
    on = "and on (job, instance)"
    decode, prefill, running = s["decode"], s["prefill"], s["running"]
    idle, busy = f"({prefill} <= {thr})", f"({prefill} > {thr})"
    tail_max, clean_max = _recent_prefill(prefill, step_seconds)
    # clean needs the whole 14 min looked at: the endpoint was scraped then (not a window's first minutes)
    running_name = profile.name_of(Signal.RUNNING)
    assert running_name is not None  # "running" is in ``s``
    scraped_before = (f"(count by (job, instance) ({_sel(running_name, inner)} offset "
                      f"{prometheus_duration(TAIL_TO_SECONDS)}))")
    conditions = {
        "all": "",
        "idle": f" {on} {idle}",
        "busy": f" {on} {busy}",
        "tail": f" {on} {_idle_now_busy_then(threshold, prefill, tail_max)}",
        "clean": f" {on} ({clean_max} <= {thr}) {on} {scraped_before}",
    }
    for lag in LAGS_SECONDS:
        before = signal_exprs(profile, inner, recorded=recorded, offset_seconds=lag,
                              step_seconds=step_seconds)["prefill"]
        conditions[f"lag{lag:g}"] = f" {on} {_idle_now_busy_then(threshold, prefill, before)}"
    out: list[ScreenQuery] = [ScreenQuery("scrapes", f"count_over_time(({running}){rng})")]
    for cond, where in conditions.items():
        out.append(ScreenQuery(f"running_{cond}", f"sum_over_time(({running}{where}){rng})"))
        if cond != "all":
            out.append(ScreenQuery(f"decode_{cond}", f"sum_over_time(({decode} {on} ({running} > 0){where}){rng})"))
    if "depth" in s:
        out.append(ScreenQuery("preempted_depth", f"sum_over_time(({s['depth']}){rng})"))
    window = prometheus_duration(chunk_seconds)
    for signal, key in ((Signal.STEPS, "steps"), (Signal.STEPS_DECODE, "steps_decode"),
                        (Signal.STEP_SECONDS, "step_seconds"), (Signal.STEP_SECONDS_DECODE, "step_seconds_decode"),
                        (Signal.STEPS_HELD, "steps_held"), (Signal.PREEMPTIONS, "preemptions")):
        name = profile.name_of(signal)
        if name is not None:
            out.append(ScreenQuery(key, f"{BY} (increase({_sel(name, inner)}[{window}]))"))
    if profile.has_ledger:
        out.append(ScreenQuery("decode_step_q10", decode_step_reference(profile, inner, window_seconds=window_seconds,
                                                                       window_end=window_end,
                                                                       step_seconds=step_seconds), additive=False))
        out += ledger_loss_queries(profile, inner, running, rng, window_seconds=window_seconds, window_end=window_end,
                                   step_seconds=step_seconds)
    preempt = profile.name_of(Signal.PREEMPTIONS)
    if preempt is not None:
        two = prometheus_duration(2 * step_seconds)
        out.append(ScreenQuery("preemption_scrapes",
                               f"sum_over_time(({BY} (increase({_sel(preempt, inner)}[{two}])) > bool 0){rng})"))
    shape = profile.name_of(Signal.STEPS) or profile.name_of(Signal.GENERATION_TOKENS)
    if shape is not None:
        out.append(ScreenQuery("resets", f"{BY} (resets({_sel(shape, inner)}[{window}]))"))
    return out


def ledger_loss_queries(profile: Profile, inner: str, running: str, rng: str, *, window_seconds: float,
                        window_end: float, step_seconds: float) -> list[ScreenQuery]:
    """The census's two ledger losses as running-weighted sums (:mod:`pdcensus.census.ledger`).

    Per scrape, with 1-minute rates of the step counters and ``running`` as the weight, as the
    census weights each interval by its running sequences:

    * ``ledger_sharing``: chunk-step time beyond what the same steps take decode-only,
      ``running x max(0, chunk seconds/s - chunk steps/s x decode-only step)`` (the decode-only
      step of a minute without one: the window's median, as the census falls back to its reference);
    * ``residency_step_seconds`` and ``residency_steps``: ``running x decode-only step x steps/s``
      and ``running x steps/s``, so that the residency loss ``sum running x (step - d0) x steps/s``
      is their difference once the reference ``d0`` is chosen (:class:`pdcensus.fleet.screen_model.ScreenRow`);
    * ``decode_step_q50``: the window's median per-minute decode-only step (with ``decode_step_q10``
      the two quantiles that choose ``d0``).
    """
    names = {s: profile.name_of(s) for s in (Signal.STEPS, Signal.STEPS_DECODE, Signal.STEP_SECONDS,
                                             Signal.STEP_SECONDS_DECODE)}
    rate = {s: f"{BY} (rate({_sel(n, inner)}[{RATE_WINDOW}]))" for s, n in names.items() if n is not None}
    median = decode_step_reference(profile, inner, window_seconds=window_seconds, window_end=window_end,
                                   step_seconds=step_seconds, quantile=0.5)
    decode_step = f"({rate[Signal.STEP_SECONDS_DECODE]} / ({rate[Signal.STEPS_DECODE]} > 0))"
    step = f"({decode_step} or on (job, instance) ({median}))"
    chunk_seconds = f"({rate[Signal.STEP_SECONDS]} - on (job, instance) {rate[Signal.STEP_SECONDS_DECODE]})"
    chunk_steps = f"({rate[Signal.STEPS]} - on (job, instance) {rate[Signal.STEPS_DECODE]})"
    sharing = f"clamp_min({chunk_seconds} - on (job, instance) ({chunk_steps} * on (job, instance) {step}), 0)"
    on = "* on (job, instance)"
    return [
        ScreenQuery("ledger_sharing", f"sum_over_time(({running} {on} {sharing}){rng})"),
        ScreenQuery("residency_step_seconds", f"sum_over_time(({running} {on} {decode_step} {on} "
                                              f"{rate[Signal.STEPS]}){rng})"),
        ScreenQuery("residency_steps", f"sum_over_time(({running} {on} ({rate[Signal.STEPS]} and on (job, instance) "
                                       f"({rate[Signal.STEPS_DECODE]} > 0))){rng})"),
        ScreenQuery("decode_step_q50", median, additive=False),
    ]


def queue_query(profile: Profile, inner: str, *, span_seconds: float, step_seconds: float) -> str | None:
    """Mean waiting queue over the ``span`` before the query time (asked at a quarter and at the end)."""
    waiting = signal_exprs(profile, inner, step_seconds=step_seconds).get("waiting")
    if waiting is None:
        return None
    rng = f"[{prometheus_duration(span_seconds - 0.001)}:{prometheus_duration(step_seconds)}]"
    return f"avg_over_time(({waiting}){rng})"


def timeline_queries(profile: Profile, inner: str, *, recorded: bool = False,
                     step_seconds: float = 15.0) -> dict[str, str]:
    """Per-stream decode and prefill for a range query (the fleet page's small timeline)."""
    s = signal_exprs(profile, inner, recorded=recorded, step_seconds=step_seconds)
    if not {"decode", "prefill", "running"} <= s.keys():
        return {}
    return {"per_stream": f"{s['decode']} / ({s['running']} > 0)", "prefill": s["prefill"]}
