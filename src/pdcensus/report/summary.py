"""The short view of a census report: what an on-call engineer reads in a minute.

Four sections, the same in every view (terminal, HTML, Markdown): the two-part headline
(*which* mechanism and how sure, *how much* it costs), the few evidence rows that decided it,
each with its plain meaning, the advice for the headline mechanism (or why there is none),
and how to verify the arm. :func:`summarise` picks and words them from the typed report; the
renderers lay them out. Confidence ("how sure it is there") and severity ("how much it
costs") are two labelled figures here, never one, because a 1.5 % effect can be certain.

Like the rest of ``report``, this module formats and chooses; it never computes a census figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdcensus.advice.endpoint_report import advice_of
from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.census.model import CensusReport, Evidence, Mechanism, Severity, Signature
from pdcensus.mechanism import MATERIAL_SHARE

__all__ = ["CONFIDENT", "FULL_SECTIONS", "SHORT_SECTIONS", "EvidenceRow", "Summary", "summarise", "why_no_advice"]

CONFIDENT = 0.7  # the census's bar for a confident verdict (census.verdict lists what would settle it below it)
SHORT_SECTIONS = ("Verdict", "Evidence that decided it", "Advice", "Verify the arm")
# what --full adds, in this order in every view (the runbook's order after the advice's detail)
FULL_SECTIONS = ("Advice in detail", "All findings and evidence", "Shape", "Step ledger", "Decode by prefill bucket",
                 "Lag test", "Preemption bursts", "Traps", "Runbook steps on this engine's metrics", "Glossary")
MAX_EVIDENCE_ROWS = 5

MEANING = {
    Mechanism.STEP_TIME_SHARING: "decode rows wait out the chunk step beside them",
    Mechanism.EVICTION: "prefill pushed out something decoders need; decode stays slow for minutes after",
    Mechanism.PREEMPTION_STALL: "preempted sequences stop and re-prefill from token 0",
    Mechanism.MIXED: "more than one mechanism costs a material share of decoders' time",
    Mechanism.NONE: "no mechanism's signature is in the data",
    Mechanism.INCONCLUSIVE: "the data cannot decide",
}

_SIGNATURE_OF = {
    Signature.LAG0_COLLAPSE: Mechanism.STEP_TIME_SHARING, Signature.CHUNK_STEP_COLLAPSE: Mechanism.STEP_TIME_SHARING,
    Signature.LONG_GAPS: Mechanism.STEP_TIME_SHARING,
    Signature.DOSE_RESPONSE: Mechanism.STEP_TIME_SHARING, Signature.LAGGED_TAIL: Mechanism.EVICTION,
    Signature.INFLATED_DECODE_STEPS: Mechanism.EVICTION, Signature.RECOVERY_SLOPE: Mechanism.EVICTION,
    Signature.PREEMPTION_BURSTS: Mechanism.PREEMPTION_STALL,
}
# rule -> (plain label, which side of the line finds it, what the number means)
_PLAIN: dict[str, tuple[str, str, str]] = {
    "chunk-step-collapse": ("decode-only step / chunk step", "found below",
                            "a decode row in a chunk step waits for the whole chunk (step ledger)"),
    "long-gaps": ("long inter-token gaps beside prefill, less without", "found above",
                  "decoders wait out chunk steps many decode-only steps long, though each is shorter than a scrape"),
    "lag0-collapse": ("decode while prefill runs, vs idle", "found below",
                      "per-stream decode in the same scrape as prefill, as a share of idle"),
    "lag0-effect": ("decode while prefill runs, vs idle", "a collapse below",
                    "per-stream decode in the same scrape as prefill, as a share of idle"),
    "dose-response": ("decode at busy prefill, fitted", "found below",
                      "per-stream decode fitted at the busy prefill level, as a share of idle"),
    "lagged-tail": ("decode 2-14 min after prefill", "found below",
                    "decode after prefill ended vs clean scrapes: a tail means something was evicted"),
    "inflated-decode-steps": ("decode-only steps after prefill", "found above",
                              "decode-only steps slower after prefill than batch growth explains: eviction"),
    "recovery-slope": ("recovery since the last prefill", "found below",
                       "decode soon after prefill vs long after: recovering with time means eviction"),
    "preemption-bursts": ("preemption bursts", "found from", "preempted sequences stop and re-prefill from token 0"),
    "samples": ("scrapes with decoders running", "need", "too few and nothing is ranked"),
    "idle-bucket": ("scrapes with idle prefill", "need", "the baseline decoders are compared against"),
    "busy-bucket": ("scrapes with busy prefill", "need", "the scrapes a collapse would show in"),
    "other-session": ("another session's prefill", "", "decode is only disturbed by another session's prompt"),
}


@dataclass(frozen=True)
class EvidenceRow:
    """One row of the evidence that decided the verdict, with its plain meaning."""

    label: str
    value: str
    line: str  # the rule it was held against, in words ("found below 0.85")
    holds: bool
    meaning: str
    rule: str  # the evidence rule's name (as in --json and the full table)


@dataclass(frozen=True)
class Summary:
    """The short view's content for one endpoint."""

    title: str
    mechanism: Mechanism
    which: str
    how_sure: str
    how_much: str
    headline: str
    warnings: tuple[str, ...]
    evidence: tuple[EvidenceRow, ...]
    settle: tuple[str, ...]  # what would settle an unsure verdict
    advice: Recommendation | None
    more_advice: int
    no_advice: str  # why there is no advice ("" when there is)
    verify: tuple[tuple[str, str], ...]
    verify_title: str

    @property
    def sections(self) -> tuple[str, ...]:
        """The short view's section titles, in order (no verify section without a plan)."""
        return SHORT_SECTIONS if self.verify else SHORT_SECTIONS[:3]


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:{fmt}}"


def _pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:.1f} %"


def how_sure(report: CensusReport) -> str:
    """Confidence, labelled, with the bar it is read against."""
    v = report.verdict
    if v.mechanism is Mechanism.INCONCLUSIVE:
        return f"confidence {v.confidence:.2f}: nothing can be named (confident from {CONFIDENT:g})"
    word = "" if v.confidence >= CONFIDENT else ": a leaning, not confident"
    return f"confidence {v.confidence:.2f}{word} (confident from {CONFIDENT:g})"


def how_much(report: CensusReport) -> str:
    """Severity, labelled: each found mechanism's share of decoders' time against the material line."""
    v = report.verdict
    line = f"material from {100 * MATERIAL_SHARE:g} %"
    if not v.found:
        return ("not measured: no mechanism is named" if v.mechanism is Mechanism.INCONCLUSIVE
                else "nothing found, nothing lost to prefill")
    parts = [f"{f.severity.value}, {_pct(f.loss_share)} of decoders' time"
             + (f" ({f.mechanism.value})" if len(v.found) > 1 else "") for f in v.found]
    return "; ".join(parts) + f" ({line})"


def _row(e: Evidence) -> EvidenceRow:
    rule = e.rule
    if rule.startswith("loss-share:"):
        name = rule.split(":", 1)[1]
        return EvidenceRow(f"what {name} costs", _pct(e.value), f"material from {_pct(e.threshold)}", e.satisfied,
                           "its share of decoders' time", rule)
    label, side, meaning = _PLAIN.get(rule, (rule, "", e.text))
    count = rule in ("samples", "idle-bucket", "busy-bucket", "preemption-bursts")
    value = _num(e.value, ".0f" if count else ".2f")
    threshold = _num(e.threshold, ".0f" if count else ".2f")
    line = f"{side} {threshold}".strip() if e.threshold is not None and side else side
    if e.value is None:
        value, meaning = "—", e.text
    return EvidenceRow(label, value, line, e.satisfied, meaning, rule)


def decisive_evidence(report: CensusReport) -> tuple[EvidenceRow, ...]:
    """The few evidence rows that decided the verdict, most telling first."""
    v = report.verdict
    by_rule = {e.rule: e for e in v.evidence}
    picked: list[Evidence] = []

    def take(rule: str) -> None:
        e = by_rule.get(rule)
        if e is not None and e not in picked:
            picked.append(e)

    if v.mechanism is Mechanism.INCONCLUSIVE:
        for failed in v.evidence:
            if not failed.satisfied and not failed.rule.startswith("loss-share:") and failed.rule not in _SIGNATURE_RULES:
                take(failed.rule)
    for f in v.found:  # each found mechanism: the signature that found it (what it costs is the headline's)
        take(f.signature.value)
    found = {f.mechanism for f in v.found}
    if Mechanism.STEP_TIME_SHARING not in found:
        take("lag0-effect")
    for signature, mechanism in _SIGNATURE_OF.items():  # what ruled the others out
        other = by_rule.get(signature.value)
        if mechanism not in found and other is not None and not other.satisfied and other.value is not None:
            take(other.rule)
    return tuple(_row(e) for e in picked[:MAX_EVIDENCE_ROWS])


_SIGNATURE_RULES = frozenset(s.value for s in Signature) | {"lag0-effect"}


def headline_advice(report: CensusReport) -> tuple[Recommendation | None, int]:
    """The recommendation for the headline mechanism (else the first), and how many more there are."""
    advice = advice_of(report)
    if not advice:
        return None, 0
    mine = next((r for r in advice if r.mechanism == report.verdict.mechanism.value), advice[0])
    return mine, len(advice) - 1


def why_no_advice(report: CensusReport) -> str:
    """Why the advice is empty, in the report's own terms (which of: nothing found, not certain, not material ...)."""
    v = report.verdict
    if v.mechanism is Mechanism.INCONCLUSIVE:
        return (f"none: the verdict is not certain enough to act on (inconclusive, confidence {v.confidence:.2f}; "
                f"a verdict is confident from {CONFIDENT:g}); see what would settle it")
    if not v.found:
        return "none: nothing found; no mechanism's signature is in the data, so there is nothing to act on"
    if all(f.severity is Severity.MINOR for f in v.found):
        costs = ", ".join(f"{f.mechanism.value}, {_pct(f.loss_share)} of decoders' time" for f in v.found)
        return (f"none: nothing material; what was found ({costs}) is under the {100 * MATERIAL_SHARE:g} % line, "
                "and the advice found no knob setting to change for it")
    names = ", ".join(f.mechanism.value for f in v.found)
    return f"none: no knob in the {report.profile} catalogue acts on {names} on this engine"


def _verify(plan: VerificationPlan | None) -> tuple[tuple[str, str], ...]:
    if plan is None:
        return ()
    return tuple((k, t) for k, t in (("argv", plan.argv), ("counter", plan.counter),
                                      ("bucket pair", plan.bucket_pair), ("command", plan.command)) if t)


def summarise(report: CensusReport) -> Summary:
    """The short view of ``report``."""
    v = report.verdict
    meaning = MEANING[v.mechanism]
    if v.mechanism is Mechanism.MIXED:
        meaning += ": " + ", ".join(f.mechanism.value for f in v.found)
    warnings = [f"withheld: {w}" for w in v.withheld]
    over = report.overload
    if over is not None and over.overloaded:
        warnings.append(f"overloaded: the endpoint is over capacity, no knob is the fix; {over.reason}")
    rec, more = headline_advice(report)
    plan = rec.verification if rec is not None else None
    verify_title = ("Verify the arm: the change is capacity, not a flag" if rec is not None
                    and rec.mechanism in ("overload", "box") else "Verify the arm, in this order (a deploy is not evidence)")
    return Summary(
        title=f"{report.instance} ({report.job}), {report.profile}",
        mechanism=v.mechanism,
        which=f"{v.mechanism.value} - {meaning}",
        how_sure=how_sure(report),
        how_much=how_much(report),
        headline=v.headline if v.found else "",
        warnings=tuple(warnings),
        evidence=decisive_evidence(report),
        settle=v.settle,
        advice=rec,
        more_advice=more,
        no_advice="" if rec is not None else why_no_advice(report),
        verify=_verify(plan),
        verify_title=verify_title,
    )
