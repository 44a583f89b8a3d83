"""Small radiance-shaped recordings for the reliability tests, and the bad files made from them.

Not a model of an engine (the simulator is that): just enough per-scrape arithmetic that a
good recording carries every signal the census reads (the decode and prefill gauges from
the same scrape, running sequences, the step-ledger counters, preemptions, ``up``), so
that each damaged copy fails, or survives, for the one reason the test names. Long
prompts prefill in sessions; a decode row beside a chunk step waits the chunk's whole
time (step-time sharing), so a healthy file gives the census something to rank.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey
from pdcensus.sources.openmetrics_writer import write_openmetrics

T0 = 1_793_491_200.0  # 2026-11-01T00:00:00Z
SCRAPE_SECONDS = 15.0
DECODE_STEP_SECONDS = 0.015
CHUNK_STEP_SECONDS = 0.3
COUNTERS = (
    "radiance:engine_steps", "radiance:engine_steps_decode", "radiance:engine_step_seconds",
    "radiance:engine_step_seconds_decode", "radiance:engine_steps_held", "vllm:num_preemptions",
    "vllm:prompt_tokens", "vllm:generation_tokens",
)
GAUGES = ("radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second",
          "vllm:num_requests_running", "radiance:num_requests_preempted", "up")


def sharing_recording(n_scrapes: int = 240, *, seed: int = 0, instance: str = "engine:7770",
                      model_name: str = "m", job: str = "radiance") -> Recording:
    """``n_scrapes`` scrapes of one endpoint with step-time sharing during prefill sessions."""
    rng = np.random.default_rng(seed)
    times = T0 + np.arange(n_scrapes) * SCRAPE_SECONDS
    busy = np.zeros(n_scrapes, dtype=bool)
    i = int(rng.integers(4, 12))
    while i < n_scrapes:  # sessions of 4-10 scrapes, 10-30 scrapes apart
        length = int(rng.integers(4, 11))
        busy[i:i + length] = True
        i += length + int(rng.integers(10, 31))
    running = np.maximum(1.0, 32.0 + rng.normal(0, 1.0, n_scrapes).round())
    chunk_seconds = np.where(busy, 0.8 * SCRAPE_SECONDS, 0.0)
    decode_seconds = SCRAPE_SECONDS - chunk_seconds
    step_rate = np.where(busy, 1.0 / CHUNK_STEP_SECONDS, 1.0 / DECODE_STEP_SECONDS)
    decode_tps = running * step_rate * (1 + rng.normal(0, 0.03, n_scrapes))
    prefill_tps = np.where(busy, 8000.0 * (1 + rng.normal(0, 0.05, n_scrapes)), 0.0)
    per_interval = {
        "radiance:engine_steps_total": chunk_seconds / CHUNK_STEP_SECONDS + decode_seconds / DECODE_STEP_SECONDS,
        "radiance:engine_steps_decode_total": decode_seconds / DECODE_STEP_SECONDS,
        "radiance:engine_step_seconds_total": np.full(n_scrapes, SCRAPE_SECONDS),
        "radiance:engine_step_seconds_decode_total": decode_seconds,
        "radiance:engine_steps_held_total": np.zeros(n_scrapes),
        "vllm:num_preemptions_total": np.zeros(n_scrapes),
        "vllm:prompt_tokens_total": prefill_tps * SCRAPE_SECONDS,
        "vllm:generation_tokens_total": decode_tps * SCRAPE_SECONDS,
    }
    builder = RecordingBuilder(source="reliability")
    for name in COUNTERS:
        builder.add_family(Family(name, MetricType.COUNTER))
    for name in GAUGES:
        builder.add_family(Family(name, MetricType.GAUGE))
    base = {"job": job, "instance": instance}
    labelled = {**base, "model_name": model_name}

    def key(name: str, labels: dict[str, str]) -> SeriesKey:
        return SeriesKey(name, tuple(sorted(labels.items())))

    builder.add_many(key("up", base), times, np.ones(n_scrapes))
    for name, steps in per_interval.items():
        builder.add_many(key(name, labelled), times, np.cumsum(steps) - steps[0])
    for name, values in (("radiance:decode_tokens_per_second", decode_tps),
                         ("radiance:prefill_tokens_per_second", prefill_tps),
                         ("vllm:num_requests_running", running),
                         ("radiance:num_requests_preempted", np.zeros(n_scrapes))):
        builder.add_many(key(name, labelled), times, values)
    return builder.build()


def write_recording(path: Path, recording: Recording | None = None) -> Path:
    """Write ``recording`` (default: a 240-scrape sharing one) as OpenMetrics; returns ``path``."""
    write_openmetrics(recording if recording is not None else sharing_recording(), path)
    return path


def sample_lines(text: str) -> list[str]:
    """The sample lines of an exposition (no ``#`` lines, no blank lines)."""
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def replace_values(text: str, name: str, every: int, value: str) -> str:
    """Set every ``every``-th sample of sample name ``name`` to ``value`` (e.g. ``NaN``)."""
    out, seen = [], 0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            seen += 1
            if seen % every == 0:
                series, _old, stamp = line.rsplit(" ", 2)
                line = f"{series} {value} {stamp}"
        out.append(line)
    return "\n".join(out) + "\n"
