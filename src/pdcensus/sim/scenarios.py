"""Named scenarios: a timeline of engine processes (build, flags, workload) and how they are scraped.

Each scenario sets up the CAUSE of a mechanism (long prompts beside decoders, a large step
budget whose arena evicts experts, KV pressure, deep multi-turn hits) and lets the engine
produce the effect; the truth comes from the engine's accounting (:mod:`pdcensus.sim.truth`).
Scenarios accept ``--set FLAG=VALUE`` overrides (applied to every process of the timeline) and
a :class:`Perturbation` (from :func:`randomize`) that moves cost constants +-30 %, the scrape
interval within 10-30 s, the checkpoint interval (the chunk size) and the load, so that the
census is not tuned to one calibration.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pdcensus.errors import UsageError
from pdcensus.sim.config import Build, normalize_flag
from pdcensus.sim.cost_model import CostModel
from pdcensus.sim.residency import ResidencyParams
from pdcensus.sim.scheduler import KvAdmission
from pdcensus.sim.workload import ArrivalKind, Arrivals, Lengths, Sessions, Stream, Workload


@dataclass(frozen=True)
class Segment:
    """One engine process of the timeline: its share of the duration, build, flags and traffic."""

    share: float
    build: Build
    flags: Mapping[str, str]
    workload: Workload


@dataclass(frozen=True)
class ScrapeNoise:
    """Scrape jitter (uniform +-seconds) and the probability that a scrape fails (``up`` = 0)."""

    jitter_seconds: float = 0.0
    miss_probability: float = 0.0


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    segments: tuple[Segment, ...]
    restart_down_seconds: float = 90.0
    noise: ScrapeNoise = ScrapeNoise()
    export_process_start: bool = False
    step_detail_scraped: bool = False
    cost: CostModel = CostModel()
    residency: ResidencyParams = ResidencyParams()
    admission: KvAdmission = KvAdmission()  # radiance's watermark and resume; VLLM_ADMISSION for a vLLM twin


@dataclass(frozen=True)
class Perturbation:
    """A randomized calibration: cost constants, scrape interval, chunk size, load, heat pace."""

    seed: int
    cost_factors: tuple[tuple[str, float], ...] = ()
    scrape_interval_seconds: float = 15.0
    checkpoint_interval: int = 4096
    load_factor: float = 1.0
    promote_factor: float = 1.0


def randomize(seed: int) -> Perturbation:
    """A reproducible perturbation for the randomized accuracy test."""
    rng = random.Random(seed)
    names = ("base_seconds", "per_row_seconds", "per_prefill_token_seconds", "per_context_token_seconds",
             "miss_seconds_per_expert", "snapshot_write_seconds")
    return Perturbation(
        seed=seed,
        cost_factors=tuple((n, round(rng.uniform(0.7, 1.3), 4)) for n in names),
        scrape_interval_seconds=float(rng.choice((10, 15, 20, 30))),
        checkpoint_interval=rng.choice((2048, 3072, 4096)),
        load_factor=round(rng.uniform(0.8, 1.2), 4),
        promote_factor=round(rng.uniform(0.7, 1.3), 4),
    )


def _chat(rate: float, prompt: float = 150, output: float = 600, kind: ArrivalKind = ArrivalKind.POISSON,
          **arrivals: float) -> Stream:
    return Stream("chat", Arrivals(kind, rate, **arrivals), Lengths(prompt, 0.6, 8, 8000),
                  Lengths(output, 0.5, 16, 8000))


def _long(rate: float, prompt: float, kind: ArrivalKind = ArrivalKind.POISSON, **arrivals: float) -> Stream:
    return Stream("long-context", Arrivals(kind, rate, **arrivals), Lengths(prompt, 0.25, 12000, 120000),
                  Lengths(150, 0.3, 16, 1000))


HEALTHY = Workload((_chat(1.5, output=700, kind=ArrivalKind.DIURNAL, amplitude=0.2),))
# tool calls and short follow-ups: a prompt of a few dozen tokens adds ~5-15 % to the step it rides in
CHUNKING_OVERHEAD = Workload((Stream("tool-calls", Arrivals(ArrivalKind.POISSON, 2.0), Lengths(30, 0.4, 8, 60),
                                     Lengths(700, 0.5, 16, 8000)),))
SHARING = Workload((_chat(2.5), _long(1 / 20, 40000)))
EVICTION_FLAGS = {"--max-num-batched-tokens": "16384", "--prefill-span": "4", "--checkpoint-interval": "4096"}
EVICTION = Workload((_chat(2.0), _long(1 / 720, 32000, ArrivalKind.PERIODIC, jitter_share=0.15,
                                       offset_seconds=120.0)))
PREEMPTION_FLAGS = {"--num-gpu-blocks-override": "6144"}
PREEMPTION = Workload((Stream("chat", Arrivals(ArrivalKind.BURSTY, 0.3, burst_factor=4.0, burst_seconds=90.0,
                                               calm_seconds=300.0),
                              Lengths(500, 0.5, 16, 4000), Lengths(4000, 0.35, 256, 12000)),))
SELF_MADE = Workload(
    (_chat(1.0, output=500),),
    (Sessions(Arrivals(ArrivalKind.POISSON, 1 / 40), first_prompt=Lengths(24000, 0.3, 8000, 60000),
              turn_tokens=Lengths(200, 0.5, 16, 2000), output=Lengths(300, 0.5, 16, 2000),
              turns=Lengths(10, 0.4, 3, 30), think_seconds=20.0),),
)
# more work than the engine can serve: chat at twice what a KV-tight batch completes, so the queue
# grows all window and the full KV cache preempts a sequence every few seconds (no burst to ride out)
OVERLOAD_FLAGS = {"--num-gpu-blocks-override": "6144"}
OVERLOAD = Workload((Stream("chat", Arrivals(ArrivalKind.POISSON, 1.5), Lengths(150, 0.5, 16, 4000),
                            Lengths(3000, 0.35, 256, 8000)),))
IDLE = Workload((Stream("health-check", Arrivals(ArrivalKind.PERIODIC, 1 / 300), Lengths(16, 0.0),
                        Lengths(4, 0.0)),))


SERVE_FLAGS = {"--max-num-seqs": "64", "--max-num-batched-tokens": "4096", "--checkpoint-interval": "4096"}
"""What the serve script passes on every start (so argv is never bare)."""


def _one(name: str, description: str, flags: Mapping[str, str], workload: Workload, **kw: object) -> Scenario:
    return Scenario(name, description, (Segment(1.0, Build.V1_8_3, {**SERVE_FLAGS, **flags}, workload),), **kw)  # type: ignore[arg-type]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        _one("step-time-sharing", "long prompts arrive while others decode: chunk steps hold the device (lag 0)",
             {}, SHARING),
        _one("protected", "step-time-sharing with --prefill-interleave 2: held decode-only steps between chunks",
             {"--prefill-interleave": "2"}, SHARING, step_detail_scraped=True),
        _one("eviction-tail", "a large step budget's arena evicts experts; decode stays slow for minutes after",
             EVICTION_FLAGS, EVICTION),
        _one("preemption-stall", "KV pressure preempts decoders, which stop and re-prefill from token 0",
             PREEMPTION_FLAGS, PREEMPTION, export_process_start=True),
        _one("self-made-prefill", "multi-turn hits reuse only to the last retained checkpoint; replay is the prefill",
             {}, SELF_MADE, step_detail_scraped=True),
        _one("mixed", "eviction tail and preemption stalls together",
             {**EVICTION_FLAGS, **PREEMPTION_FLAGS},
             Workload(EVICTION.streams[1:] + PREEMPTION.streams)),
        _one("overloaded", "arrivals above capacity: the queue grows all window, preemptions are continuous; no knob "
             "fixes it", OVERLOAD_FLAGS, OVERLOAD),
        _one("healthy", "light chat traffic: short prompts, decode barely disturbed", {}, HEALTHY),
        _one("chunking-overhead", "tool calls: prompts of a few dozen tokens, chunk steps only 5-15 % longer "
             "than decode-only steps (no collapse)", {}, CHUNKING_OVERHEAD),
        _one("idle", "an idle endpoint: a health check every five minutes, nothing to judge", {}, IDLE),
        Scenario(
            "upgrade",
            "radiance 1.0.13 with an eviction tail, a restart, then 1.8.3 with step-time sharing",
            (Segment(0.45, Build.V1_0_13, {**SERVE_FLAGS, **EVICTION_FLAGS}, EVICTION),
             Segment(0.55, Build.V1_8_3, dict(SERVE_FLAGS), SHARING)),
            export_process_start=False,
        ),
        _one("noisy-scrapes", "step-time sharing scraped with jitter and failed scrapes (up = 0)", {}, SHARING,
             noise=ScrapeNoise(jitter_seconds=3.0, miss_probability=0.05)),
    )
}


def list_scenarios() -> list[tuple[str, str]]:
    """``(name, one-line description)`` for every scenario."""
    return [(s.name, s.description) for s in SCENARIOS.values()]


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise UsageError(f"unknown scenario {name!r}: expected one of: {', '.join(SCENARIOS)}") from None


def with_overrides(scenario: Scenario, overrides: Mapping[str, str]) -> Scenario:
    """Apply ``--set`` flags to every process of the timeline."""
    if not overrides:
        return scenario
    wanted = {normalize_flag(k): v for k, v in overrides.items()}
    segments = []
    for seg in scenario.segments:
        flags = {**{normalize_flag(k): v for k, v in seg.flags.items()}, **wanted}
        build = seg.build
        if "--build" in flags:
            raw = flags.pop("--build")
            members = tuple(b.value for b in Build)
            if raw not in members:
                raise UsageError(f"unknown value {raw!r} for --build: expected one of: {', '.join(members)}")
            build = Build(raw)
        segments.append(replace(seg, flags=flags, build=build))
    return replace(scenario, segments=tuple(segments))


def perturbed(scenario: Scenario, p: Perturbation) -> Scenario:
    """Apply a perturbation: cost constants, chunk size (keeping any span's step budget), load, heat pace.

    Every flag set it writes passes :func:`pdcensus.sim.config.validate_config` (a span keeps
    ``--max-num-batched-tokens`` equal to span x interval).
    """
    from pdcensus.sim.cost_model import scaled

    segments = []
    for seg in scenario.segments:
        flags = dict(seg.flags)
        span = int(flags.get("--prefill-span", "1"))
        if span > 1:
            # keep the step budget near span x interval and exactly what --prefill-span demands
            # (--max-num-batched-tokens = span x --checkpoint-interval), or radiance refuses to start
            budget = span * int(flags.get("--checkpoint-interval", "4096"))
            new_span = max(2, round(budget / p.checkpoint_interval))
            interval = budget // new_span
            flags["--prefill-span"] = str(new_span)
            flags["--checkpoint-interval"] = str(interval)
            flags["--max-num-batched-tokens"] = str(new_span * interval)
        else:
            flags["--checkpoint-interval"] = str(p.checkpoint_interval)
            flags["--max-num-batched-tokens"] = str(p.checkpoint_interval)
        segments.append(replace(seg, flags=flags, workload=seg.workload.scaled(p.load_factor)))
    residency = replace(scenario.residency,
                        promote_seconds=scenario.residency.promote_seconds * p.promote_factor)
    return replace(scenario, segments=tuple(segments), cost=scaled(scenario.cost, dict(p.cost_factors)),
                   residency=residency)


@dataclass(frozen=True)
class Timeline:
    """Absolute times (seconds from the start) of each process: ``(start, end)`` per segment."""

    spans: tuple[tuple[float, float], ...] = field(default_factory=tuple)


def timeline(scenario: Scenario, duration_seconds: float) -> Timeline:
    """Where each process runs; a restart leaves ``restart_down_seconds`` with the process down."""
    spans, t = [], 0.0
    for i, seg in enumerate(scenario.segments):
        end = t + seg.share * duration_seconds if i < len(scenario.segments) - 1 else duration_seconds
        spans.append((t, end))
        t = end + scenario.restart_down_seconds
    return Timeline(tuple(spans))
