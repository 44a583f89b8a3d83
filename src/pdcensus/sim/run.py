"""``simulate``: run a scenario's timeline in virtual time, scrape it, and keep the ground truth.

Each segment of the timeline is one engine process; between two processes the endpoint is
down for a while (scrapes then record ``up`` = 0 and nothing else) and every counter of the next
process starts from zero. Scrapes happen every ``scrape_interval_seconds`` (with the scenario's
jitter and failed scrapes) from a fixed epoch, 2026-11-01T00:00:00Z, so that the recording
backfills into Prometheus with ``promtool tsdb create-blocks-from openmetrics`` (start that
Prometheus with a retention long enough to keep the blocks, e.g. ``--storage.tsdb.retention.time=10y``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pdcensus.errors import UsageError
from pdcensus.series.model import Recording
from pdcensus.sim.config import Build, EngineConfig, parse_config
from pdcensus.sim.config_source import render_config_source
from pdcensus.sim.engine import Engine
from pdcensus.sim.engine_exports import ENGINE_PROFILES
from pdcensus.sim.engine_flags import engine_argv
from pdcensus.sim.evidence import boot_log, diagnostics, stats
from pdcensus.sim.exporter import RECORDING_PROFILES, RecordingAssembler
from pdcensus.sim.hardware import Hardware
from pdcensus.sim.scenarios import Perturbation, Scenario, get_scenario, perturbed, timeline, with_overrides
from pdcensus.sim.truth import RULE, capacity_truth, judge
from pdcensus.sim.workload import WorkloadFeeder

EPOCH_SECONDS = 1_793_491_200.0  # 2026-11-01T00:00:00Z
JOB = "radiance"
INSTANCE = "sim-0:7770"
FEED_AHEAD_SECONDS = 60.0


@dataclass(frozen=True)
class SimResult:
    """Everything one simulation produced (``write_sim_dir`` writes it as files)."""

    recording: Recording
    truth: dict[str, Any]
    stats: dict[str, Any]
    diagnostics: dict[str, Any]
    boot_log: str
    cmdline: list[str]
    config_source: str
    engine: Engine | None = field(default=None, compare=False, repr=False)


def scrape_times(duration_seconds: float, interval: float, jitter: float, rng: random.Random) -> list[float]:
    """Nominal scrape instants with uniform jitter, kept strictly increasing and inside the window."""
    out: list[float] = []
    n = int(duration_seconds // interval)
    for k in range(n + 1):
        t = k * interval + (rng.uniform(-jitter, jitter) if jitter > 0 else 0.0)
        t = min(max(t, 0.0), duration_seconds)
        if out and t <= out[-1] + 0.001:
            t = out[-1] + 0.001
        out.append(round(t, 3))
    return out


def simulate(
    scenario: str,
    *,
    duration_seconds: float = 7200.0,
    seed: int = 0,
    scrape_interval_seconds: float = 15.0,
    overrides: Mapping[str, str] | None = None,
    profile: str = "radiance",
    progress: Callable[[float], None] | None = None,
    perturbation: Perturbation | None = None,
) -> SimResult:
    """Simulate a named scenario and return its recording, truth and evidence."""
    return simulate_scenario(get_scenario(scenario), duration_seconds=duration_seconds, seed=seed,
                             scrape_interval_seconds=scrape_interval_seconds, overrides=overrides,
                             profile=profile, progress=progress, perturbation=perturbation)


def simulate_scenario(
    spec: Scenario,
    *,
    duration_seconds: float = 7200.0,
    seed: int = 0,
    scrape_interval_seconds: float = 15.0,
    overrides: Mapping[str, str] | None = None,
    profile: str = "radiance",
    progress: Callable[[float], None] | None = None,
    perturbation: Perturbation | None = None,
) -> SimResult:
    """Simulate a :class:`~pdcensus.sim.scenarios.Scenario` value (a named one, or one built by hand)."""
    scenario = spec.name
    if profile not in RECORDING_PROFILES:
        raise UsageError(f"unknown profile {profile!r}: expected one of: {', '.join(RECORDING_PROFILES)}")
    if duration_seconds <= 0:
        raise UsageError(f"duration must be positive, got {duration_seconds!r}")
    spec = with_overrides(spec, dict(overrides or {}))
    if perturbation is not None:
        spec = perturbed(spec, perturbation)
        scrape_interval_seconds = perturbation.scrape_interval_seconds
    if scrape_interval_seconds <= 0:
        raise UsageError(f"scrape interval must be positive, got {scrape_interval_seconds!r}")
    configs = [parse_config(seg.flags, EngineConfig(build=seg.build)) for seg in spec.segments]
    spans = timeline(spec, duration_seconds).spans
    rng = random.Random(seed)
    noise_rng = random.Random(rng.getrandbits(64))
    times = scrape_times(duration_seconds, scrape_interval_seconds, spec.noise.jitter_seconds, noise_rng)
    assembler = RecordingAssembler(JOB, INSTANCE, profile, spec.step_detail_scraped)
    hardware = Hardware()
    segments_truth: list[dict[str, Any]] = []
    boot: list[str] = []
    engine: Engine | None = None
    ti = 0
    for (start, end), seg, config in zip(spans, spec.segments, configs):
        while ti < len(times) and times[ti] < start:
            assembler.scrape_failed(EPOCH_SECONDS + times[ti])
            ti += 1
        engine = Engine(config, spec.cost, hardware, spec.residency, start_seconds=start,
                        engine_tallies=profile in ENGINE_PROFILES, admission=spec.admission)
        feeder = WorkloadFeeder(seg.workload, engine, random.Random(rng.getrandbits(64)), start, end,
                                config.max_model_len)
        boot.append(boot_log(engine, seg.build, EPOCH_SECONDS + start))
        process_start = EPOCH_SECONDS + start if spec.export_process_start else None
        while ti < len(times) and times[ti] <= end:
            t = times[ti]
            feeder.feed(t + FEED_AHEAD_SECONDS)
            engine.advance_until(t)
            if noise_rng.random() < spec.noise.miss_probability:
                assembler.scrape_failed(EPOCH_SECONDS + t)
            else:
                assembler.scrape(EPOCH_SECONDS + t, engine, t, seg.build, process_start)
            ti += 1
            if progress is not None and ti % 64 == 0:
                progress(min(1.0, t / duration_seconds))
        feeder.feed(end)
        engine.advance_until(end)
        engine.ledger.end_seconds = end
        segments_truth.append(_segment_truth(engine, seg.build, config, start, end))
    while ti < len(times):
        assembler.scrape_failed(EPOCH_SECONDS + times[ti])
        ti += 1
    if progress is not None:
        progress(1.0)
    assert engine is not None
    last_config, last_build = configs[-1], spec.segments[-1].build
    truth = _truth(scenario, seed, profile, segments_truth, last_config, last_build,
                   scrape_interval_seconds, duration_seconds, spec.step_detail_scraped, perturbation)
    end_t = spans[-1][1]
    return SimResult(
        recording=assembler.build(source=f"sim:{scenario}"),
        truth=truth,
        stats=stats(engine, end_t, EPOCH_SECONDS),
        diagnostics=diagnostics(engine, last_build, EPOCH_SECONDS + end_t),
        boot_log="".join(boot),
        cmdline=engine_argv(profile, last_config),
        config_source=render_config_source(),
        engine=engine,
    )


def _segment_truth(engine: Engine, build: Build, config: EngineConfig, start: float, end: float) -> dict[str, Any]:
    verdict = judge(engine.ledger)
    arrived = engine.arrived  # every request the engine took in (ingested); its own count, tallies fed or not
    capacity = capacity_truth(arrived, int(engine.metrics.request_success), len(engine.waiting), config.max_num_seqs)
    return {
        "start": EPOCH_SECONDS + start,
        "end": EPOCH_SECONDS + end,
        "build": build.value,
        "flags": config.flags(),
        "argv": config.argv(),
        **verdict,
        "capacity": capacity,
    }


def _truth(
    scenario: str, seed: int, profile: str, segments: list[dict[str, Any]], config: EngineConfig, build: Build,
    scrape_interval_seconds: float, duration_seconds: float, step_detail_scraped: bool,
    perturbation: Perturbation | None,
) -> dict[str, Any]:
    last = segments[-1]
    keys = ("mechanism", "mechanisms", "found", "dominant", "allowed", "loss_seconds", "loss_share", "loss_share_of_lost",
            "decode_step_seconds", "chunk_step_seconds", "prefix_hit_cut_share", "held_steps", "preemptions",
            "mean_decoders", "capacity")
    truth: dict[str, Any] = {
        "scenario": scenario,
        "seed": seed,
        "flags": config.flags(),
        "build": build.value,
        "profile": profile,
        **{k: last[k] for k in keys},
        "rule": RULE,
        "segments": segments,
        "job": JOB,
        "instance": INSTANCE,
        "model_name": config.model,
        "start": EPOCH_SECONDS,
        "end": EPOCH_SECONDS + duration_seconds,
        "scrape_interval_seconds": scrape_interval_seconds,
        "step_detail_scraped": step_detail_scraped,
        "restarts": [s["start"] for s in segments[1:]],
    }
    if perturbation is not None:
        truth["perturbation"] = {
            "seed": perturbation.seed,
            "cost_factors": dict(perturbation.cost_factors),
            "scrape_interval_seconds": perturbation.scrape_interval_seconds,
            "checkpoint_interval": perturbation.checkpoint_interval,
            "load_factor": perturbation.load_factor,
            "promote_factor": perturbation.promote_factor,
        }
    return truth
