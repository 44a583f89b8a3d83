"""The verdict, in two answers: which mechanisms the data shows, and what each one costs.

*Which* (:mod:`pdcensus.census.detect`): a mechanism is found when its signature is in the
data beyond noise, judged on its bootstrap interval, whatever it costs overall. *How
much*: each found mechanism's share of decoders' time, its depth while it acts, how often
it acts, and its effect on ITL p99; its severity is ``material`` at >= ``MATERIAL_SHARE``
(5 %) of decoders' time, else ``minor``. A share near the 5 % line is a severity boundary,
never a reason to withhold the answer.

The headline is the found mechanism that costs most, ``mixed`` when two or more are
material and each is at least ``DOMINANT_SHARE`` (25 %) of all lost time, ``none`` only
when nothing is found, and ``inconclusive`` only when the data cannot tell (an unproven
shape, too few scrapes, no idle or no busy prefill to contrast, a saturated endpoint that
counts no preemptions, or one running request with no other session).

Confidence is per found mechanism: the share of moving-block bootstrap replicates in which
its signature is found, times penalties for what the data cannot show (no ledger, a long
scrape interval, counter rates, a short window). Some readings can fake a signature whatever
the bootstrap says; a headline resting on one is capped at ``UNCONFIRMED_CAP`` (below the
confident 0.7) with what would settle it (see :mod:`pdcensus.census.verdict_caps`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pdcensus.census.bootstrap import interval
from pdcensus.census.detect import (
    COLLAPSE_RATIO,
    INFLATION_MARGIN,
    TAIL_EFFECT_MARGIN,
    SignatureTest,
    above,
    below,
    dose_signature,
    gap_signature,
    preemption_signature,
    strongest,
)
from pdcensus.census.guards import GuardReason
from pdcensus.census.headline import headline_mechanism, headline_text, severity
from pdcensus.census.model import Evidence, Found, Mechanism, Severity, Signature, Verdict
from pdcensus.census.verdict_caps import (
    MAX_CONFIDENCE,
    MEASURABLE_SHARE,
    MODEL_TOLERANCE,
    UNCONFIRMED_CAP,
    apply_caps,
    preconditions,
    quality,
)
from pdcensus.census.verdict_inputs import VerdictInputs
from pdcensus.mechanism import MATERIAL_SHARE

__all__ = ["VerdictInputs", "decide", "detect", "headline_mechanism"]

UNALIGNED_BURSTS_CONFIDENCE = 0.8  # counted preemptions that line up with no decode dip or re-prefill


@dataclass(frozen=True)
class Detection:
    """One mechanism's found signature, its per-replicate hits and its cost per replicate."""

    test: SignatureTest
    hits: np.ndarray
    loss: np.ndarray
    depth: float
    depth_interval: tuple[float, float]
    active_share: float
    itl_ratio: float


def signature_tests(x: VerdictInputs) -> list[SignatureTest | None]:
    """Every signature test the data allows, in the order a found one is preferred."""
    reps = x.lag0_effect.shape[0]
    tail_allowed = x.limits is None or x.limits.tail_allowed
    controlled_tail = x.tail_effect * x.tail_batch_ratio if x.tail_test_ran and tail_allowed else None
    lag0: np.ndarray | None = x.lag0_effect
    if x.contrast_note:
        lag0 = None  # decode "faster" while prompts are counted: the contrast does not measure interference
    counted = x.ledger_depth is not None and x.ledger_chunk_steps > 0
    if counted:
        lag0 = None  # the ledger times chunk steps beside decoders directly; the rate contrast corroborates
    return [
        below(Mechanism.STEP_TIME_SHARING, Signature.CHUNK_STEP_COLLAPSE,
              x.ledger_depth if x.ledger_chunk_steps > 0 else None, COLLAPSE_RATIO,
              "decode-only step / chunk step beside decoders (ledger)"),
        # chunk steps far shorter than a scrape, which dilute the counted steps' ratio and the rate contrast:
        # vLLM's long inter-token gaps (against spans without prefill, or by dose where none was timed)
        gap_signature(x.gaps),
        below(Mechanism.STEP_TIME_SHARING, Signature.LAG0_COLLAPSE, lag0, COLLAPSE_RATIO,
              "per-stream decode while prefill runs / idle (same scrape, lag 0)"),
        # the dose-response detects where no ledger measures chunk steps directly (counter-only engines)
        dose_signature(x.dose_stall, x.dose_depth) if not x.has_ledger else None,
        below(Mechanism.EVICTION, Signature.LAGGED_TAIL, controlled_tail, TAIL_EFFECT_MARGIN,
              "per-stream decode 2-14 min after prefill / clean, times the batch ratio (batch controlled)"),
        below(Mechanism.EVICTION, Signature.RECOVERY_SLOPE, x.recovery_effect if tail_allowed else None,
              TAIL_EFFECT_MARGIN,
              "per-stream decode soon after prefill / long after, by time since the last prefill (batch controlled)"),
        above(Mechanism.EVICTION, Signature.INFLATED_DECODE_STEPS, x.inflation_after_batch_bounded,
              INFLATION_MARGIN, "decode-only step after prefill beyond batch growth / undisturbed (ledger)"),
        preemption_signature(x.bursts, x.burst_aligned, reps),
    ]


def detect(x: VerdictInputs) -> dict[Mechanism, Detection]:
    """The found mechanisms with their cost (loss share per replicate, depth, how often)."""
    tests = signature_tests(x)
    out: dict[Mechanism, Detection] = {}
    sharing, sharing_hits = strongest(tests, Mechanism.STEP_TIME_SHARING)
    eviction, eviction_hits = strongest(tests, Mechanism.EVICTION)
    stall, stall_hits = strongest(tests, Mechanism.PREEMPTION_STALL)
    if eviction is not None and eviction_hits is not None:
        if eviction.signature is Signature.LAGGED_TAIL:
            depth, depth_iv = eviction.value / max(x.tail_batch_ratio, 1.0), eviction.value_interval
        elif eviction.signature is Signature.RECOVERY_SLOPE:
            depth, depth_iv = eviction.value, eviction.value_interval
        else:  # inflated decode-only steps: decode runs at 1/inflation of its undisturbed speed
            depth, depth_iv = 1.0 / eviction.value, (1.0 / eviction.value_interval[1], 1.0 / eviction.value_interval[0])
        out[Mechanism.EVICTION] = Detection(eviction, eviction_hits, x.eviction_loss(), depth, depth_iv,
                                            x.tail_share, x.itl_tail_ratio)
    if sharing is not None and sharing_hits is not None:
        if not x.has_ledger and Mechanism.EVICTION in out and sharing.signature is Signature.LAG0_COLLAPSE:
            # without a ledger a lag-0 collapse that a tail also explains is not claimed as sharing
            tail = out[Mechanism.EVICTION].depth
            sharing = sharing if sharing.value_interval[1] < COLLAPSE_RATIO * tail else None
        if sharing is not None:
            by_rate = sharing.signature not in (Signature.DOSE_RESPONSE, Signature.LONG_GAPS) \
                and np.isfinite(x.lag0_effect[0])
            if x.depth_from_steps and sharing.signature is Signature.CHUNK_STEP_COLLAPSE:
                by_rate = False  # counted steps: a 1 s scrape's rate mixes chunk and decode-only steps
            depth = float(x.lag0_effect[0]) if by_rate else sharing.value
            depth_iv = interval(x.lag0_effect) if by_rate else sharing.value_interval
            if not by_rate and x.depth_from_steps and np.isfinite(x.itl_depth) and x.itl_depth < 1.0:
                # what decoders felt, per token (where the histogram shows a loss at all; else the counted ratio)
                depth, depth_iv = x.itl_depth, (float("nan"), float("nan"))
            acts = x.busy_share
            if sharing.signature is Signature.LONG_GAPS and x.gaps is not None:
                if x.itl_depth_over_waits and np.isfinite(x.itl_depth):
                    depth, depth_iv = x.itl_depth, (float("nan"), float("nan"))  # over the prompts' waits
                else:
                    # the spans' pace is the diluted end: the long gaps' own (clean gap / their mean) while they act
                    depth, depth_iv = (x.gaps.clean_gap_seconds / x.gaps.mean_long_gap_seconds,
                                       (float("nan"), float("nan")))
                if np.isfinite(x.gaps.long_share):
                    acts = x.gaps.long_share  # the decoders' time in the long gaps, not in the whole spans around them
            out[Mechanism.STEP_TIME_SHARING] = Detection(sharing, sharing_hits, x.sharing_loss(), depth, depth_iv,
                                                         acts, x.itl_busy_ratio)
    if stall is not None and stall_hits is not None:
        out[Mechanism.PREEMPTION_STALL] = Detection(stall, stall_hits, x.preemption, x.preemption_depth,
                                                    (float("nan"), float("nan")), x.burst_share, x.itl_burst_ratio)
    return out


def found_record(m: Mechanism, d: Detection, confidence: float) -> Found:
    loss = float(d.loss[0])
    lo, hi = interval(d.loss)
    sev = severity(loss) if np.isfinite(loss) else Severity.MATERIAL
    near = bool(np.isfinite(lo) and np.isfinite(hi) and lo < MATERIAL_SHARE <= hi)
    return Found(m, sev, loss, (lo, hi), d.depth, d.depth_interval, d.active_share, round(confidence, 3),
                 d.test.signature, d.test.text, d.itl_ratio, near)


def _evidence(x: VerdictInputs, tests: list[SignatureTest | None]) -> list[Evidence]:
    ev: list[Evidence] = []
    if not any(t is not None and t.signature is Signature.LAG0_COLLAPSE for t in tests) and np.isfinite(x.lag0_effect[0]):
        lo, hi = interval(x.lag0_effect)
        ev.append(Evidence("lag0-effect", float(x.lag0_effect[0]), COLLAPSE_RATIO, bool(hi < COLLAPSE_RATIO),
                           f"per-stream decode while prefill runs / idle (same scrape, lag 0; corroboration, not a "
                           f"signature here): {x.lag0_effect[0]:.2f} (90% interval {lo:.2f}-{hi:.2f})"))
    for t in tests:
        if t is None:
            continue
        ev.append(Evidence(t.signature.value, t.value, t.threshold, t.found, t.text))
    if x.depth_from_steps:
        c_in, c_out = x.itl_tokens
        felt = float(x.itl_depth) if np.isfinite(x.itl_depth) else None
        ev.append(Evidence("itl-depth", felt, COLLAPSE_RATIO, bool(felt is not None and felt < COLLAPSE_RATIO),
                           "decoders' pace (tokens per second of inter-token time, vllm:inter_token_latency_seconds) in "
                           f"{x.itl_basis} ({c_in} / {c_out} tokens): "
                           + (f"{felt:.3f}" + (", the depth reported" if felt < 1.0 else
                                                 ": no slower while prefill ran, so the counted steps' ratio is reported")
                              if felt is not None else "no token on one side")
                           + "; chunk-step-collapse is the counted steps' ratio"))
    if x.depth_from_steps and np.isfinite(x.itl_chunk_depth):
        ev.append(Evidence("itl-chunk-depth", float(x.itl_chunk_depth), COLLAPSE_RATIO,
                           bool(x.itl_chunk_depth < COLLAPSE_RATIO),
                           "one chunk step's own depth (the clean pace over the mean inter-token gap beyond 3 clean "
                           f"gaps): {x.itl_chunk_depth:.3f}; the step spans also hold decode-only steps beside the "
                           "prefill, so the depth while it acts lies between this and itl-depth"))
    if x.gaps is not None and x.gaps.by_dose and np.isfinite(x.itl_depth):
        felt = float(x.itl_depth)
        ev.append(Evidence("itl-depth", felt, COLLAPSE_RATIO, bool(felt < COLLAPSE_RATIO),
                           f"decoders' pace while a chunk step acts, from {x.itl_basis}: {felt:.3f}"
                           + (f" (one chunk step's own: {x.itl_chunk_depth:.3f})" if x.itl_depth_over_waits else "")))
    if x.kv_second_tier is False:
        ev.append(Evidence("kv-second-tier", None, None, False,
                           f"the engine's cache config names no second KV tier ({x.kv_tier_basis}): a running "
                           "request's KV leaves only by preemption (recompute), so KV eviction with a lagged tail "
                           "cannot occur here"))
    if x.recovery_effect is None and x.recovery_note:
        ev.append(Evidence(Signature.RECOVERY_SLOPE.value, None, None, False, x.recovery_note))
    for m, reps in ((Mechanism.STEP_TIME_SHARING, x.sharing_loss()), (Mechanism.EVICTION, x.eviction_loss()),
                    (Mechanism.PREEMPTION_STALL, x.preemption)):
        lo, hi = interval(reps)
        value = float(reps[0])
        text = (f"{m.value}: {100 * value:.1f} % of decoders' time (90% interval {100 * lo:.1f}-{100 * hi:.1f} %)"
                if np.isfinite(value) else f"{m.value}: not measurable ({x.preemption_basis})")
        ev.append(Evidence(f"loss-share:{m.value}", value if np.isfinite(value) else None, MATERIAL_SHARE,
                           bool(np.isfinite(value) and value >= MATERIAL_SHARE), text))
    return ev


def _net_of_reprefill(x: VerdictInputs, found: list[Found], ev: list[Evidence]) -> np.ndarray:
    """Sharing's estimated loss less its re-prefill part where a material preemption stall is found.

    A preempted sequence re-prefills from token 0, in chunk steps that the decoders beside it
    ride: that chunk time is the stall's cause at work, and it goes when the stall's fix (more KV,
    fewer sequences) lands. Only the rest is a second mechanism the headline could miss. On the
    live vLLM preemption runs (bench/vllm_live.py) 76-89 % of the reconstructed prefill was
    re-prefill and no new prompt was long.
    """
    loss = x.sharing_loss()
    stall = next((f for f in found if f.mechanism is Mechanism.PREEMPTION_STALL), None)
    if stall is None or stall.severity is not Severity.MATERIAL or not 0.0 < x.reprefill_share <= 1.0:
        return loss
    net = loss * (1.0 - x.reprefill_share)
    if np.isfinite(loss[0]):
        ev.append(Evidence("reprefill-share", round(float(x.reprefill_share), 3), None, True,
                           f"{100 * x.reprefill_share:.0f} % of the prefill is re-prefill after preemptions "
                           f"(estimated from the preemption counter): of step-time-sharing's {100 * float(loss[0]):.1f} "
                           f"% of decoders' time, {100 * float(net[0]):.1f} % is not the stall's own re-prefill"))
    return net


def _limiting(x: VerdictInputs, point: Mechanism, found: list[Found]) -> tuple[GuardReason, ...]:
    """The guards' reasons that limit this verdict.

    A window still ramping (batch or KV usage growing for over a third of it) does not limit sharing found by the
    counted steps where each chunk span, against its neighbours' decode-only step, is a collapse too: the growing
    contexts lengthen both sides of that ratio, so the ramp is not in it (live vLLM: three decoders of 1,500 tokens
    fill 2 % of the cache through a 150 s window, and a collapse to 0.35 capped at 0.69). Nor sharing found by the
    long inter-token gaps: each interval's line is three of its own median gaps, which grow with the contexts. And
    per-stream decode faster while prompts are counted (the prompt counter's lumps) limits no claim that the long
    gaps make: vLLM stamps each gap at its step's engine time, so they read no rate (as ``guards.counted_limits``
    drops it where the counted steps decide; live vLLM with a prompt in every scrape: 0.69 without this).
    """
    if x.limits is None:
        return ()
    reasons = x.limits.reasons
    sharing = next((f for f in found if f.mechanism is Mechanism.STEP_TIME_SHARING), None)
    if point is not Mechanism.STEP_TIME_SHARING or sharing is None:
        return reasons
    gaps = sharing.signature is Signature.LONG_GAPS
    ramp_free = gaps
    if sharing.signature is Signature.CHUNK_STEP_COLLAPSE and x.ledger_depth_local is not None \
            and np.isfinite(x.ledger_depth_local[0]):
        _, hi = interval(x.ledger_depth_local)
        ramp_free = bool(np.isfinite(hi) and hi < COLLAPSE_RATIO)
    dropped = {GuardReason.STILL_RAMPING} if ramp_free else set()
    if gaps:
        dropped.add(GuardReason.CONTRAST_ABOVE_ONE)
    return tuple(r for r in reasons if r not in dropped)


def decide(x: VerdictInputs) -> Verdict:
    """The verdict: found mechanisms with their cost, the headline, confidence, what would settle it."""
    ev, settle, contrast_only = preconditions(x)
    tests = signature_tests(x)
    capped = False
    if settle:
        detections = detect(x) if x.shape_proven and not x.single_session else {}
        if not contrast_only:  # preemptions are counted, not estimated: found even where nothing else can run
            detections = {m: d for m, d in detections.items() if m is Mechanism.PREEMPTION_STALL}
        # without the contrast, a signature that costs under the measurable line supports no 'none' either
        detections = {m: d for m, d in detections.items()
                      if m is Mechanism.PREEMPTION_STALL or not float(d.loss[0]) < MEASURABLE_SHARE}
        if not detections:
            v = Verdict(Mechanism.INCONCLUSIVE, (), 0.0, tuple(ev), tuple(settle), withheld=x.withheld)
            return replace(v, headline=headline_text(v, x))
        capped = True
        settle.append("the bucket contrast could not run: what is found here rests on the signatures that need none"
                      if contrast_only else "only the preemption stall could be tested here")
    else:
        detections = detect(x)
    if x.kv_second_tier is False and Mechanism.EVICTION in detections:
        # the engine names no tier to evict a running request's KV into (pdcensus.census.kv_tier): the
        # signature's slowdown is real time lost, but eviction is not its cause here
        d = detections.pop(Mechanism.EVICTION)
        settle.append(f"eviction's signature is in the data ({d.test.text}), but the engine's cache config rules KV "
                      f"eviction out ({x.kv_tier_basis}): the slower decode-only steps after prefill have another "
                      "cause here (longer contexts after re-admission, a busier host); not counted as found")
    stall = detections.get(Mechanism.PREEMPTION_STALL)
    shared = detections.get(Mechanism.STEP_TIME_SHARING)
    if stall is not None and shared is not None and 0.0 < x.reprefill_share <= 1.0 \
            and severity(float(stall.loss[0])) is Severity.MATERIAL:
        # the chunk steps are mostly the stall's own re-prefill: that part of the time is the stall's cost
        detections[Mechanism.STEP_TIME_SHARING] = replace(shared, loss=shared.loss * (1.0 - x.reprefill_share))
    ev += _evidence(x, tests)
    factor, notes = quality(x)
    settle += notes
    found: list[Found] = []
    near_floor = False
    below_floor: set[Mechanism] = set()
    for m, d in detections.items():
        loss = float(d.loss[0])
        if m is not Mechanism.PREEMPTION_STALL and np.isfinite(loss):
            near_floor |= (1 - MODEL_TOLERANCE) * MEASURABLE_SHARE <= loss < (1 + MODEL_TOLERANCE) * MEASURABLE_SHARE
            if loss < MEASURABLE_SHARE:
                settle.append(f"{m.value}'s signature is in the data ({d.test.text}) but it costs {100 * loss:.2f} % "
                              f"of decoders' time, under the {100 * MEASURABLE_SHARE:.1f} % a census can tell from "
                              "noise: not counted as found")
                below_floor.add(m)
                continue
        base = d.test.confidence
        if m is Mechanism.PREEMPTION_STALL:
            base = MAX_CONFIDENCE if x.burst_aligned else UNALIGNED_BURSTS_CONFIDENCE
        found.append(found_record(m, d, min(MAX_CONFIDENCE, base * factor)))
    losses = {f.mechanism: f.loss_share for f in found}
    point = headline_mechanism(losses)
    if point is Mechanism.NONE:
        ruled_out = {Mechanism.EVICTION} if x.kv_second_tier is False else set()
        tested = [t for t in tests if t is not None and t.mechanism not in below_floor | ruled_out]
        clear = np.logical_and.reduce([~t.hits for t in tested]) if tested else np.ones(1, bool)
        confidence = float(np.mean(clear[1:])) if clear.size > 1 else 1.0
        confidence = min(MAX_CONFIDENCE, confidence * factor)
        close = [t for t in tested if t.confidence >= 0.2]
        if close:
            settle.insert(0, "leaning 'none', but " + "; ".join(
                f"{t.signature.value} ({t.mechanism.value}) is past its threshold in {100 * t.confidence:.0f} % of "
                "replicates" for t in close) + ": a longer window would narrow the intervals")
    elif point is Mechanism.MIXED:
        confidence = min(f.confidence for f in found if f.severity is Severity.MATERIAL)
    else:
        confidence = next(f.confidence for f in found if f.mechanism is point)
    estimates = {Mechanism.STEP_TIME_SHARING: _net_of_reprefill(x, found, ev), Mechanism.EVICTION: x.eviction_loss()}
    if x.kv_second_tier is False:
        estimates.pop(Mechanism.EVICTION)  # ruled out by the engine's cache config, not unfound
    confidence, found, more = apply_caps(x, point, found, confidence, estimates)
    settle += more
    # a signature found but costing under the measurable line: "none" is then a judgement of cost, and the
    # loss shares' model error (a decoder's part of a chunk step it does not ride in) can be a factor 2
    if capped or near_floor or (point is Mechanism.NONE and below_floor):
        confidence = min(confidence, UNCONFIRMED_CAP)
    reasons = _limiting(x, point, found)
    if x.limits is not None and reasons:
        confidence = min(confidence, x.limits.max_confidence)
        settle += [f"{r.value}: no claim here reaches 0.7" for r in reasons]
    ordered = tuple(sorted(found, key=lambda f: -(f.loss_share if np.isfinite(f.loss_share) else 1.0)))
    mechs = tuple(sorted((f.mechanism for f in found), key=lambda m: m.value))
    v = Verdict(point, mechs, round(confidence, 3), tuple(ev), tuple(settle) if confidence < 0.7 else (),
                ordered, "", None, x.withheld)
    return replace(v, headline=headline_text(v, x))
