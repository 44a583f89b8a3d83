"""The runbook's steps as a checklist: which ran on this engine's metrics, and why not the rest.

Every engine carries a different part of what the runbook reads. radiance 1.8 carries all of
it; TGI has the full step ledger but no TTFT histogram and no preemption counter; SGLang has
a partial ledger (no count of chunk steps); vLLM and llama.cpp have no step time at all. A
report that only says "inconclusive" or "confidence 0.61" hides which step was missing, so
:func:`runbook_passes` lists each step (shape, ledger, buckets, lag, TTFT, preemption, traps)
with ``ran``, the factor its absence or limit applied to the verdict's confidence (the same
constants :mod:`pdcensus.census.verdict` applies), and the reason in the engine's own terms.
It reads finished pass results only: it computes no figure of its own.
"""

from __future__ import annotations

import math

from pdcensus.census.model import (
    BucketTable,
    LagResult,
    LedgerResult,
    PassRecord,
    PreemptionResult,
    ShapeResult,
    TtftResult,
)
from pdcensus.census.verdict_caps import (
    COUNTER_RATES_FACTOR,
    NO_LEDGER_FACTOR,
    NO_TAIL_TEST_FACTOR,
    SATURATED_SHARE,
)
from pdcensus.census.verdict_inputs import VerdictInputs
from pdcensus.engines import record
from pdcensus.series.profiles import LedgerQuantity, Profile, Signal, ledger_spec

PASS_NAMES = ("shape", "ledger", "buckets", "lag", "ttft", "preemption", "traps")


def _ledger_pass(ledger: LedgerResult, profile: Profile) -> PassRecord:
    spec = ledger_spec(profile)
    if ledger.available and ledger.partial:
        return PassRecord("ledger", True, 1.0, ledger.reason)
    if ledger.available and record(profile.engine).counted_step_ledger:
        return PassRecord("ledger", True, 1.0, "counted step ledger (pdcensus.series.vllm_steps): steps from "
                                              "vllm:iteration_tokens_total_count, step time from the busy scrapes' wall "
                                              "time, decode-only steps in step spans without prefill; no held-step counter")
    if ledger.available:
        held = ("held steps" if LedgerQuantity.HELD_STEPS in spec.terms else
                "no held-step counter (nothing like --prefill-interleave is counted)")
        return PassRecord("ledger", True, 1.0, f"full step ledger ({spec.source}): decode-only step, chunk "
                                              f"step, chunk shares; {held}")
    missing = spec.missing
    why = "; ".join(f"{q.value}: {text}" for q, text in missing.items() if q is not LedgerQuantity.HELD_STEPS)
    reason = f"{profile.name}: {why}" if why else ledger.reason
    return PassRecord("ledger", False, NO_LEDGER_FACTOR,
                      f"{reason}; without it sharing cannot be told from residency by step times")


def _preemption_pass(pre: PreemptionResult, profile: Profile, inputs: VerdictInputs) -> PassRecord:
    if not pre.available:
        saturated = math.isfinite(inputs.saturated_share) and inputs.saturated_share >= SATURATED_SHARE
        effect = ("; the queue never drains, so the verdict is inconclusive" if saturated else
                  "; a preemption stall cannot be found here, only left unexplained")
        return PassRecord("preemption", False, 1.0,
                          f"{profile.name} exports no preemption counter{effect}")
    if inputs.bursts and not math.isfinite(float(inputs.preemption[0])):
        return PassRecord("preemption", True, 1.0,
                          f"{pre.total:.0f} preemptions counted, stalled time {inputs.preemption_basis}; "
                          "the verdict is inconclusive")
    name = profile.name_of(Signal.PREEMPTIONS) or "preemption counter"
    return PassRecord("preemption", True, 1.0,
                      f"bursts in {name}; stalled time from {inputs.preemption_basis}")


def runbook_passes(
    profile: Profile,
    shape: ShapeResult,
    ledger: LedgerResult,
    buckets: BucketTable | None,
    lag: LagResult,
    ttft: TtftResult,
    preemption: PreemptionResult,
    inputs: VerdictInputs,
) -> tuple[PassRecord, ...]:
    """The runbook's steps in order, each with ran / confidence factor / reason."""
    shape_pass = PassRecord("shape", shape.proven, 1.0, shape.reason if shape.proven else
                            f"{shape.reason}; an unproven shape makes the verdict inconclusive")
    if buckets is None:
        bucket_pass = PassRecord("buckets", False, 1.0, "no decode/prefill signal")
    elif inputs.rates_from_counters:
        bucket_pass = PassRecord("buckets", True, COUNTER_RATES_FACTOR,
                                 f"{profile.name} has no same-scrape rate gauges: decode and prefill are "
                                 "counter increases over each scrape interval (interval means)")
    else:
        bucket_pass = PassRecord("buckets", True, 1.0, "decode by prefill from the same scrape (gauges)")
    lag_pass = PassRecord("lag", lag.available, 1.0, lag.reason)
    if math.isnan(float(inputs.tail_effect[0])):
        if inputs.inflation_after is None:
            lag_pass = PassRecord("lag", lag.available, NO_TAIL_TEST_FACTOR,
                                  f"{lag.reason}; no tail test and no ledger to stand in: eviction can be "
                                  "neither ruled in nor out")
        else:
            lag_pass = PassRecord("lag", lag.available, 1.0, f"{lag.reason}; the ledger's decode-only step "
                                  "after prefill stands in for the tail test (an eviction read from it alone "
                                  "is a leaning: confidence capped below 0.7)")
    if ttft.available:
        ttft_pass = PassRecord("ttft", True, 1.0, f"{ttft.family}: {ttft.reason}")
    else:
        ttft_pass = PassRecord("ttft", False, 1.0,
                               f"{profile.name} exports no TTFT histogram: an arriving request's wait is not "
                               "bucketed (the verdict does not rest on it)")
    traps = PassRecord("traps", True, 1.0, "named checks of the runbook's metric traps")
    return (shape_pass, _ledger_pass(ledger, profile), bucket_pass, lag_pass, ttft_pass,
            _preemption_pass(preemption, profile, inputs), traps)
