"""Random alien recordings with ground truth: ``make_recording(random_config(seed)) -> (Recording, Truth)``.

A configuration draws the step-time law (decode-only 8-40 ms; chunk steps 3x-60x longer;
chunks of 512-8192 tokens; decode rows in chunk steps or not; an interleave of 0-2 held
steps), the workload of one injected cause, the metric set and the scrape plan (10-30 s,
jitter, missed scrapes, a restart, ``process_start_time_seconds`` or not).

The truth rule (the simulator's, ``pdcensus.sim.truth.RULE``, applied to this model's own
accounting): over the analysed shape (after the last restart), a mechanism is *found* when it
cost decoders measurable time while acting (see ``found_rule``); the headline is the found one
that cost most, ``mixed`` when two material ones each hold 25 % of lost time, ``none`` if
nothing is found, and ``inconclusive`` when no census could decide: fewer than 0.5 decoders
on average, or no chunk step ever ran beside decoders. ``Truth.borderline`` marks windows where some mechanism lies within a
factor 1.4 of either threshold (the rule could flip on a different window of the same load).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pdcensus.series.model import Recording
from pdcensus.sim.truth import Mechanism as TruthMechanism
from pdcensus.sim.truth import found_rule, headline_rule

from .engine import Cause, StepLaw, Trace, Traffic, run_engine
from .export import METRIC_SETS, ScrapePlan, export_recording

DOMINANT_SHARE_OF_DECODE = 0.05
DOMINANT_SHARE_OF_LOSS = 0.25
MIN_MEAN_DECODERS = 0.5
BORDER_FACTOR = 1.4
MECHANISMS = {"sharing": "step-time-sharing", "eviction": "eviction", "preemption": "preemption-stall"}
INTERVALS_SECONDS = (10.0, 15.0, 20.0, 25.0, 30.0)


@dataclass(frozen=True)
class AlienConfig:
    seed: int
    cause: Cause
    law: StepLaw
    traffic: Traffic
    plan: ScrapePlan
    metric_set: str
    duration_seconds: float
    restart: tuple[float, float] | None  # (time after the window start, downtime seconds)


@dataclass(frozen=True)
class Truth:
    """The verdict a perfect census would give on the analysed shape, and its margins."""

    mechanism: str
    mechanisms: tuple[str, ...]
    share_of_decode: dict[str, float]
    share_of_loss: dict[str, float]
    mean_decoders: float
    chunk_steps_beside_decoders: float
    borderline: bool
    window_seconds: tuple[float, float]
    found: dict[str, str] = field(default_factory=dict)  # found mechanism -> "material" / "minor"
    depth: dict[str, float] = field(default_factory=dict)  # decoders' speed while it acted (1 = undisturbed)


def random_law(rng: np.random.Generator) -> StepLaw:
    a = rng.uniform(0.006, 0.020)
    b = rng.uniform(0.05e-3, 0.4e-3)
    c = rng.uniform(0.0, 1.5e-7)
    chunk = int(rng.choice([512, 1024, 2048, 4096, 8192]))
    reference = a + b * 16 + c * 32_000
    ratio = math.exp(rng.uniform(math.log(3), math.log(60)))
    chunk_part = (ratio - 1) * reference
    d = min(rng.uniform(0.5, 3.0) * a, 0.3 * chunk_part)  # a chunk step's fixed overhead
    return StepLaw(a, b, c, d, (chunk_part - d) / chunk, chunk, bool(rng.uniform() < 0.75),
                   int(rng.choice([0, 0, 0, 0, 1, 2])))


def random_traffic(cause: Cause, law: StepLaw, rng: np.random.Generator) -> Traffic:
    healthy = cause is Cause.HEALTHY
    target = rng.uniform(3, 16) if healthy else rng.uniform(6, 48)
    output = rng.uniform(1500, 4000) if healthy else rng.uniform(300, 2500)
    # arrivals for ~70 % of the decode-only throughput at the target batch (below saturation)
    stream = 1.0 / law.decode_step_seconds(int(target), target * 1500)
    rate = 0.7 * target * stream / output
    short = (int(rng.integers(20, 100)), int(rng.integers(200, 500))) if healthy else (
        int(rng.integers(30, 200)), int(rng.integers(200, 1200)))
    seqs = int(max(8, target * rng.uniform(1.5, 4)))
    common = dict(arrivals_per_second=rate, short_prompt_tokens=short, output_tokens_mean=output, max_num_seqs=seqs)
    if cause is Cause.SHARING:
        lo = int(rng.uniform(8_000, 32_000))
        return Traffic(cause, long_prompt_every_seconds=rng.uniform(60, 600),
                       long_prompt_tokens=(lo, int(lo * rng.uniform(2, 8))), **common)
    if cause is Cause.EVICTION:
        lo = int(rng.uniform(4_000, 16_000))
        return Traffic(cause, long_prompt_every_seconds=rng.uniform(600, 1800),
                       long_prompt_tokens=(lo, int(lo * rng.uniform(1.2, 2))),
                       eviction_penalty=(rng.uniform(0.3, 0.8), rng.uniform(0.8, 2.0)),
                       eviction_seconds=(180.0, 720.0), eviction_decays=bool(rng.uniform() < 0.5), **common)
    if cause is Cause.PREEMPTION:
        return Traffic(cause, burst_every_seconds=rng.uniform(90, 400),
                       burst_share=(rng.uniform(0.15, 0.35), rng.uniform(0.35, 0.7)),
                       kv_wait_seconds=(rng.uniform(30, 90), rng.uniform(90, 240)), **common)
    if cause is Cause.IDLE:
        return Traffic(cause, arrivals_per_second=float(rng.choice([0.0, 2e-4])), short_prompt_tokens=short,
                       output_tokens_mean=output, max_num_seqs=seqs)
    return Traffic(cause, **common)


def random_config(seed: int, *, cause: Cause | None = None, metric_set: str | None = None,
                  interval_seconds: float | None = None, duration_seconds: float = 7200.0) -> AlienConfig:
    """One random alien endpoint; pin ``cause``, ``metric_set`` or ``interval_seconds`` to sweep them."""
    rng = np.random.default_rng([seed, 0xA11E])
    cause = cause or Cause(rng.choice([c.value for c in Cause]))
    metric_set = metric_set or str(rng.choice(METRIC_SETS))
    law = random_law(rng)
    traffic = random_traffic(cause, law, rng)
    plan = ScrapePlan(
        interval_seconds=interval_seconds or float(rng.choice(INTERVALS_SECONDS)),
        jitter_fraction=rng.uniform(0, 0.15),
        miss_probability=float(rng.choice([0.0, rng.uniform(0, 0.05)])),
        process_start_exported=bool(rng.uniform() < 0.5),
        iteration_histogram=bool(rng.uniform() < 0.5),
        job=str(rng.choice(["llm", "vllm", "radiance", "serving"])),
        instance=f"10.{rng.integers(0, 255)}.{rng.integers(0, 255)}.{rng.integers(1, 254)}:{rng.choice([8000, 7770])}",
        model_name=str(rng.choice(["alien-70b", "moe-8x22b", "chat-small"])),
    )
    restart = None
    if metric_set == "upgrade" or rng.uniform() < 0.4:
        restart = (rng.uniform(0.1, 0.35) * duration_seconds, rng.uniform(30, 180))
    return AlienConfig(seed, cause, law, traffic, plan, metric_set, duration_seconds, restart)


def judge(tr: Trace, start_seconds: float, end_seconds: float) -> Truth:
    """Apply the truth rule to ticks in ``[start, end)`` (see the module docstring)."""
    lo, hi = tr.tick_of(start_seconds), tr.tick_of(end_seconds) + 1
    decode = float(tr.decoder_seconds[lo:hi].sum())
    losses = {"sharing": float(tr.sharing_seconds[lo:hi].sum()), "eviction": float(tr.eviction_seconds[lo:hi].sum()),
              "preemption": float(tr.preemption_seconds[lo:hi].sum())}
    total = sum(losses.values())
    of_decode = {MECHANISMS[k]: (v / decode if decode > 0 else 0.0) for k, v in losses.items()}
    of_loss = {MECHANISMS[k]: (v / total if total > 0 else 0.0) for k, v in losses.items()}
    depth = {}
    for key in ("sharing", "eviction"):
        on = float(getattr(tr, key + "_active_seconds")[lo:hi].sum())
        depth[MECHANISMS[key]] = 1.0 - losses[key] / on if on > 0 else 1.0
    preempted = float(tr.preemptions[lo:hi].sum()) > 0 or losses["preemption"] > 0
    share = {TruthMechanism(m): v for m, v in of_decode.items()}
    found = {m.value: sev for m, sev in found_rule(share, {TruthMechanism(k): v for k, v in depth.items()},
                                                    preempted).items()}
    dominant = tuple(sorted(m for m in found if of_decode[m] >= DOMINANT_SHARE_OF_DECODE
                            and of_loss[m] >= DOMINANT_SHARE_OF_LOSS))
    mean_decoders = decode / max(end_seconds - start_seconds, 1e-9)
    beside = float(tr.chunk_steps_beside_decoders[lo:hi].sum())
    if mean_decoders < MIN_MEAN_DECODERS or beside == 0:
        mechanism = "inconclusive"
    else:
        mechanism = headline_rule({TruthMechanism(m): sev for m, sev in found.items()}, share).value
    f = BORDER_FACTOR
    border = any(
        (DOMINANT_SHARE_OF_DECODE / f <= of_decode[m] < DOMINANT_SHARE_OF_DECODE * f
         and of_loss[m] >= DOMINANT_SHARE_OF_LOSS / f)
        or (of_decode[m] >= DOMINANT_SHARE_OF_DECODE / f
            and DOMINANT_SHARE_OF_LOSS / f <= of_loss[m] < DOMINANT_SHARE_OF_LOSS * f)
        for m in of_decode)
    return Truth(mechanism, tuple(sorted(found)), of_decode, of_loss, mean_decoders, beside,
                 border and mechanism != "inconclusive", (start_seconds, end_seconds), found, depth)


def make_recording(config: AlienConfig) -> tuple[Recording, Truth]:
    """Run the alien engine, scrape it, and judge the shape the census analyses (the latest)."""
    tr = run_engine(config.law, config.traffic, config.duration_seconds, config.seed, restart=config.restart)
    rng = np.random.default_rng([config.seed, 0x5C2A])
    recording = export_recording(tr, config.plan, config.metric_set, config.duration_seconds, config.restart, rng)
    start = sum(config.restart) if config.restart else 0.0
    return recording, judge(tr, start, config.duration_seconds)
