"""``what_if``: calibrate the twin, check it against the recording, then simulate the change.

1. The census of the recording (its ledger and dose-response give the step costs) and its
   figures on its own bucket edges (:mod:`pdcensus.whatif.measure`).
2. The twin (:mod:`pdcensus.whatif.calibrate`) simulated over the same window, without the
   change, once per seed; its figures on the recording's edges. The **calibration error** of
   each figure is the twin's median over seeds against the recording: ``twin / observed - 1``.
3. If the error of any figure in :data:`BOUNDED` is beyond the bound (default
   :data:`DEFAULT_BOUND`), no prediction: the twin does not reproduce the recording, so what
   it says about a change is not evidence. Otherwise the twin runs with the change, same seeds
   (same traffic draws), and each figure is predicted as the recording's value times the
   twin's after/before ratio, per seed (the twin's own bias cancels in the ratio); the interval
   is the range over seeds. Where the recording lacks a figure (no TTFT histogram), the twin's
   own value is given and marked so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from pdcensus.census.model import CensusReport
from pdcensus.census.run import CensusOptions, ShapeRead, census_endpoint, read_shape
from pdcensus.engines import record
from pdcensus.errors import UsageError
from pdcensus.series.llamacpp import increases
from pdcensus.series.model import Recording
from pdcensus.series.profiles import Signal
from pdcensus.sim.config import Build, EngineConfig, parse_config
from pdcensus.sim.fitted import clients_workload, trace_workload
from pdcensus.sim.run import SimResult, simulate_scenario
from pdcensus.sim.scenarios import Scenario, Segment
from pdcensus.whatif.arrivals import ttft_sums
from pdcensus.whatif.calibrate import LLAMACPP_DEFAULT_UBATCH, Calibration, calibrate
from pdcensus.whatif.knobs import Knob, KnobSetting, parse_knobs
from pdcensus.whatif.lengths import finished_requests, length_pairs
from pdcensus.whatif.llamacpp_view import as_llamacpp
from pdcensus.whatif.measure import FIGURES, WindowFigures, choose_endpoint, measure, read_window
from pdcensus.whatif.vllm_knobs import vllm_change
from pdcensus.whatif.population import clients_for, clients_note, closed_loop_warning, closed_population
from pdcensus.whatif.model import BOUNDED, WITHHELD, BucketPrediction, FigurePrediction, Spread, WhatIfResult

TOKENS_PREDICTED = "llamacpp:tokens_predicted_total"
CACHE_CONFIG_INFO = "vllm:cache_config_info"
PROMPT_LENGTHS, OUTPUT_LENGTHS = "vllm:request_prompt_tokens", "vllm:request_generation_tokens"
DEFAULT_BOUND = 0.25
# the figures a decode step's growth with the batch moves (withheld where that growth is unknown)
BATCH_FIGURES = frozenset({
    "per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second", "decode_tokens_per_second",
    "busy_vs_idle", "itl_p50_seconds", "itl_p99_seconds", "busy_itl_p50_seconds", "busy_itl_p99_seconds",
    "felt_busy_tokens_per_second", "felt_idle_tokens_per_second", "idle_itl_p50_seconds", "idle_itl_p99_seconds"})
DEFAULT_SEEDS = 4
# a change's mean batch outside [low x p5, high x p95] of the recording's running is an extrapolation
EXTRAPOLATION_LOW, EXTRAPOLATION_HIGH = 0.8, 1.25


@dataclass(frozen=True)
class Change:
    """The change in the twin's terms: simulator flags, micro-batch, load."""

    flags: dict[str, str]
    ubatch_tokens: int | None
    load: float


def to_change(settings: Sequence[KnobSetting], calibration: Calibration) -> Change:
    """Map the operator's knobs (engine spelling) onto the twin."""
    flags: dict[str, str] = {}
    ubatch: int | None = None
    load = 1.0
    batch = calibration.flags.get("--max-num-batched-tokens")
    if record(calibration.engine).twin_maps_every_flag:
        vllm_sets = {s.spelling: s.value for s in settings if s.knob is not Knob.LOAD}
        flags = vllm_change(vllm_sets, calibration.flags, calibration.config_labels)
        settings = [s for s in settings if s.knob is Knob.LOAD]
    for s in settings:
        if s.knob is Knob.LOAD:
            load = s.number()
            if not load > 0:
                raise UsageError(f"bad value {s.value!r} for load: expected a positive factor")
        elif s.knob is Knob.SIM_FLAG or s.knob is Knob.MAX_NUM_SEQS:
            flags[s.spelling if s.knob is Knob.SIM_FLAG else "--max-num-seqs"] = s.value
        elif s.knob is Knob.BATCH_TOKENS:
            batch = s.value
            for flag in ("--max-num-batched-tokens", "--checkpoint-interval", "--busy-prefill-chunk"):
                flags[flag] = s.value
        elif s.knob is Knob.UBATCH_TOKENS:
            ubatch = int(s.number())
            if ubatch < 1:
                raise UsageError(f"bad value {s.value!r} for {s.spelling}: expected a positive number of tokens")
    if record(calibration.engine).micro_batches and (ubatch is not None or "--max-num-batched-tokens" in flags):
        # n_ubatch = min(-b, -ub), each as argv or the change sets it
        ub = ubatch if ubatch is not None else int(calibration.argv_knobs.get(Knob.UBATCH_TOKENS,
                                                                               LLAMACPP_DEFAULT_UBATCH))
        ubatch = min(ub, int(batch)) if batch is not None else ub
    return Change(flags, ubatch, load)


def _scenario(calibration: Calibration, seed: int, change: Change | None, clients: int | None = None) -> Scenario:
    """The twin's scenario: the recorded arrivals replayed, or (``clients``) that many closed-loop clients."""
    flags = dict(calibration.flags)
    cost = calibration.costs.cost_model(calibration.engine)
    load = 1.0
    if change is not None:
        flags.update(change.flags)
        load = change.load
        if change.ubatch_tokens is not None:
            cost = replace(cost, ubatch_tokens=change.ubatch_tokens)
    build = Build.V1_0_13 if calibration.profile == "radiance-1.0.13" else Build.V1_8_3
    parse_config(flags, EngineConfig(build=build))
    trace = calibration.traffic.trace(seed, load)
    workload = trace_workload(trace) if clients is None else clients_workload(trace, max(1, round(clients * load)))
    return Scenario("whatif", "the twin of a recording", (Segment(1.0, build, flags, workload),),
                    restart_down_seconds=0.0, cost=cost, residency=calibration.residency,
                    admission=calibration.admission)


def run_twin(calibration: Calibration, seed: int, change: Change | None = None,
             clients: int | None = None) -> SimResult:
    """One seed of the twin over the recording's window, with ``change`` or without."""
    spec = _scenario(calibration, seed, change, clients)
    return simulate_scenario(spec, duration_seconds=max(calibration.window_seconds, 1.0), seed=seed,
                             scrape_interval_seconds=calibration.scrape_interval_seconds,
                             profile=calibration.sim_profile)


def simulate_twin(calibration: Calibration, seed: int, change: Change | None = None,
                  clients: int | None = None) -> WindowFigures:
    """One seed of the twin (with ``change`` or without), measured on the recording's edges."""
    return twin_figures(calibration, run_twin(calibration, seed, change, clients))


def twin_figures(calibration: Calibration, result: SimResult) -> WindowFigures:
    """A twin run measured like the recording: on its edges, and in llama.cpp's words for a llama.cpp twin."""
    recording = as_llamacpp(result.recording) if record(calibration.engine).twin_read_as_own else result.recording
    observed = calibration.observed
    return measure(read_window(recording), observed.edges_tokens_per_second,
                   idle_at_threshold=observed.idle_at_threshold)


def _spread(values: Sequence[float]) -> Spread:
    v = np.array([x for x in values if math.isfinite(x)])
    if not v.size:
        return Spread(math.nan, math.nan, math.nan)
    return Spread(float(np.median(v)), float(v.min()), float(v.max()))


def calibration_errors(observed: WindowFigures, now: Sequence[WindowFigures]) -> dict[str, float]:
    """``twin median / observed - 1`` for each figure both have (observed > 0)."""
    out: dict[str, float] = {}
    for name in FIGURES:
        obs, sim = observed.get(name), _spread([w.get(name) for w in now]).median
        if math.isfinite(obs) and obs > 0 and math.isfinite(sim):
            out[name] = sim / obs - 1.0
    return out


def _buckets(observed: WindowFigures, now: Sequence[WindowFigures],
             after: Sequence[WindowFigures]) -> tuple[BucketPrediction, ...]:
    out = []
    for i, row in enumerate(observed.buckets):
        def pick(runs: Sequence[WindowFigures], attr: str) -> Spread:
            return _spread([getattr(w.buckets[i], attr) for w in runs if i < len(w.buckets)])
        out.append(BucketPrediction(row.bucket, row.per_stream_tokens_per_second, pick(now, "per_stream_tokens_per_second"),
                                    pick(after, "per_stream_tokens_per_second"), row.ttft_p90_seconds,
                                    pick(now, "ttft_p90_seconds"), pick(after, "ttft_p90_seconds"),
                                    row.itl_p99_seconds, pick(after, "itl_p99_seconds"), pick(now, "samples"),
                                    pick(after, "samples")))
    return tuple(out)


def predict_figures(observed: WindowFigures, now: Sequence[WindowFigures],
                    after: Sequence[WindowFigures]) -> tuple[FigurePrediction, ...]:
    """Per figure: observed, twin before and after, and the prediction (observed x after/before per seed)."""
    out = []
    for name in FIGURES:
        obs = observed.get(name)
        before = [w.get(name) for w in now]
        later = [w.get(name) for w in after]
        if math.isfinite(obs):
            ratios = [a / b for a, b in zip(later, before) if math.isfinite(a) and math.isfinite(b) and b > 0]
            predicted, basis = _spread([obs * r for r in ratios]), "observed x twin after/before"
        else:
            predicted, basis = _spread(later), "twin only (the recording has no such figure)"
        out.append(FigurePrediction(name, obs, _spread(before), _spread(later), predicted, basis))
    return tuple(out)


def observe(recording: Recording, instance: str | None) -> tuple[CensusReport, WindowFigures, ShapeRead]:
    """The recording's census, its figures on its own edges, and the census's read of its window."""
    endpoint = choose_endpoint(recording, instance)
    source = recording.source or "recording"
    read = read_shape(endpoint, recording.families, source)
    report = census_endpoint(endpoint, recording.families, source, CensusOptions())
    return report, measure(read), read


def length_histograms(recording: Recording, read: ShapeRead, instance: str | None,
                      ) -> tuple[tuple[tuple[float, float], ...], tuple[tuple[float, float], ...]]:
    """The window's prompt and output length histograms (vLLM's), as ``(upper bound, count)`` per bucket."""
    endpoint = choose_endpoint(recording, instance)
    out = []
    for name in PROMPT_LENGTHS, OUTPUT_LENGTHS:
        per_bound: dict[float, float] = {}
        for key in endpoint.select(name + "_bucket"):
            values, present = endpoint.column(key)
            window = values[read.rows][present[read.rows]]
            le = key.label("le")
            if window.size >= 2 and le is not None:
                bound = float(le.replace("Inf", "inf"))
                per_bound[bound] = per_bound.get(bound, 0.0) + float(max(window[-1] - window[0], 0.0))
        cumulative = sorted(per_bound.items())
        buckets = tuple((b, c - (cumulative[i - 1][1] if i else 0.0)) for i, (b, c) in enumerate(cumulative))
        out.append(buckets if sum(c for _, c in buckets) > 0 else ())
    return out[0], out[1]


def config_labels(recording: Recording, instance: str | None) -> dict[str, str]:
    """vLLM's ``vllm:cache_config_info`` labels (every CacheConfig field: block_size, num_gpu_blocks, ...)."""
    endpoint = choose_endpoint(recording, instance)
    out: dict[str, str] = {}
    for key in endpoint.select(CACHE_CONFIG_INFO):
        out |= {k: v for k, v in key.labels if k not in ("__name__", "instance", "job") and v not in ("", "None")}
    return out


def completed_tokens(recording: Recording, read: ShapeRead, instance: str | None) -> np.ndarray | None:
    """llama.cpp: per interval, the tokens of requests that ended (``tokens_predicted_total`` moves only then)."""
    endpoint = choose_endpoint(recording, instance)
    keys = endpoint.select(TOKENS_PREDICTED)
    if not keys:
        return None
    values, present = endpoint.column(keys[0])
    return increases(np.where(present, values, np.nan)[read.rows], endpoint.timestamps[read.rows])


class CalibratedTwin:
    """One recording calibrated once: its census, its figures, the twin fitted to it, the twin's runs unchanged.

    Every prediction on the recording (``what_if``; the census's twin check, one per
    recommendation) shares the calibration and the twin's ``seeds`` runs without the change (run
    on the first prediction that needs them): only the changed runs are per prediction.
    """

    def __init__(self, recording: Recording, *, argv: Sequence[str] = (), instance: str | None = None,
                 seeds: int = DEFAULT_SEEDS, mean_prompt_tokens: float | None = None) -> None:
        if seeds < 1:
            raise UsageError(f"--seeds must be at least 1, got {seeds}")
        self.source, self.seeds = recording.source or "recording", seeds
        self.report, self.observed, self.read = observe(recording, instance)
        endpoint = choose_endpoint(recording, instance)
        self.calibration = calibrate(self.read, self.report, self.observed, argv, mean_prompt_tokens,
                                     completed_tokens(recording, self.read, instance),
                                     length_histograms(recording, self.read, instance),
                                     config_labels(recording, instance), length_pairs(endpoint, self.read.rows),
                                     ttft_sums(endpoint, self.read.rows),
                                     finished_requests(endpoint, self.read.rows))
        self._now: dict[int | None, list[WindowFigures]] = {}

    @property
    def now(self) -> list[WindowFigures]:
        """The twin over the recording's window without a change, once per seed (run on first use)."""
        return self.now_as(None)

    def now_as(self, clients: int | None) -> list[WindowFigures]:
        """:attr:`now`, replaying the recorded arrivals (None) or as ``clients`` closed-loop clients."""
        if clients not in self._now:
            self._now[clients] = [simulate_twin(self.calibration, seed, None, clients) for seed in range(self.seeds)]
        return self._now[clients]

    def predict(self, sets: Sequence[str], bound: float = DEFAULT_BOUND) -> WhatIfResult:
        """The calibration error, and the change predicted (or refused beyond ``bound``)."""
        calibration, observed, read, seeds = self.calibration, self.observed, self.read, self.seeds
        settings = parse_knobs(sets, calibration.engine)
        if not settings:
            raise UsageError("give at least one --set KNOB=VALUE")
        change = to_change(settings, calibration)
        _scenario(calibration, 0, change)  # refuses a bad value before any simulation runs
        loop = closed_population(read)
        clients = clients_for(loop, observed, settings)
        now = self.now_as(clients)
        errors = calibration_errors(observed, now)
        worst = {k: v for k, v in errors.items() if k in BOUNDED and abs(v) > bound}
        refused: str | None = None
        if worst:
            refused = ("calibration error beyond the bound of {:.0%}: ".format(bound)
                       + ", ".join(f"{k} {v:+.0%}" for k, v in worst.items())
                       + "; the twin does not reproduce this recording, so it predicts nothing about a change")
        after = [] if refused else [simulate_twin(calibration, seed, change, clients) for seed in range(seeds)]
        figures = withhold_batch_figures(calibration, after, predict_figures(observed, now, after)) if not refused else ()
        withheld = any(f.withheld for f in figures)  # the buckets are per-stream decode too
        buckets = _buckets(observed, now, after) if not refused and not withheld else ()
        return WhatIfResult(self.source, calibration, tuple(settings), change.flags,
                            change.ubatch_tokens, change.load, seeds, bound, errors, refused, figures, buckets,
                            ((clients_note(loop, clients),) if clients is not None else ())
                            + extrapolation_warnings(calibration, after) + closed_loop_warning(loop, refused, clients)
                            + preemption_gap_warning(read, refused),
                            () if refused else chunk_remarks(calibration, change))


def what_if(recording: Recording, sets: Sequence[str], *, argv: Sequence[str] = (), instance: str | None = None,
            seeds: int = DEFAULT_SEEDS, bound: float = DEFAULT_BOUND,
            mean_prompt_tokens: float | None = None) -> WhatIfResult:
    """Calibrate, report the calibration error, and predict the change (or refuse beyond ``bound``)."""
    twin = CalibratedTwin(recording, argv=argv, instance=instance, seeds=seeds, mean_prompt_tokens=mean_prompt_tokens)
    return twin.predict(sets, bound)


def chunk_remarks(calibration: Calibration, change: Change) -> tuple[str, ...]:
    """Why a chunk change moves the per-stream means so little: which prompts it cuts, and the per-token price.

    A decoder beside a chunk of ``c`` tokens waits ``base + c x per-token`` for one token; a prompt of ``P``
    tokens costs the decoders ``P x per-token`` of extra time whatever ``c`` (``P / c`` steps of it), so under
    the twin's per-token prefill price a smaller chunk changes the longest wait, not the mean loss, and only
    for prompts longer than the chunk.
    """
    old, new = calibration.flags.get("--busy-prefill-chunk", ""), change.flags.get("--busy-prefill-chunk", "")
    if not (old.isdigit() and new.isdigit()) or old == new:
        return ()
    cut = min(int(old), int(new))
    prompts = [r.prompt_tokens for r in calibration.traffic.trace(0, change.load)]
    work = float(sum(prompts))
    longer = [p for p in prompts if p > cut]
    if not longer:
        return (f"the chunk beside decoders {old} -> {new} tokens cuts no prompt: none of the twin's {len(prompts)} "
                f"prompts (seed 0) is longer than {cut} tokens, so x1.00 is the twin's answer, not a mapping fault",)
    price = calibration.costs.per_prefill_token_seconds
    return (f"the chunk beside decoders {old} -> {new} tokens: {len(longer)} of the twin's {len(prompts)} prompts "
            f"(seed 0), {sum(longer) / work:.0%} of the prompt work, are longer than {cut} tokens and change steps; the "
            f"twin prices prefill per token ({price * 1e6:.3g} us), so a prompt costs the decoders the same time however "
            "it is chunked: the per-stream means move little; each stall is shorter and there are more of them "
            "(the longest gap shrinks, ITL p99 beside prefill may rise)",)


def preemption_gap_warning(read: ShapeRead, refused: str | None) -> tuple[str, ...]:
    """Where preemptions were counted: the twin's inter-token figures leave a resumed stream's wait out."""
    pre = read.signals.increase(Signal.PREEMPTIONS)
    if refused or pre is None or not float(np.nansum(pre)) > 0:
        return ()
    return (f"{float(np.nansum(pre)):.0f} preemptions in the window: the twin preempts by recompute, but its "
            "inter-token histogram observes each token's step, not a resumed stream's whole wait (vLLM 0.32 "
            "observes the time since that request's previous token), so the stalls are not in the twin's ITL "
            "p99 or stalled share: their predictions here are not evidence",)


def _extrapolated_batch(calibration: Calibration, after: Sequence[WindowFigures]) -> float | None:
    """The change's mean running where it lies outside the range the step costs were fitted over, else None."""
    running = _spread([w.get("running_mean") for w in after]).median
    low, high = calibration.costs.running_range
    if not (math.isfinite(running) and math.isfinite(low)):
        return None
    return None if EXTRAPOLATION_LOW * low <= running <= EXTRAPOLATION_HIGH * high else running


def extrapolation_warnings(calibration: Calibration, after: Sequence[WindowFigures]) -> tuple[str, ...]:
    """Where the change takes the batch outside the running range the step costs were fitted over."""
    costs = calibration.costs
    running = _extrapolated_batch(calibration, after)
    if running is None:
        return ()
    low, high = costs.running_range
    if not costs.per_row_identified:
        return (f"extrapolated: the change runs about {running:.0f} sequences, the recording {low:.0f}-{high:.0f}; "
                "running barely varied there, so how a step grows with the batch is unknown: the per-stream decode, "
                "decode throughput and ITL figures are withheld (a twin holding the step flat would predict them "
                "unchanged by the batch)",)
    return (f"extrapolated: the change runs about {running:.0f} sequences, the recording {low:.0f}-{high:.0f}; "
            f"the per-row cost ({costs.per_row_seconds * 1e6:.3g} us) was fitted over that range only: the "
            "per-stream decode and ITL predicted here may leave out the batch's own cost",)


def withhold_batch_figures(calibration: Calibration, after: Sequence[WindowFigures],
                           figures: tuple[FigurePrediction, ...]) -> tuple[FigurePrediction, ...]:
    """Where the batch leaves the fitted range and no per-row cost was identified, the figures a step's growth
    with the batch moves are withheld (predicted NaN, the reason in ``basis``): the twin held the step flat."""
    if calibration.costs.per_row_identified or _extrapolated_batch(calibration, after) is None:
        return figures
    nan = Spread(math.nan, math.nan, math.nan)
    why = f"{WITHHELD}: the batch leaves the fitted range and the per-row step cost is unknown"
    return tuple(replace(f, predicted=nan, basis=why) if f.name in BATCH_FIGURES else f for f in figures)
