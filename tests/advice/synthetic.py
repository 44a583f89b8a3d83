"""A tiny closed-form endpoint for advice tests: step-time sharing with --prefill-interleave N.

Decoders (``running`` of them) get one token per step. While a prefill runs, the engine takes
a chunk step (``chunk_step_seconds``) then ``interleave`` held decode-only steps
(``decode_step_seconds`` each) when the build honours the flag; 1.0.13 holds nothing and
exports no decode/held counters. Scrapes carry the radiance 1.8.x (or 1.0.13) metric set.
"""

from __future__ import annotations

import numpy as np

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey

TTFT_BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, float("inf"))


def step_time_sharing(interleave: int = 0, build: str = "1.8.3", duration_seconds: float = 4 * 3600,
                      scrape_seconds: float = 15.0, running: int = 8, decode_step_seconds: float = 0.015,
                      chunk_step_seconds: float = 0.45, chunk_tokens: int = 4096, busy_seconds: float = 150.0,
                      period_seconds: float = 420.0, chunks_per_prompt: int = 8, seed: int = 0,
                      start: float = 1_700_000_000.0) -> Recording:
    rng = np.random.default_rng(seed)
    held_per_chunk = interleave if build != "1.0.13" else 0
    times = start + np.arange(0.0, duration_seconds + 1e-9, scrape_seconds)
    busy = ((times - start) % period_seconds) < busy_seconds
    busy[0] = False
    cycle = chunk_step_seconds + held_per_chunk * decode_step_seconds
    busy_rate = (held_per_chunk + 1) / cycle
    idle_rate = 1.0 / decode_step_seconds
    noise = 1.0 + 0.03 * rng.standard_normal(times.size)
    per_stream = np.where(busy, busy_rate, idle_rate) * noise
    decode_gauge = per_stream * running
    prefill_gauge = np.where(busy, chunk_tokens / cycle * noise, 0.0)
    dt = np.diff(times, prepend=times[0])
    chunk_steps = np.where(busy, dt / cycle, 0.0)
    decode_steps = np.where(busy, dt / cycle * held_per_chunk, dt / decode_step_seconds)
    held = np.where(busy, dt / cycle * held_per_chunk, 0.0)
    step_seconds_decode = decode_steps * decode_step_seconds
    step_seconds = step_seconds_decode + chunk_steps * chunk_step_seconds
    ttft_busy = chunks_per_prompt * cycle
    ttft_obs = np.where(busy, ttft_busy, 0.08) * np.exp(0.1 * rng.standard_normal(times.size))
    requests = np.where(dt > 0, 3.0, 0.0)

    b = RecordingBuilder(f"synthetic-interleave-{interleave}-{build}")
    base = (("instance", "radiance-0:7770"), ("job", "radiance"), ("model_name", "m"))
    for name, kind in (("radiance:decode_tokens_per_second", MetricType.GAUGE),
                       ("radiance:prefill_tokens_per_second", MetricType.GAUGE),
                       ("vllm:num_requests_running", MetricType.GAUGE),
                       ("radiance:engine_steps", MetricType.COUNTER),
                       ("radiance:engine_step_seconds", MetricType.COUNTER),
                       ("radiance:engine_steps_decode", MetricType.COUNTER),
                       ("radiance:engine_step_seconds_decode", MetricType.COUNTER),
                       ("radiance:engine_steps_held", MetricType.COUNTER),
                       ("vllm:prompt_tokens", MetricType.COUNTER),
                       ("vllm:time_to_first_token_seconds", MetricType.HISTOGRAM)):
        b.add_family(Family(name, kind))

    def add(name: str, values: np.ndarray, extra: tuple[tuple[str, str], ...] = ()) -> None:
        b.add_many(SeriesKey(name, tuple(sorted(base + extra))), times, values)

    add("up", np.ones(times.size))
    add("radiance:decode_tokens_per_second", decode_gauge)
    add("radiance:prefill_tokens_per_second", prefill_gauge)
    add("vllm:num_requests_running", np.full(times.size, float(running)))
    add("radiance:engine_steps_total", np.cumsum(chunk_steps + decode_steps))
    add("radiance:engine_step_seconds_total", np.cumsum(step_seconds))
    add("vllm:prompt_tokens_total", np.cumsum(chunk_steps * chunk_tokens))
    if build != "1.0.13":
        add("radiance:engine_steps_decode_total", np.cumsum(decode_steps))
        add("radiance:engine_step_seconds_decode_total", np.cumsum(step_seconds_decode))
        add("radiance:engine_steps_held_total", np.cumsum(held))
    for le in TTFT_BOUNDS:
        counts = np.cumsum(np.where(ttft_obs <= le, requests, 0.0))
        add("vllm:time_to_first_token_seconds_bucket", counts, (("le", "+Inf" if np.isinf(le) else repr(le)),))
    add("vllm:time_to_first_token_seconds_count", np.cumsum(requests))
    add("vllm:time_to_first_token_seconds_sum", np.cumsum(requests * ttft_obs))
    return b.build()


def cmdline_bytes(flags: dict[str, str]) -> bytes:
    args = ["radiance", "serve"]
    for flag, value in flags.items():
        args += [flag, value]
    return b"\0".join(a.encode() for a in args) + b"\0"
