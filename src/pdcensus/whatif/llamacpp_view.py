"""The twin's recording in llama.cpp's own words, so the census reads the twin as it reads the engine.

llama.cpp's calls are long (seconds on a CPU), and its census reading
(:mod:`pdcensus.series.llamacpp`) spreads each chunk call's seconds and tokens back over the
scrape intervals it ran in. The twin's own gauges are ~1 s decayed rates, which at 1 s scrapes
over 10-30 s calls leak decode rates into "busy" scrapes for a few seconds after every chunk
(on the real ``-ub 512`` run: the twin's busy per-stream rate 50 % above the recording's, from
that alone). Written as llama.cpp's counters instead, the twin is read by the same code as the
recording:

- ``n_decode_total`` = the twin's steps (one ``llama_decode`` call per step);
- busy slot-calls = decode rows (one per decoding sequence per step = generated tokens) plus one
  prompting slot per chunk step, so ``n_busy_slots_per_decode`` = that over the calls;
- ``prompt_tokens_total`` and ``prompt_seconds_total`` = the prompt tokens and the chunk steps'
  seconds (the whole call's wall time, as llama.cpp's server times a call that carried prompt);
- ``tokens_predicted_total`` = generated tokens; ``requests_processing`` = the running gauge.

All of these move when a step completes, as llama.cpp's move after each call, and are written
with 6 significant digits, as llama.cpp's ``std::stringstream`` prints them (the reader's
tolerances assume that resolution).
"""

from __future__ import annotations

import numpy as np

from pdcensus.series.model import Endpoint, Recording, RecordingBuilder, SeriesKey


def _sum(endpoint: Endpoint, name: str) -> np.ndarray:
    total = np.zeros(endpoint.timestamps.size)
    seen = np.zeros(endpoint.timestamps.size, dtype=bool)
    for key in endpoint.select(name):
        values, present = endpoint.column(key)
        total += np.where(present, values, 0.0)
        seen |= present
    return np.where(seen, total, np.nan)


def as_llamacpp(recording: Recording) -> Recording:
    """The twin's (radiance-named) recording rewritten as llama.cpp's ``/metrics`` would have counted it."""
    endpoint = recording.endpoints[0]
    times = endpoint.timestamps
    steps = _sum(endpoint, "radiance:engine_steps_total")
    decode_steps = _sum(endpoint, "radiance:engine_steps_decode_total")
    seconds = _sum(endpoint, "radiance:engine_step_seconds_total")
    decode_seconds = _sum(endpoint, "radiance:engine_step_seconds_decode_total")
    generated = _sum(endpoint, "vllm:generation_tokens_total")
    prompt = _sum(endpoint, "vllm:prompt_tokens_total")
    running = _sum(endpoint, "vllm:num_requests_running")
    up = _sum(endpoint, "up")
    busy = generated + (steps - decode_steps)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_decode = np.where(steps > 0, busy / np.where(steps > 0, steps, 1.0), 0.0)
    labels = (("instance", endpoint.instance), ("job", endpoint.job))
    columns = {
        "llamacpp:n_decode_total": steps,
        "llamacpp:n_busy_slots_per_decode": per_decode,
        "llamacpp:prompt_tokens_total": prompt,
        "llamacpp:prompt_seconds_total": seconds - decode_seconds,
        "llamacpp:tokens_predicted_total": generated,
        "llamacpp:requests_processing": running,
        "llamacpp:requests_deferred": _sum(endpoint, "vllm:num_requests_waiting"),
    }
    builder = RecordingBuilder(recording.source or "twin")
    good = np.isfinite(up) & (up > 0) & np.isfinite(steps)
    for name, values in columns.items():
        ok = good & np.isfinite(values)
        printed = [float(f"{v:.6g}") for v in values[ok]]
        builder.add_many(SeriesKey(name, labels), times[ok], printed)
    builder.add_many(SeriesKey("up", labels), times[np.isfinite(up)], up[np.isfinite(up)])
    return builder.build()
