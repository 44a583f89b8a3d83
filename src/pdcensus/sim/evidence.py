"""The side channels: the boot ledger, ``/stats`` and ``/diagnostics`` as the engine would answer them.

The residency half of the story (arena, expert slab, heat engine, prefill stager) has no metric
at all; it is read from these. ``boot.log`` names the prefill stager's smallest pass and the
arena and slab sizes; ``/stats`` carries per-step and per-request forensics and the step-detail
histograms; ``/diagnostics`` answers "is the box the limit" with configuration drift, the VRAM
split, per-card link chain and clocks, and findings that each carry a fix.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pdcensus.sim.config import Build
from pdcensus.sim.engine import Engine
from pdcensus.sim.hardware import GIB, MIB
from pdcensus.sim.kv import held_per_sequence
from pdcensus.sim.metrics_state import Histogram
from pdcensus.sim.scheduler import busy_budget_tokens


def _stamp(epoch_seconds: float) -> str:
    moment = datetime.fromtimestamp(epoch_seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def boot_log(engine: Engine, build: Build, epoch_seconds: float) -> str:
    """The boot ledger lines of one process start."""
    c, hw, res = engine.config, engine.hardware, engine.residency
    stamp = _stamp(epoch_seconds)
    kv = engine.kv
    slots_kind = "auto" if c.checkpoint_slots is None else "set"
    lines = [
        f"radiance {build.value} starting",
        "argv: " + " ".join(c.argv()),
        f"model {c.model}: hybrid linear-state + paged-KV, mixture of experts tiered GPU/host",
        f"vram split: weights {hw.weights_bytes / GIB:.1f} GiB, expert slab {hw.expert_slab_bytes / GIB:.1f} GiB, "
        f"activations {hw.activation_bytes / GIB:.1f} GiB, kv cache {hw.kv_bytes / GIB:.1f} GiB",
        f"kv cache: {kv.capacity_blocks} blocks x {kv.block_size} tokens = {kv.capacity_tokens} tokens",
        f"expert slab: {res.params.slab_experts} experts resident (hot set {res.params.hot_experts}, "
        f"headroom {res.params.headroom_experts})",
        f"prefill arena: {res.arena_experts} experts for a {c.max_num_batched_tokens}-token step budget, lent by "
        f"the expert slab to each prefill longer than one checkpoint interval (evicts {res.evicts_on_loan} hot experts)",
        f"prefill stager: smallest pass {hw.stager_min_pass_tokens} tokens (a chunk below it reads pooled experts "
        "synchronously in every routed layer)",
        f"heat engine: re-promotes one expert per {res.params.promote_seconds:g} s of decode heat",
        f"scheduler: max-num-seqs {c.max_num_seqs}, step budget {c.max_num_batched_tokens} tokens, busy chunk "
        f"{'auto' if c.busy_prefill_chunk is None else c.busy_prefill_chunk} (budget {busy_budget_tokens(c)}), "
        f"prefill span {c.prefill_span}, speculative tokens {c.speculative_tokens}",
        f"checkpoints: interval {c.checkpoint_interval} tokens, policy {c.checkpoint_policy.value}, held() "
        f"{held_per_sequence(c.checkpoint_policy, c.max_model_len, c.checkpoint_interval)}, slots "
        f"{engine.checkpoints.slots} ({slots_kind}), {hw.checkpoint_bytes // MIB} MiB each in pinned host RAM",
        f"listening on 127.0.0.1:{c.port} (/v1, /metrics, /stats, /diagnostics)",
    ]
    return "".join(f"{stamp} INFO {line}\n" for line in lines)


def _histogram(h: Histogram) -> dict[str, Any]:
    return {"bounds": list(h.bounds), "cumulative_counts": h.cumulative(), "sum": h.total, "count": h.count}


def stats(engine: Engine, t: float, epoch_offset: float) -> dict[str, Any]:
    """What ``GET /stats`` answers at engine time ``t``."""
    m = engine.metrics
    steps = [
        {
            "start": round(epoch_offset + start, 6), "steps": n, "step_seconds": round(run.step_seconds, 6),
            "decode_rows": run.decode_rows, "prefill_tokens": run.prefill_tokens, "held": run.held,
            "missing_experts": run.missing_experts, "snapshot_writes": run.snapshot_writes,
            "below_stager_pass": run.below_stager_pass,
        }
        for start, n, run in engine.recent_steps
    ]
    requests = [  # recent_requests holds mixed values (typed object); arrival_seconds is always a float
        {**r, "arrival_seconds": round(epoch_offset + float(r["arrival_seconds"]), 6)}  # type: ignore[arg-type]
        for r in engine.recent_requests
    ]
    return {
        "time": round(epoch_offset + t, 3),
        "counters": m.counters(),
        "gauges": engine.gauges(t),
        "recent_steps": steps,
        "recent_requests": requests,
        "step_detail_histograms": {
            "radiance:prefill_steps_duration": _histogram(m.prefill_step_seconds),
            "radiance:prefill_step_tokens": _histogram(m.prefill_step_tokens),
            "radiance:token_queue_wait": _histogram(m.queue_wait),
        },
        "residency": engine.residency.state(),
        "kv_cache": {
            "capacity_blocks": engine.kv.capacity_blocks,
            "block_size": engine.kv.block_size,
            "used_tokens": engine.kv.used_tokens(engine.decode_index, len(engine.decoders), engine.tokens_per_step),
        },
        "checkpoints": engine.checkpoints.state(),
        "scheduler": {"held_remaining": engine.held_remaining, "decode_index": engine.decode_index},
    }


def diagnostics(engine: Engine, build: Build, epoch_seconds: float) -> dict[str, Any]:
    """What ``GET /diagnostics`` answers: drift, VRAM split, cards, findings with fixes."""
    c, hw, res = engine.config, engine.hardware, engine.residency
    findings: list[dict[str, str]] = []
    drift: list[dict[str, str]] = []
    if c.prefill_interleave and not build.honours_interleave:
        drift.append({"flag": "--prefill-interleave", "argv": str(c.prefill_interleave), "effective": "0"})
        findings.append({
            "id": "flag-not-implemented", "severity": "warning",
            "what": f"--prefill-interleave {c.prefill_interleave} is in argv but build {build.value} holds no step",
            "fix": "run a 1.8.x build, then check that radiance:engine_steps_held_total leaves zero",
        })
    if res.evicts_on_loan > 0:
        fits = int(res.params.headroom_experts / res.params.arena_experts_per_token)
        findings.append({
            "id": "arena-evicts-experts", "severity": "warning",
            "what": f"the {res.arena_experts}-expert prefill arena evicts {res.evicts_on_loan} hot experts per "
                    f"large prefill; the heat engine needs ~{res.evicts_on_loan * res.params.promote_seconds:.0f} s "
                    "of decode to re-promote them",
            "fix": f"keep --max-num-batched-tokens <= {fits} (drop --prefill-span) so the arena fits the slab headroom",
        })
    if c.busy_prefill_chunk is not None and c.busy_prefill_chunk < hw.stager_min_pass_tokens:
        findings.append({
            "id": "chunk-below-stager-pass", "severity": "error",
            "what": f"--busy-prefill-chunk {c.busy_prefill_chunk} is below the prefill stager's smallest pass "
                    f"({hw.stager_min_pass_tokens} tokens): every routed layer reads pooled experts synchronously",
            "fix": f"--busy-prefill-chunk auto (or >= {hw.stager_min_pass_tokens})",
        })
    if engine.metrics.preemptions > 0:
        findings.append({
            "id": "kv-preemptions", "severity": "warning",
            "what": f"{int(engine.metrics.preemptions)} preemptions by recompute since start (KV cache "
                    f"{engine.kv.capacity_tokens} tokens)",
            "fix": "lower --max-num-seqs or give the KV cache more blocks",
        })
    cards = [
        {
            "index": card.index, "name": card.name, "link_chain": list(card.link_chain),
            "link": f"gen{card.link_generation} x{card.link_width}", "link_width_expected": card.link_width_expected,
            "sm_clock_mhz": card.sm_clock_mhz, "sm_clock_max_mhz": card.sm_clock_max_mhz,
            "memory_clock_mhz": card.memory_clock_mhz,
        }
        for card in hw.cards
    ]
    for card in hw.cards:
        if card.link_width < card.link_width_expected:
            findings.append({
                "id": "link-degraded", "severity": "error",
                "what": f"card {card.index} link runs x{card.link_width}, expected x{card.link_width_expected}",
                "fix": "reseat the card or move it off the shared switch",
            })
    return {
        "time": round(epoch_seconds, 3),
        "build": build.value,
        "configuration_drift": drift,
        "vram": hw.vram_split(),
        "host_ram_bytes": hw.host_ram_bytes,
        "cards": cards,
        "residency": res.state(),
        "findings": findings,
        "box_is_the_limit": any(f["id"] == "link-degraded" for f in findings),
    }
