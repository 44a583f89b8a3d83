"""Advice on the engine that runs: each engine's own dial for the measured mechanism, complete and new.

:mod:`pdcensus.advice.recommend` computes radiance's arms from the step ledger; this module gives
the other engines theirs from their catalogues (:mod:`pdcensus.advice.catalogue`):

- step-time sharing: the engine's step budget (vLLM ``--max-num-batched-tokens``, SGLang
  ``--chunked-prefill-size``, TGI ``--max-batch-prefill-tokens``) halved from the deployed value
  (on vLLM, where argv lacks it: a readable ``--config`` YAML, else vLLM 0.32's own default, cited and
  said to be the default: :mod:`pdcensus.engines.vllm_0_32`; the rollback drops the flag).
  A decoder beside a chunk waits one step of about the budget's tokens and gets one token from it.
  The prompt's compute is the same whatever the chunk, so while a chunk step ``c`` is many
  decode-only steps ``d`` long the decoders' lost share ``1 - d/c`` hardly moves: what the budget
  moves is the longest stall, ITL p99 while prefill runs, predicted as ``1 + (r - 1) B'/B`` for a
  ratio ``r`` to idle now (the stall beyond a decode step scales with the chunk). None of these
  engines holds decode-only steps after a chunk as radiance's ``--prefill-interleave`` does; the
  structural fix is disaggregation;
- eviction: the budget halved: a chunk's activations (radiance: the arena the expert slab lends)
  scale with it;
- preemption stall: fewer running sequences (``--max-num-seqs``, ``--max-running-requests``): half
  the peak batch (or of the deployed value if lower). At the peak the KV pool is full of
  sequences about halfway through; about half as many fit at their full length.

Every recommendation is finished by :func:`with_deploy`: the complete deploy line in the engine's
spelling (:mod:`pdcensus.advice.deploy`). A value already deployed is never recommended again: the
next step on the same dial, or the dial is spent (``dial_state``) with the structural fix. Where an
engine has no knob for a mechanism, :func:`gap_recommendation` says so. Capacity advice (an endpoint over
capacity, :mod:`pdcensus.advice.capacity`) names the knobs that would only move the pain; :func:`in_engine_spelling`
names them as the engine spells them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pdcensus.advice.catalogue import engine_catalogue
from pdcensus.advice.deploy import deploy_line, same_value
from pdcensus.advice.knobs import ActsOn, Dial, Knob
from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.advice.predictions import KvHeadroomPrediction, Prediction, StepBudgetPrediction
from pdcensus.census.model import CensusReport
from pdcensus.engines import release

MIN_BUDGET_TOKENS = 512  # below this a budget halving buys little and every prompt pays per step
KV_HEADROOM_SHARE = 0.5  # of the peak batch (module docstring)
BUDGET_CUT = 2  # one halving per arm: verify it, then take the next step (module docstring)


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def plan(knob: Knob, value: str, counter_text: str) -> VerificationPlan:
    """The runbook's order (argv, counter, bucket pair), with the engine's own process and flag."""
    return VerificationPlan(argv=knob.argv_check(value), counter=counter_text, bucket_pair=knob.bucket_pair,
                            command=f"pdcensus verify-arm --before BEFORE --after AFTER --flag {knob.flag}={value} "
                                    "--cmdline CMDLINE")


def structural_fix(engine: str) -> str:
    catalogue = engine_catalogue(engine)
    split = next((k for k in catalogue.knobs if k.dial is Dial.DISAGGREGATION), None)
    return (f"prefill/decode disaggregation ({split.flag}: {split.semantics})" if split is not None
            else f"{catalogue.name} offers no prefill/decode disaggregation: separate replicas for long prompts")


def spent(mechanism: ActsOn, engine: str, knob: Knob, current: str, why: str) -> Recommendation:
    """The dial is spent: no value to deploy, the structural fix instead."""
    name = engine_catalogue(engine).name
    return Recommendation(mechanism.value, knob.flag, "", "", "", f"{knob.flag} is spent on {name} at {current}: {why}; "
                          f"the structural fix: {structural_fix(engine)}", Prediction(), cost=knob.cost,
                          preconditions=knob.preconditions, engine=engine, dial_state="spent")


def gap_recommendation(mechanism: ActsOn, engine: str) -> Recommendation | None:
    """The engine has no knob for the mechanism: say so and name the structural fix."""
    catalogue = engine_catalogue(engine)
    gap = catalogue.gap(mechanism)
    if gap is None:
        return None
    return Recommendation(mechanism.value, "", "", "", "", f"{catalogue.name} has no knob for {mechanism.value}: "
                          f"{gap.why}; the structural fix: {gap.structural_fix}", Prediction(), engine=engine,
                          dial_state="no-knob")


def recommend_budget(report: CensusReport, mechanism: ActsOn, engine: str,
                     deployed: Mapping[str, str]) -> Recommendation | None:
    """The engine's step budget, halved from the deployed value (the next step if a value is deployed)."""
    catalogue = engine_catalogue(engine)
    knob = catalogue.primary_knob(mechanism)
    if knob is None:
        return gap_recommendation(mechanism, engine)
    current = _int(deployed.get(knob.flag))
    cited = release(engine)  # the release whose defaults are cited (vLLM 0.32)
    assumed = cited.deployed_value(knob.flag, deployed, None) if current is None and cited is not None else None
    if assumed is not None and assumed.source in ("default", "config"):
        current = _int(assumed.value)
    if current is None:
        return Recommendation(
            mechanism.value, knob.flag, "N", "", "", f"{knob.flag} is the dial on {catalogue.name} ({knob.semantics}); "
            + (f"argv takes its settings from --config {deployed['--config']}, which pdcensus does not read: the "
               "deployed value is not known" if deployed.get("--config") else
               "the deployed value is not known (give the argv: --evidence, or a cmdline)")
            + f", so no next value is computed: halve the deployed {knob.flag}",
            Prediction(), cost=knob.cost, preconditions=knob.preconditions, engine=engine)
    capped = _threshold_cap(engine, deployed, current)
    why_dial = ""
    if capped is not None:  # the deployed threshold, not the budget, sizes a long prompt's chunk: it is the dial
        knob, current, why_dial = capped
        assumed = None
    if current <= MIN_BUDGET_TOKENS:
        return spent(mechanism, engine, knob, str(current), f"at {MIN_BUDGET_TOKENS} tokens or fewer a step is mostly "
                     "fixed cost, so halving again buys decoders little and every prompt pays per step" + why_dial)
    new = max(MIN_BUDGET_TOKENS, current // BUDGET_CUT)
    ratio = new / current
    predicted = StepBudgetPrediction(float(current), float(new), ratio)
    ledger = report.ledger
    chunk, decode = ledger.chunk_step_seconds, ledger.decode_step_seconds
    effect = f"a chunk beside decoders carries at most {new} tokens instead of {current}{why_dial}"
    if _finite(chunk) and _finite(decode) and chunk > decode > 0:
        chunk_new = decode + (chunk - decode) * ratio
        stretch = (chunk_new / new) / (chunk / current)
        predicted = replace(predicted, chunk_step_seconds_now=chunk, chunk_step_seconds_predicted=chunk_new,
                            per_stream_tokens_per_second_beside_prefill_now=1.0 / chunk,
                            per_stream_tokens_per_second_beside_prefill=1.0 / chunk_new, prompt_ttft_stretch=stretch)
        effect += (f": the chunk step {chunk:.3f} s -> {chunk_new:.3f} s, a decoder beside it "
                   f"{1 / chunk:.1f} -> {1 / chunk_new:.1f} tok/s; a prompt's TTFT x{stretch:.2f}")
    else:
        effect += (f": a decoder beside a long prompt waits about x{ratio:.2f} as long per token (no step ledger "
                   f"for this window on {catalogue.name}, so no seconds are predicted)")
    found = next((f for f in report.verdict.found if f.mechanism.value == mechanism.value), None)
    if mechanism is ActsOn.STEP_TIME_SHARING and found is not None and _finite(found.itl_p99_ratio):
        itl = 1.0 + (found.itl_p99_ratio - 1.0) * ratio
        predicted = replace(predicted, itl_p99_ratio_while_prefill_now=found.itl_p99_ratio,
                            itl_p99_ratio_while_prefill=itl, loss_share_now=found.loss_share)
        effect += (f"; ITL p99 while prefill runs x{found.itl_p99_ratio:.1f} -> about x{itl:.1f} of idle (the longest "
                   f"stall), while the decoders' lost share ({found.loss_share:.1%}) stays about where it is: the "
                   "prompt's compute is unchanged")
    if mechanism is ActsOn.EVICTION:
        effect += f"; the chunk's activations (what a step borrows from the rest of the device) shrink to {ratio:.0%}"
    notes: tuple[str, ...] = ()
    if assumed is not None and assumed.source in ("default", "config"):
        predicted = replace(predicted, step_tokens_now_is_default=1.0 if assumed.is_default else 0.0)
        effect += f"; from {assumed.text()}"
        notes = tuple(n for n in (cited.config_file_note(deployed) if cited is not None else "",) if n)
    return Recommendation(mechanism.value, knob.flag, str(new), "", "", f"{knob.flag} {new}: {effect}", predicted,
                          cost=knob.cost, preconditions=knob.preconditions, notes=notes,
                          verification=plan(knob, str(new), knob.counter or "argv and the bucket pair decide"),
                          engine=engine)


THRESHOLD = "--long-prefill-token-threshold"


def _threshold_cap(engine: str, deployed: Mapping[str, str], budget: int) -> tuple[Knob, int, str] | None:
    """vLLM's deployed long-prefill threshold where it is under the budget: the knob, its value and why it is the dial.

    vLLM 0.32 schedules a request with more tokens left than the threshold at most that many per step
    (``v1/core/sched/scheduler.py`` l. 708-709) whenever another request runs or waits (l. 640-649): beside
    decoders a long prompt's chunk is the threshold, and halving the budget above it changes no chunk.
    """
    knob = engine_catalogue(engine).knob(THRESHOLD)
    threshold = _int(deployed.get(THRESHOLD))
    if knob is None or threshold is None or not 0 < threshold < budget:
        return None
    return knob, threshold, (f" (the deployed {THRESHOLD} {threshold} caps a long prompt's chunk beside decoders, "
                             f"vLLM 0.32 v1/core/sched/scheduler.py l. 640-649 and 708-709: the budget {budget} above "
                             "it changes no chunk)")


def recommend_kv_headroom(report: CensusReport, engine: str, deployed: Mapping[str, str]) -> Recommendation | None:
    """Preemption stall: three quarters of the running sequences (deployed value, else the peak batch)."""
    catalogue = engine_catalogue(engine)
    knob = catalogue.primary_knob(ActsOn.PREEMPTION_STALL)
    if knob is None:
        return gap_recommendation(ActsOn.PREEMPTION_STALL, engine)
    running = [r for r in (report.timeline.running if report.timeline else ()) if math.isfinite(r)]
    peak = max(running) if running else math.nan
    current = _int(deployed.get(knob.flag))
    candidates = [x for x in (current, int(peak) if _finite(peak) else None) if x]
    base = min(candidates) if candidates else 0
    if base and base <= 2:
        return spent(ActsOn.PREEMPTION_STALL, engine, knob, str(base), "two sequences at a time cannot shrink further")
    new = max(1, int(math.floor(base * KV_HEADROOM_SHARE))) if base else 0
    value = str(new) if new else "N"
    predicted = KvHeadroomPrediction(peak, report.preemption.total,
                                     new / peak if new and _finite(peak) and peak > 0 else math.nan)
    summary = (f"{knob.flag} {value}: KV demand at the peak batch drops to {predicted.kv_demand_fraction_of_peak:.0%}: "
               "at the peak the pool is full of sequences about halfway through, so about half as many fit at their "
               "full length and none is preempted and re-prefilled from token 0; arrivals queue instead (TTFT)")
    counter = (f"the preemption counter's increase in the after window must fall to ~0 and {knob.counter} never "
               f"exceed {value}")
    return Recommendation(ActsOn.PREEMPTION_STALL.value, knob.flag, value, "", "", summary, predicted,
                          cost=knob.cost, preconditions=knob.preconditions, verification=plan(knob, value, counter),
                          engine=engine)


def with_deploy(rec: Recommendation, engine: str, deployed: Mapping[str, str]) -> Recommendation:
    """The complete line in the engine's spelling; a value already deployed becomes a note, never the line."""
    if not rec.knob or rec.value in ("", "N"):
        return replace(rec, engine=engine)
    knob = engine_catalogue(engine).knob(rec.knob)
    flag = knob.flag if knob is not None else rec.knob
    if same_value(deployed.get(flag), rec.value):
        return replace(rec, value="", env_line="", rollback_env_line="", verification=None, engine=engine,
                       dial_state="spent", summary=f"{flag} {deployed[flag]} is already deployed: " + rec.summary)
    line = deploy_line(engine, flag, rec.value, deployed)
    notes = tuple(n for n in line.notes if n not in rec.notes)
    return replace(rec, engine=engine, env_line=line.primary(), rollback_env_line=line.rollback_primary(),
                   deploy=line.to_dict(), notes=rec.notes + notes)


def merge_same_knob(recs: Sequence[Recommendation], headline: str = "") -> tuple[Recommendation, ...]:
    """One line per knob and value: a second mechanism the same arm acts on becomes a note on the one kept
    (the verdict's headline mechanism where it is one of them)."""
    out: list[Recommendation] = []
    for rec in recs:
        same = next((i for i, r in enumerate(out) if r.knob and r.knob == rec.knob and r.value == rec.value), None)
        if same is None:
            out.append(rec)
            continue
        keep, other = (rec, out[same]) if rec.mechanism == headline else (out[same], rec)
        out[same] = replace(keep, notes=keep.notes + (
            f"the same arm acts on {other.mechanism} too (found beside {keep.mechanism})",))
    return tuple(out)


# radiance knobs the capacity advice names, and the mechanism whose primary knob is each engine's own equivalent
_CAPACITY_EQUIVALENT = {"--max-num-seqs": ActsOn.PREEMPTION_STALL, "--max-num-batched-tokens": ActsOn.STEP_TIME_SHARING}


def in_engine_spelling(recs: Sequence[Recommendation], engine: str) -> tuple[Recommendation, ...]:
    """Capacity advice (:mod:`pdcensus.advice.capacity`) names knobs as radiance spells them: each note about a knob
    the engine lacks is renamed to the engine's own equivalent (``--max-num-seqs`` -> SGLang's
    ``--max-running-requests``) or dropped where it has none (``--prefill-interleave`` on vLLM)."""
    catalogue = engine_catalogue(engine)
    out = []
    for rec in recs:
        notes = []
        for note in rec.notes:
            flag = note.split(":", 1)[0]
            if not flag.startswith("--") or " " in flag or catalogue.knob(flag) is not None:
                notes.append(note)
                continue
            mechanism = _CAPACITY_EQUIVALENT.get(flag)
            own = catalogue.primary_knob(mechanism) if mechanism is not None else None
            if own is not None:
                notes.append(own.flag + note[len(flag):])
        out.append(replace(rec, notes=tuple(notes), engine=engine))
    return tuple(out)
