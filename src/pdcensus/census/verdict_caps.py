"""When the data cannot tell, what it cannot show, and readings that can fake a signature.

Three kinds of limit, each with what would settle it:

- :func:`preconditions`: the data cannot tell at all (an unproven shape, too few scrapes,
  no idle or busy prefill to contrast, a saturated endpoint that counts no preemptions, one
  running request with no other session). The verdict is ``inconclusive``; a counted
  preemption burst is still reported as found.
- :func:`quality`: penalties on confidence for what the data cannot show (no ledger, a scrape
  interval over 30 s, counter rates, a short window, no tail test).
- :func:`apply_caps`: readings that can fake or hide a signature whatever the bootstrap says
  cap the headline below the confident 0.7 (``UNCONFIRMED_CAP``): eviction that batch growth
  alone would explain, eviction from inflated decode-only steps with no lag test, ``none``
  without a ledger from a baseline that always carries prefill, a stalled time that is only a
  lower bound or read from the queue, sharing found by its long inter-token gaps whose two
  loss readings (the long gaps', the counted steps') fall on either side of 5 %, and a headline
  that moving one loss share by
  ``MODEL_TOLERANCE`` of itself would change. (On recordings of another engine model,
  tests/census/alien, such verdicts were wrong about half the time at confidence 0.71-0.97.)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from pdcensus.census.bootstrap import interval
from pdcensus.census.detect import COLLAPSE_RATIO
from pdcensus.census.headline import headline_mechanism
from pdcensus.census.model import Evidence, Found, Mechanism, Severity, Signature
from pdcensus.census.preemption import StallBasis
from pdcensus.census.verdict_inputs import VerdictInputs
from pdcensus.mechanism import MATERIAL_SHARE

MIN_SAMPLES = 30  # scrapes with decoders running, below which nothing is ranked
MIN_GROUP_SAMPLES = 10  # idle / busy scrapes needed for a contrast
SATURATED_SHARE = 0.5  # waiting > 0 in this share of scrapes: the endpoint is at capacity
NO_LEDGER_FACTOR = 0.8
SLOW_SCRAPE_FACTOR = 0.8
COUNTER_RATES_FACTOR = 0.9
SHORT_WINDOW_FACTOR = 0.9
NO_TAIL_TEST_FACTOR = 0.85
PREEMPTION_CONFOUND = 0.65  # eviction beside material preemption: stalls shed and re-admit rows
MAX_CONFIDENCE = 0.97  # no census of someone else's engine is surer than this
UNCONFIRMED_CAP = 0.6
MODEL_TOLERANCE = 0.15  # loss shares carry model error the bootstrap does not see
# Sharing or eviction costing less than this share of decoders' time is not counted as found, even with
# its signature in the data: the simulator's truth calls it "not measurable" by the same line
# (pdcensus.sim.truth.MEASURABLE_SHARE_OF_DECODE), and the loss shares' model error is larger.
MEASURABLE_SHARE = 0.005
BASELINE_PREFILL_FREE_SHARE = 0.5
SHORT_WINDOW_SAMPLES = 240


def preconditions(x: VerdictInputs) -> tuple[list[Evidence], list[str], bool]:
    """The evidence on sample counts, what would settle it when the data cannot tell, and whether only
    the bucket contrast is missing (``True``: too few idle or busy scrapes, everything else holds, so
    signatures that need no contrast can still be read)."""
    ev = [
        Evidence("shape-proven", None, None, x.shape_proven, x.shape_reason),
        Evidence("samples", float(x.samples), float(MIN_SAMPLES), x.samples >= MIN_SAMPLES,
                 f"{x.samples} scrapes with decoders running (need {MIN_SAMPLES})"),
        Evidence("idle-bucket", float(x.idle_samples), float(MIN_GROUP_SAMPLES), x.idle_samples >= MIN_GROUP_SAMPLES,
                 f"{x.idle_samples} scrapes with idle prefill"),
        Evidence("busy-bucket", float(x.busy_samples), float(MIN_GROUP_SAMPLES), x.busy_samples >= MIN_GROUP_SAMPLES,
                 f"{x.busy_samples} scrapes with busy prefill"),
    ]
    settle: list[str] = []
    if not x.shape_proven:
        settle.append("prove the window is one shape: scrape a counter on every scrape, or export "
                      "process_start_time_seconds, or pick another shape with --segment")
    if x.samples < MIN_SAMPLES:
        settle.append(f"record at least {MIN_SAMPLES} scrapes while requests are running")
    if x.single_session:
        ev.append(Evidence("other-session", None, None, False, x.single_session))
        settle.append(f"{x.single_session}: no other session's prefill to bucket decode by; load the endpoint "
                      "with two or more concurrent sessions")
    # with a ledger, chunk steps beside decoders are counted directly: the contrast is corroboration
    ledger_sees_prefill = (x.has_ledger and x.ledger_chunk_steps > 0) or gaps_see_prefill(x)
    hard = len(settle)
    if x.idle_samples < MIN_GROUP_SAMPLES and not ledger_sees_prefill:
        settle.append("record a window that includes idle-prefill periods (a baseline for decoders)")
    if x.busy_samples < MIN_GROUP_SAMPLES and not ledger_sees_prefill:
        settle.append("record a window in which another session prefills while others decode")
    if not x.preemption_counted and x.saturated_share >= SATURATED_SHARE:
        ev.append(Evidence("saturated-without-preemption-counter", x.saturated_share, SATURATED_SHARE, False,
                           f"requests wait in {100 * x.saturated_share:.0f} % of scrapes: the endpoint is at "
                           "capacity, and this engine exports no preemption counter"))
        settle.append("the queue never drains and this engine exports no preemption counter: stalls of "
                      "preempted or refused sequences can be neither ruled in nor out; relieve the load or "
                      "read the engine's logs for preemption/retraction before ranking mechanisms")
        hard = len(settle)
    return ev, settle, bool(settle) and hard == 0


def _ledger_none_contradicted(x: VerdictInputs) -> str | None:
    """Why a 'none' that rests on a counted ledger cannot be sure, or None.

    A counted ledger turns the rate contrast into corroboration (``verdict.signature_tests``), and its steps'
    ratio rules sharing out only where decode rows ride in the chunk steps: a chunk step that carries none emits
    no output, is no counted step, and one as long as a decode-only step hides in the ratio. So the 'none' needs
    the contrast (both buckets enough scrapes, no collapse beyond noise) or the inter-token histogram. Alien-engine
    runs whose decode rows sat out chunk steps read 'none' at 0.9 without this: the steps' ratio 0.97 against a
    contrast of 0.72, and 0.95 with 3 busy scrapes and no histogram (truth: sharing, minor).
    """
    if not (x.has_ledger and x.ledger_depth is not None and x.ledger_chunk_steps > 0) or x.contrast_note:
        return None
    if min(x.idle_samples, x.busy_samples) < MIN_GROUP_SAMPLES or not np.isfinite(x.lag0_effect[0]):
        if x.gaps is not None:
            return None
        return ("'none' rests on the counted steps alone (too few idle or busy scrapes for the rate contrast, no "
                "inter-token histogram): where decode rows sit out a chunk step and an engine counts only the steps "
                "that emit tokens (vLLM), a chunk step as long as a decode-only step hides in the steps' ratio; an "
                "inter-token histogram (vllm:inter_token_latency_seconds) or a window with idle and busy spells "
                "would settle it")
    lo, hi = interval(x.lag0_effect)
    if not (np.isfinite(hi) and hi < COLLAPSE_RATIO):
        return None
    return (f"per-stream decode while prefill runs falls to {x.lag0_effect[0]:.2f} of idle (90% interval "
            f"{lo:.2f}-{hi:.2f}), a collapse the counted steps do not show: where decode rows sit out a chunk step "
            "and an engine counts only the steps that emit tokens (vLLM), a chunk step as long as a decode-only step "
            "hides in the steps' ratio; an inter-token histogram (vllm:inter_token_latency_seconds) would time what "
            "they waited")


def gaps_see_prefill(x: VerdictInputs) -> bool:
    """vLLM's long inter-token gaps, fitted by dose where no span free of prefill timed a decode-only step, find
    the chunk steps beside decoders: as a ledger's count, they need no idle bucket to contrast against, and they
    tell sharing from residency (a resident's slowdown slows every step; these are gaps many steps long that grow
    with the prompt tokens). Only where their loss is one a census can tell from noise (``MEASURABLE_SHARE``):
    under it they stand in for nothing (an alien-engine run with no busy scrape, its gaps' loss 0.02 %)."""
    return x.gaps_by_dose_found() and x.gaps is not None and float(x.gaps.loss[0]) >= MEASURABLE_SHARE


def quality(x: VerdictInputs) -> tuple[float, list[str]]:
    """The confidence factor for what the data cannot show, and what would lift it."""
    factor, notes = 1.0, []
    if not x.has_ledger and not gaps_see_prefill(x):
        factor *= NO_LEDGER_FACTOR
        notes.append("decode-only step counters (radiance 1.8.x; vLLM: Forward Pass Metrics; SGLang: "
                     "SGLANG_ENABLE_METRICS_DEVICE_TIMER=1) would separate sharing from residency")
    if x.scrape_interval_seconds > 30:
        factor *= SLOW_SCRAPE_FACTOR
        notes.append("scrape at 30 s or faster")
    if x.rates_from_counters:
        factor *= COUNTER_RATES_FACTOR
    if x.samples < SHORT_WINDOW_SAMPLES:
        factor *= SHORT_WINDOW_FACTOR
    # (where the engine's cache config rules eviction out, pdcensus.census.kv_tier, no tail test is missing)
    if not np.isfinite(x.tail_effect[0]) and x.inflation_after is None and x.kv_second_tier is not False:
        factor *= NO_TAIL_TEST_FACTOR
        notes.append(x.tail_window_note or "idle periods of 15+ min would let the lag test rule eviction in or out")
    return factor, notes


def _headline_changes(x: VerdictInputs, found: list[Found], point: Mechanism) -> bool:
    """Whether moving one found mechanism's loss share by ``MODEL_TOLERANCE`` changes the headline."""
    losses = {f.mechanism: f.loss_share for f in found}
    for m, v in losses.items():
        for k in (1 - MODEL_TOLERANCE, 1 + MODEL_TOLERANCE):
            if np.isfinite(v) and headline_mechanism({**losses, m: v * k}) is not point:
                return True
    return False


def _cap_found(found: list[Found], mechanism: Mechanism) -> list[Found]:
    return [replace(f, confidence=min(f.confidence, UNCONFIRMED_CAP)) if f.mechanism is mechanism else f
            for f in found]


def apply_caps(x: VerdictInputs, point: Mechanism, found: list[Found], confidence: float,
               unfound_losses: dict[Mechanism, np.ndarray]) -> tuple[float, list[Found], list[str]]:
    """Caps for readings that can fake or hide a signature; the capped confidence and the reasons."""
    notes: list[str] = []
    names = {f.mechanism for f in found}
    cap = False
    stalls = next((f for f in found if f.mechanism is Mechanism.PREEMPTION_STALL), None)
    if stalls is not None and stalls.severity is Severity.MATERIAL and point is not Mechanism.PREEMPTION_STALL:
        # preemption sheds and re-admits rows: every other share moves with it (alien-engine recordings:
        # a ledger sharing share of 13 % against 8 % true beside 30 % of stalls, read as mixed at 0.97), by no
        # more than the stalled time itself; a share whose interval lies wholly above the stalls' is not theirs to
        # mask or mimic (live vLLM holdout-mixed: sharing 27-51 % of decoders' time beside 0-19 % of stalls, two
        # preemptions against seven 8 s chunk steps)
        def confounded(f: Found) -> bool:
            low, high = f.interval[0], stalls.interval[1]
            return not (np.isfinite(low) and np.isfinite(high) and low > high)
        headline = next((f for f in found if f.mechanism is point), None)
        found = [f if f.mechanism is Mechanism.PREEMPTION_STALL or not confounded(f) else
                 replace(f, confidence=round(f.confidence * PREEMPTION_CONFOUND, 3)) for f in found]
        if headline is None or confounded(headline):
            confidence *= PREEMPTION_CONFOUND
            notes.append("material preemption changes batch size and masks or mimics the other mechanisms' "
                         "shares: relieve KV pressure (or read /stats per-step forensics) to measure them apart")
        else:
            notes.append(f"material preemption beside it ({100 * stalls.loss_share:.1f} % of decoders' time) sheds "
                         f"and re-admits rows, but the {point.value} share's interval lies wholly above the "
                         "stalls': more than they could mask or mimic")
    # a recovery reading entirely above 1 (decode faster soon after a long prompt than long after) is
    # driven by something else (re-admitted preempted sequences, a batch that drains): no test of eviction
    inverse = x.recovery_effect is not None and interval(x.recovery_effect)[0] > 1.0
    eviction_untested = (not np.isfinite(x.tail_effect[0]) and (x.recovery_effect is None or inverse)
                         and x.kv_second_tier is not False)  # no tier to evict into: ruled out by the config
    if (stalls is not None and stalls.severity is Severity.MATERIAL and point is Mechanism.PREEMPTION_STALL
            and eviction_untested):
        # material preemption sheds and re-admits rows, which masks or mimics residency, and here neither the
        # tail test nor the recovery fit could run (simulator: an eviction of 59 % of decoders' time under
        # constant prefill, invisible beside 20 % of stalls, read as preemption-stall at 0.8)
        confidence *= PREEMPTION_CONFOUND
        notes.append("material preemption masks or mimics residency, and prefill never pauses long enough for the "
                     "tail test or the recovery fit: eviction can be neither ruled in nor out; an idle spell of "
                     "15+ min or /stats per-step forensics would")
    if not x.has_ledger and Mechanism.EVICTION in names and Mechanism.STEP_TIME_SHARING not in names \
            and np.isfinite(x.lag0_effect[0]) and x.lag0_effect[0] < COLLAPSE_RATIO:
        cap = True
        notes.append("decode also collapses at lag 0, and without a step ledger a lag-0 collapse beside a tail "
                     "cannot be split between sharing and eviction: a build with the ledger would")
    lead = max((f.loss_share for f in found if np.isfinite(f.loss_share)), default=0.0)
    for m, reps in unfound_losses.items():
        lo, _ = interval(reps)
        point_loss = float(reps[0])
        material = np.isfinite(lo) and lo >= MATERIAL_SHARE
        costlier = lead > 0 and np.isfinite(point_loss) and point_loss >= max(MEASURABLE_SHARE, lead)
        if m not in names and (material or costlier):
            cap = True
            why = "material" if material else "above the headline's"
            notes.append(f"{m.value}'s estimated loss ({100 * point_loss:.1f} % of decoders' time) is {why}, but its "
                         "signature is not beyond noise here: the headline may miss it")
    raw_tail = x.tail_effect[0]
    # (an eviction the engine's cache config rules out, pdcensus.census.kv_tier, holds nothing down)
    if x.uncontrolled_eviction and Mechanism.EVICTION not in names and x.kv_second_tier is not False:
        cap = True
        notes.insert(0, "decode is slower after prefill (a lagged tail or inflated decode-only steps), but the batch "
                        "is larger then, and batch growth alone could explain it: record quiet spells (15+ min "
                        "without heavy prefill) at the busy batch size, or read /stats per-step forensics")
    eviction = next((f for f in found if f.mechanism is Mechanism.EVICTION), None)
    if eviction is not None and eviction.signature is Signature.INFLATED_DECODE_STEPS and not np.isfinite(raw_tail):
        found = _cap_found(found, Mechanism.EVICTION)
        cap = cap or point in (Mechanism.EVICTION, Mechanism.MIXED)
        notes.append("eviction rests on inflated decode-only steps alone (the lag test could not run): a long "
                     "prompt's own decode over its context inflates them too; idle spells of 15+ min would let "
                     "the lag test confirm the tail")
    if not x.has_ledger and point is Mechanism.NONE and x.baseline_prefill_free_share < BASELINE_PREFILL_FREE_SHARE:
        cap = True
        notes.append(f"without a step ledger 'none' means no loss relative to the idle bucket, and prefill never "
                     f"stops here ({100 * (1 - x.baseline_prefill_free_share):.0f} % of idle scrapes carry some): "
                     "a loss spread over every scrape is invisible; decode-only step counters measure it")
    if stalls is not None and x.preemption_kind is StallBasis.DECODE_DEFICIT and point is not Mechanism.PREEMPTION_STALL:
        cap = True
        notes.append("the stalled time is a lower bound (decode deficit at burst scrapes only): a preempted "
                     "sequence that waits longer than a scrape is missed; export the preempted depth to integrate it")
    if stalls is not None and x.preemption_kind in (StallBasis.WAITING_QUEUE, StallBasis.UNMEASURABLE):
        found = _cap_found(found, Mechanism.PREEMPTION_STALL)
        cap = cap or point in (Mechanism.PREEMPTION_STALL, Mechanism.MIXED)
        notes.append("the stalled time is read from the waiting queue's excess after preemption bursts (which also "
                     "holds arrivals queued by the same load) or cannot be measured: export the preempted depth")
    sharing = next((f for f in found if f.mechanism is Mechanism.STEP_TIME_SHARING), None)
    if sharing is not None and sharing.signature is Signature.LONG_GAPS and x.gaps is not None:
        # the two readings of its loss bracket it: the long gaps' excess leaves out chunk steps under the line, the
        # counted steps' excess holds the batch's and contexts' growth (an alien-engine healthy run: 11.7 % against
        # a truth of 0.5 %, the long gaps under 0.5 %; the simulator's 3.3x chunk steps: 17.8 % and 2.4 %, truth 11.3 %)
        low = float(x.gaps.loss[0])
        # (by dose, the rate contrast's, where both of its buckets hold enough scrapes: else there is no bracket)
        contrast = (float(x.collapse[0]) if min(x.idle_samples, x.busy_samples) >= MIN_GROUP_SAMPLES
                    else float("nan"))
        if not 0.0 <= contrast <= 1.0:  # a share outside [0, 1] (decode faster in the busy bucket) bounds nothing
            contrast = float("nan")
        high, other = ((contrast, "the rate contrast's") if x.gaps.by_dose
                       else (sharing.loss_share, "the counted steps'"))
        if np.isfinite(low) and np.isfinite(high) and (low >= MATERIAL_SHARE) != (high >= MATERIAL_SHARE):
            found = _cap_found(found, Mechanism.STEP_TIME_SHARING)
            cap = cap or point in (Mechanism.STEP_TIME_SHARING, Mechanism.MIXED)
            notes.append(f"step-time-sharing's loss is bracketed by the long inter-token gaps' excess ({100 * low:.1f} "
                         f"% of decoders' time: chunk steps under 3 decode-only gaps are not in it) and {other} "
                         f"({100 * high:.1f} %: the batch's growth is in it too), on either side "
                         "of the 5 % line: a scrape interval short enough to hold one chunk step (1 s) would settle it")
    contradicted = _ledger_none_contradicted(x) if point is Mechanism.NONE else None
    if contradicted:
        cap = True
        notes.append(contradicted)
    if found and _headline_changes(x, found, point):
        cap = True
        notes.append(f"moving one loss share by {100 * MODEL_TOLERANCE:.0f} % of itself changes which mechanism "
                     "costs most: the census's estimates are not that exact; the knob's arm will settle it")
    if cap:
        confidence = min(confidence, UNCONFIRMED_CAP)
    return confidence, found, notes
