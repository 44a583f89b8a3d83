"""Synthetic recordings for census tests, built with RecordingBuilder at scrape resolution.

Not an engine: a per-scrape generator with just enough arithmetic for each mechanism
to leave its runbook signature in the metrics (chunk steps beside decoders for
sharing, decode-only steps slowed during and minutes after prefill for eviction,
preemption-counter bursts with a stall for preemption), plus the data faults the
census must survive: missed scrapes, counter resets, a 1.0.13 -> 1.8 build change,
plain-vLLM metric sets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey

T0 = 1_793_491_200.0  # 2026-11-01T00:00:00Z
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
               20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, float("inf"))
LEDGER = ("radiance:engine_steps_decode_total", "radiance:engine_step_seconds_decode_total",
          "radiance:engine_steps_held_total", "radiance:prefix_hit_cut_tokens_total")


@dataclass(frozen=True)
class Synth:
    mechanism: str = "sharing"  # sharing | eviction | preemption | none | idle
    duration_seconds: float = 7200.0
    interval_seconds: float = 15.0
    seed: int = 0
    running: float = 32.0
    decode_step_seconds: float = 0.015
    chunk_step_seconds: float = 0.3
    session_every_seconds: float = 420.0
    session_seconds: float = 120.0
    missed: tuple[int, ...] = ()  # scrape indexes with up=0 and nothing else
    restart_at: int | None = None  # scrape index where every counter restarts from 0
    upgrade_at: int | None = None  # before it: build 1.0.13 (no ledger counters); restart there
    profile: str = "radiance"  # radiance | vllm
    replay_share: float = 0.0


def _sessions(rng: np.random.Generator, cfg: Synth, n: int) -> np.ndarray:
    """Per scrape, the share of the preceding interval in which a long prompt prefilled."""
    busy = np.zeros(n)
    if cfg.mechanism == "idle":
        return busy
    t = rng.exponential(cfg.session_every_seconds)
    while t < cfg.duration_seconds:
        length = cfg.session_seconds * rng.uniform(0.5, 1.5)
        a, b = t / cfg.interval_seconds, (t + length) / cfg.interval_seconds
        for i in range(int(a), min(n, int(np.ceil(b)) + 1)):
            busy[i] = max(busy[i], min(i, b) - max(i - 1, a))
        t += length + rng.exponential(cfg.session_every_seconds)
    return np.clip(busy, 0, 1)


def synth_recording(cfg: Synth = Synth()) -> Recording:
    rng = np.random.default_rng(cfg.seed)
    n = int(cfg.duration_seconds / cfg.interval_seconds)
    times = T0 + np.arange(n) * cfg.interval_seconds + (rng.uniform(-0.2, 0.2, n) if cfg.seed else 0)
    dt = cfg.interval_seconds
    busy = _sessions(rng, cfg, n)
    at_scrape = busy >= 1.0 - 1e-9
    residency = np.zeros(n)
    if cfg.mechanism == "eviction":
        level = 0.0
        for i in range(n):
            level = 1.0 if busy[i] > 0 else level * np.exp(-dt / 240.0)
            residency[i] = level
    running = np.full(n, 0.0 if cfg.mechanism == "idle" else cfg.running)
    running = np.maximum(0, running + rng.normal(0, 1.0, n).round()) if cfg.mechanism != "idle" else running
    depth = np.zeros(n)
    preempt = np.zeros(n)
    if cfg.mechanism == "preemption":
        for start in rng.choice(np.arange(10, n - 10), size=max(1, n // 30), replace=False):
            preempt[start] = 12
            depth[start:start + 6] = 12
        running = np.maximum(0, running - depth)
    chunk = cfg.chunk_step_seconds if cfg.mechanism == "sharing" else 0.016
    d = cfg.decode_step_seconds * (1 + 1.5 * residency) * (1 + rng.normal(0, 0.01, n))
    chunk_time = busy * dt
    n_chunk = chunk_time / chunk
    n_dec = (dt - chunk_time) / d
    stream_idle = 1.0 / d
    stream = np.where(at_scrape, 1.0 / chunk, stream_idle) * (1 + rng.normal(0, 0.03, n))
    decode_tps = np.where(running > 0, running * stream, 0.0)
    prefill_tps = np.where(at_scrape, 8000.0 * (1 + rng.normal(0, 0.05, n)), 0.0)
    prefill_tps = np.where(depth > 0, np.maximum(prefill_tps, 4000.0), prefill_tps)

    counters = {
        "radiance:engine_steps_total": n_chunk + n_dec,
        "radiance:engine_steps_decode_total": n_dec,
        "radiance:engine_step_seconds_total": np.full(n, dt),
        "radiance:engine_step_seconds_decode_total": dt - chunk_time,
        "radiance:engine_steps_held_total": np.zeros(n),
        "radiance:prefix_hit_cut_tokens_total": prefill_tps * dt * cfg.replay_share,
        "vllm:num_preemptions_total": preempt,
        "vllm:prompt_tokens_total": prefill_tps * dt,
        "vllm:generation_tokens_total": decode_tps * dt,
    }
    ttft_mean = np.where(busy > 0, 2.0, 0.15)
    ttft_counts = rng.poisson(3.0, n)
    builder = RecordingBuilder(source=f"synth-{cfg.mechanism}")
    for name, typ in [("radiance:engine_steps", MetricType.COUNTER), ("vllm:num_preemptions", MetricType.COUNTER),
                      ("vllm:time_to_first_token_seconds", MetricType.HISTOGRAM), ("up", MetricType.GAUGE)]:
        builder.add_family(Family(name, typ))
    for name in counters:
        builder.add_family(Family(name.removesuffix("_total"), MetricType.COUNTER))
    base = {"job": "radiance", "instance": "synth:7770"}
    model = {**base, "model_name": "m"}
    good = np.ones(n, bool)
    good[list(cfg.missed)] = False
    epoch = np.zeros(n, int)
    for cut in (cfg.restart_at, cfg.upgrade_at):
        if cut is not None:
            epoch[cut:] += 1
    old_build = np.zeros(n, bool) if cfg.upgrade_at is None else np.arange(n) < cfg.upgrade_at

    def emit(name: str, values: np.ndarray, labels: dict[str, str], rows: np.ndarray) -> None:
        builder.add_many(SeriesKey(name, tuple(sorted(labels.items()))), times[rows], values[rows])

    radiance = cfg.profile == "radiance"
    builder.add_many(SeriesKey("up", tuple(sorted(base.items()))), times, good.astype(float))
    for name, per in counters.items():
        if not radiance and name.startswith("radiance:"):
            continue
        total = np.zeros(n)
        acc = 0.0
        for i in range(n):
            if i and epoch[i] != epoch[i - 1]:
                acc = 0.0
            acc += per[i] if i else 0.0
            total[i] = acc
        rows = good & (~old_build if name in LEDGER else True)
        emit(name, total, model, rows)
    if radiance:
        emit("radiance:decode_tokens_per_second", decode_tps, model, good)
        emit("radiance:prefill_tokens_per_second", prefill_tps, model, good)
        emit("radiance:num_requests_preempted", depth, model, good)
    emit("vllm:num_requests_running", running, model, good)
    emit("vllm:num_requests_waiting", np.zeros(n), model, good)
    cum = np.zeros((n, len(TTFT_BOUNDS)))
    acc_h = np.zeros(len(TTFT_BOUNDS))
    for i in range(n):
        if i and epoch[i] != epoch[i - 1]:
            acc_h[:] = 0
        obs = rng.exponential(ttft_mean[i], ttft_counts[i])
        acc_h += np.array([(obs <= ub).sum() for ub in TTFT_BOUNDS])
        cum[i] = acc_h
    for j, ub in enumerate(TTFT_BOUNDS):
        le = "+Inf" if np.isinf(ub) else repr(ub)
        emit("vllm:time_to_first_token_seconds_bucket", cum[:, j], {**model, "le": le}, good)
    emit("vllm:time_to_first_token_seconds_count", cum[:, -1], model, good)
    return builder.build()
