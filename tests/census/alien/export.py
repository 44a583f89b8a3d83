"""Scrape an alien engine trace into a Recording, under one of four metric sets.

Metric sets (METRICS.md): ``radiance-1.8`` (tps gauges, step ledger, vllm: latency),
``radiance-1.0.13`` (no decode/held/cut counters; ``time_per_output_token`` instead of
inter-token latency), ``vllm-v1`` and ``vllm-v0`` (counters only: prompt/generation tokens,
running, waiting, preemptions, TTFT and ITL histograms, a KV-usage gauge, sometimes
``iteration_tokens_total``), and ``upgrade`` (1.0.13 until the restart, 1.8 after).

Scrape realism: a scrape every ``interval_seconds`` (10-30 s) with uniform jitter, missed
scrapes (``up`` = 0 and no other sample), a restart (counters reset, ``up`` = 0 while the
process is down) and, optionally, ``process_start_time_seconds``. Counters carry what the
process counted since it started (the warm-up before the window included), step counts as
whole steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey

from .engine import ITERATION_BOUNDS, ITL_BOUNDS, TTFT_BOUNDS, Trace

METRIC_SETS = ("radiance-1.8", "radiance-1.0.13", "vllm-v1", "vllm-v0", "upgrade")
WINDOW_START = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@dataclass(frozen=True)
class ScrapePlan:
    interval_seconds: float
    jitter_fraction: float  # scrape offsets uniform in +- this share of the interval
    miss_probability: float
    process_start_exported: bool
    iteration_histogram: bool  # vLLM: export iteration_tokens_total
    job: str = "llm"
    instance: str = "10.0.0.1:8000"
    model_name: str = "alien-model"


def scrape_times(plan: ScrapePlan, duration_seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Scrape instants relative to the window start (strictly increasing)."""
    k = np.arange(int(duration_seconds // plan.interval_seconds))
    jitter = rng.uniform(-1, 1, k.size) * plan.jitter_fraction * plan.interval_seconds
    t = np.clip(k * plan.interval_seconds + plan.interval_seconds / 2 + jitter, 0, duration_seconds - 1e-3)
    return np.maximum.accumulate(t) + np.arange(k.size) * 1e-3


def _cumulative(inc: np.ndarray, reset_tick: int | None) -> np.ndarray:
    """Cumulative sum along ticks, restarting from zero at ``reset_tick`` (the restart)."""
    cum = np.cumsum(inc, axis=0)
    if reset_tick is not None and reset_tick > 0:
        cum[reset_tick:] -= cum[reset_tick - 1]
    return cum


def _le(bound: float) -> str:
    return repr(float(bound))


def export_recording(tr: Trace, plan: ScrapePlan, metric_set: str, duration_seconds: float,
                     restart: tuple[float, float] | None, rng: np.random.Generator) -> Recording:
    """The recording a Prometheus scraping this engine would have stored."""
    t = scrape_times(plan, duration_seconds, rng)
    ticks = np.array([tr.tick_of(x) for x in t])
    alive = tr.up[ticks]
    good = alive & (rng.uniform(size=t.size) >= plan.miss_probability)
    reset_tick = tr.tick_of(restart[0] + restart[1]) if restart else None
    after = t >= (restart[0] + restart[1]) if restart else np.ones(t.size, bool)
    if metric_set == "upgrade":
        new_build = after if restart else np.ones(t.size, bool)
    else:
        new_build = np.full(t.size, metric_set == "radiance-1.8")
    radiance = metric_set.startswith("radiance") or metric_set == "upgrade"
    base = {"job": plan.job, "instance": plan.instance}
    model = {**base, "model_name": plan.model_name}
    times = WINDOW_START + t
    b = RecordingBuilder(source=f"alien-{metric_set}")

    def emit(name: str, values: np.ndarray, labels: dict[str, str], rows: np.ndarray, typ: MetricType,
             family: str | None = None) -> None:
        b.add_family(Family(family or name, typ))
        if rows.any():
            b.add_many(SeriesKey(name, tuple(sorted(labels.items()))), times[rows], values[rows])

    emit("up", good.astype(float), base, np.ones(t.size, bool), MetricType.GAUGE)
    cum = lambda a: _cumulative(a, reset_tick)[ticks]  # noqa: E731
    counters = {
        "vllm:prompt_tokens_total": np.floor(cum(tr.prompt_tokens)),
        "vllm:generation_tokens_total": np.floor(cum(tr.generation_tokens)),
        "vllm:num_preemptions_total": cum(tr.preemptions),
    }
    ledger = {
        "radiance:engine_steps_total": np.floor(cum(tr.steps)),
        "radiance:engine_step_seconds_total": cum(tr.step_seconds),
    }
    ledger_18 = {
        "radiance:engine_steps_decode_total": np.floor(cum(tr.decode_steps)),
        "radiance:engine_step_seconds_decode_total": cum(tr.decode_step_seconds),
        "radiance:engine_steps_held_total": np.floor(cum(tr.held_steps)),
        "radiance:prefix_hit_cut_tokens_total": np.zeros(t.size),
    }
    for name, vals in counters.items():
        emit(name, vals, model, good, MetricType.COUNTER, name.removesuffix("_total"))
    gauges = {"vllm:num_requests_running": tr.running[ticks], "vllm:num_requests_waiting": tr.waiting[ticks]}
    if radiance:
        for name, vals in ledger.items():
            emit(name, vals, model, good, MetricType.COUNTER, name.removesuffix("_total"))
        for name, vals in ledger_18.items():
            emit(name, vals, model, good & new_build, MetricType.COUNTER, name.removesuffix("_total"))
        gauges.update({
            "radiance:decode_tokens_per_second": tr.decode_gauge[ticks],
            "radiance:prefill_tokens_per_second": tr.prefill_gauge[ticks],
            "radiance:num_requests_preempted": tr.preempted[ticks],
        })
    elif metric_set == "vllm-v0":
        gauges["vllm:gpu_cache_usage_perc"] = tr.kv_usage[ticks]
    else:
        gauges["vllm:kv_cache_usage_perc"] = tr.kv_usage[ticks]
    for name, vals in gauges.items():
        emit(name, vals, model, good, MetricType.GAUGE)
    if plan.process_start_exported:
        started = np.where(after, restart[1] + restart[0] if restart else tr.start_seconds, tr.start_seconds)
        emit("process_start_time_seconds", WINDOW_START + started, base, good, MetricType.GAUGE)

    itl_new = "vllm:inter_token_latency_seconds" if metric_set in ("radiance-1.8", "vllm-v1", "upgrade") else None
    hists: list[tuple[str, tuple[float, ...], np.ndarray, np.ndarray]] = [
        ("vllm:time_to_first_token_seconds", TTFT_BOUNDS, tr.ttft, good)]
    if metric_set == "upgrade":
        hists.append(("vllm:time_per_output_token_seconds", ITL_BOUNDS, tr.itl, good & ~new_build))
        hists.append(("vllm:inter_token_latency_seconds", ITL_BOUNDS, tr.itl, good & new_build))
    else:
        hists.append((itl_new or "vllm:time_per_output_token_seconds", ITL_BOUNDS, tr.itl, good))
    if not radiance and plan.iteration_histogram:
        hists.append(("vllm:iteration_tokens_total", tuple(float(x) for x in ITERATION_BOUNDS),
                      tr.iteration_tokens, good))
    for family, bounds, counts, rows in hists:
        per_bucket = np.floor(np.cumsum(_cumulative(counts, reset_tick)[ticks], axis=1))
        # an observation is worth its bucket's midpoint (the +Inf bucket: twice the last bound)
        edges = np.array((0.0, *bounds, 2.0 * bounds[-1]))
        total = _cumulative(counts @ ((edges[:-1] + edges[1:]) / 2), reset_tick)[ticks]
        for j, bound in enumerate((*bounds, math.inf)):
            le = "+Inf" if math.isinf(bound) else _le(bound)
            emit(f"{family}_bucket", per_bucket[:, j], {**model, "le": le}, rows, MetricType.HISTOGRAM, family)
        emit(f"{family}_count", per_bucket[:, -1], model, rows, MetricType.HISTOGRAM, family)
        emit(f"{family}_sum", total, model, rows, MetricType.HISTOGRAM, family)
    return b.build()
