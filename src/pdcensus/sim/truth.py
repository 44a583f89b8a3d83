"""Ground truth from the engine model's own accounting, never from a scenario's name.

For every decoding sequence the engine accounts the decode time it lost to each mechanism:

- step-time sharing: a decode row in a chunk step waits the chunk's whole time beyond a
  decode-only step of the same batch (chunk tokens, snapshot writes, a stager stall);
- eviction (residency): the expert-miss part of every step, which exists only because a
  prefill's arena loan evicted hot experts that the heat engine has not yet re-promoted;
- preemption stall: the time a preempted sequence is stopped and re-prefilling from token 0,
  until it emits its next token.

The decoders' decode time is the sum over steps of (decoders x step time) plus the stalls.
:data:`RULE` is the verdict rule, stated in words in every truth.json.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdcensus.mechanism import DOMINANT_SHARE, MATERIAL_SHARE, Mechanism

CAUSES: tuple[Mechanism, ...] = (Mechanism.STEP_TIME_SHARING, Mechanism.EVICTION, Mechanism.PREEMPTION_STALL)
ALLOWED_SHARE_OF_DECODE = 0.005
MIN_MEAN_DECODERS = 0.5

# "Found": the mechanism cost decoders measurable time (>= this share of their decode time) and,
# while it acted, decoders ran well below their undisturbed speed (sharing: a collapse, not
# chunking overhead; eviction: a tail >= 10 % slower). A preemption stall is found when the model
# preempted anything: a stopped sequence makes no progress at all while it waits.
MEASURABLE_SHARE_OF_DECODE = ALLOWED_SHARE_OF_DECODE
FOUND_DEPTH = {Mechanism.STEP_TIME_SHARING: 0.85, Mechanism.EVICTION: 0.9}

RULE = (
    "a mechanism is FOUND when the model caused it and it cost decoders measurable time while acting: "
    ">= 0.5% of the decoders' decode time, and (sharing) decoders in chunk steps ran below 0.85 of a "
    "decode-only step's speed or (eviction) below 0.9 of it while evicted, or (preemption) a sequence "
    "was preempted; a found mechanism is MATERIAL at >= 5% of the decoders' decode time, else minor; "
    "mechanism = 'none' if nothing is found, 'mixed' if two or more material ones each hold >= 25% of "
    "all lost time, else the found one that cost most; 'inconclusive' when a perfect census could not "
    "decide: fewer than 0.5 decoders on average, or no chunk step ever ran beside decoders (no busy bucket)"
)


@dataclass
class LossLedger:
    """Lost decode time per mechanism and the model's own step means, for one engine process."""

    start_seconds: float
    end_seconds: float = 0.0
    decode_seconds: float = 0.0
    sharing_seconds: float = 0.0
    eviction_seconds: float = 0.0
    preemption_seconds: float = 0.0
    chunk_steps: int = 0
    chunk_steps_beside_decoders: int = 0
    chunk_step_seconds: float = 0.0
    decode_steps: int = 0
    decode_step_seconds: float = 0.0
    held_steps: int = 0
    prefill_tokens: int = 0
    cut_tokens: int = 0
    preemptions: int = 0
    # decoders' time in steps where each mechanism acted (its depth = 1 - loss / this)
    sharing_active_seconds: float = 0.0
    eviction_active_seconds: float = 0.0

    def record_steps(
        self, decoders: int, steps: int, step_seconds: float, chunk_extra_seconds: float,
        miss_seconds: float, is_chunk: bool, held: bool, prefill_tokens: int,
    ) -> None:
        """Account ``steps`` identical steps."""
        if is_chunk:
            self.chunk_steps += steps
            self.chunk_step_seconds += steps * step_seconds
            if decoders:
                self.chunk_steps_beside_decoders += steps
            self.prefill_tokens += steps * prefill_tokens
        else:
            self.decode_steps += steps
            self.decode_step_seconds += steps * step_seconds
            if held:
                self.held_steps += steps
        if decoders:
            self.decode_seconds += decoders * steps * step_seconds
            self.sharing_seconds += decoders * steps * chunk_extra_seconds
            self.eviction_seconds += decoders * steps * miss_seconds
            if chunk_extra_seconds > 0:
                self.sharing_active_seconds += decoders * steps * step_seconds
            if miss_seconds > 0:
                self.eviction_active_seconds += decoders * steps * step_seconds

    def record_stall(self, seconds: float) -> None:
        """A preempted sequence emitted again ``seconds`` after it was stopped."""
        self.preemption_seconds += seconds
        self.decode_seconds += seconds

    def losses(self) -> dict[Mechanism, float]:
        return {
            Mechanism.STEP_TIME_SHARING: self.sharing_seconds,
            Mechanism.EVICTION: self.eviction_seconds,
            Mechanism.PREEMPTION_STALL: self.preemption_seconds,
        }


def found_rule(share: dict[Mechanism, float], depth: dict[Mechanism, float],
               preempted: bool) -> dict[Mechanism, str]:
    """The found mechanisms and their severity ("material" / "minor"), by :data:`RULE`."""
    out: dict[Mechanism, str] = {}
    for m in CAUSES:
        if m is Mechanism.PREEMPTION_STALL:
            hit = preempted
        else:
            hit = share[m] >= MEASURABLE_SHARE_OF_DECODE and depth[m] < FOUND_DEPTH[m]
        if hit:
            out[m] = "material" if share[m] >= MATERIAL_SHARE else "minor"
    return out


def headline_rule(found: dict[Mechanism, str], share: dict[Mechanism, float]) -> Mechanism:
    """'none', the costliest found mechanism, or 'mixed' (two material ones at >= 25 % of lost time each)."""
    if not found:
        return Mechanism.NONE
    lost = sum(share[m] for m in found)  # the found mechanisms' lost time, as a share of decode time
    dominant = [m for m in found if share[m] >= MATERIAL_SHARE and share[m] >= DOMINANT_SHARE * lost]
    if len(dominant) >= 2:
        return Mechanism.MIXED
    if dominant:
        return dominant[0]
    return max(found, key=lambda m: share[m])


def judge(ledger: LossLedger) -> dict[str, object]:
    """Apply :data:`RULE` to one ledger: mechanism, found, losses, shares, depths, step means."""
    losses = ledger.losses()
    total_loss = sum(losses.values())
    decode = ledger.decode_seconds
    window = max(ledger.end_seconds - ledger.start_seconds, 1e-9)
    share = {m: (v / decode if decode > 0 else 0.0) for m, v in losses.items()}
    share_of_loss = {m: (v / total_loss if total_loss > 0 else 0.0) for m, v in losses.items()}
    active = {Mechanism.STEP_TIME_SHARING: ledger.sharing_active_seconds,
              Mechanism.EVICTION: ledger.eviction_active_seconds}
    depth = {m: (1.0 - losses[m] / a if a > 0 else 1.0) for m, a in active.items()}
    found = found_rule(share, depth, ledger.preemptions > 0 or ledger.preemption_seconds > 0)
    # truth.json's "dominant": material and DOMINANT_SHARE of ALL three causes' loss (found or not); the
    # headline's "mixed" (headline_rule, as the census's) weighs against the found mechanisms' loss only
    dominant_of_all_loss = [m for m in found if found[m] == "material" and share_of_loss[m] >= DOMINANT_SHARE]
    allowed = [m for m in CAUSES if share[m] >= ALLOWED_SHARE_OF_DECODE]
    mean_decoders = decode / window
    if mean_decoders < MIN_MEAN_DECODERS or ledger.chunk_steps_beside_decoders == 0:
        verdict = Mechanism.INCONCLUSIVE
    else:
        verdict = headline_rule(found, share)
    return {
        "mechanism": verdict.value,
        "mechanisms": sorted(m.value for m in found),
        "dominant": [m.value for m in dominant_of_all_loss],
        "allowed": [m.value for m in allowed],
        "found": [{"mechanism": m.value, "severity": sev, "loss_share": round(share[m], 6),
                   "depth": round(depth[m], 6) if m in depth else None} for m, sev in found.items()],
        "loss_seconds": {m.value: round(v, 6) for m, v in losses.items()},
        "loss_share": {m.value: round(v, 6) for m, v in share.items()},
        "loss_share_of_lost": {m.value: round(v, 6) for m, v in share_of_loss.items()},
        "decode_seconds": round(decode, 6),
        "mean_decoders": round(mean_decoders, 4),
        "decode_step_seconds": _mean(ledger.decode_step_seconds, ledger.decode_steps),
        "chunk_step_seconds": _mean(ledger.chunk_step_seconds, ledger.chunk_steps),
        "decode_steps": ledger.decode_steps,
        "chunk_steps": ledger.chunk_steps,
        "chunk_steps_beside_decoders": ledger.chunk_steps_beside_decoders,
        "held_steps": ledger.held_steps,
        "preemptions": ledger.preemptions,
        "prefill_tokens": ledger.prefill_tokens,
        "prefix_hit_cut_tokens": ledger.cut_tokens,
        "prefix_hit_cut_share": round(ledger.cut_tokens / ledger.prefill_tokens, 6) if ledger.prefill_tokens else 0.0,
    }


# The endpoint is OVER CAPACITY when, at the end of a process, the requests it took in and has not
# started (the waiting queue, preempted ones included) are more than a full batch and more than
# 5 % of all it took in: work arrived faster than the engine completed it, whatever the scrape saw.
CAPACITY_RULE = ("OVERLOADED when, at the end of a process, the requests waiting for admission are at least "
                 "max(--max-num-seqs, 5% of the requests that arrived): arrivals outran completions")
BACKLOG_SHARE = 0.05


def capacity_truth(arrived: int, finished: int, waiting_end: int, max_num_seqs: int) -> dict[str, object]:
    """The engine's own accounting of arrivals against completions, and :data:`CAPACITY_RULE` applied to it."""
    return {"overloaded": waiting_end >= max(max_num_seqs, BACKLOG_SHARE * arrived),
            "arrived": arrived, "finished": finished, "waiting_end": waiting_end, "rule": CAPACITY_RULE}


def _mean(total: float, n: int) -> float | None:
    return round(total / n, 9) if n else None
