"""Typed values that advice produces: recommendations and lint findings.

Every value is a frozen dataclass with ``to_dict()`` giving the JSON form that the census
report's ``advice`` list and ``pdcensus lint --json`` print (verify-arm's verdict is
:mod:`pdcensus.verify.model`, serialised by the same :func:`json_safe`).
Numbers stay numbers (seconds, tokens per second, ratios); the human sentence sits beside
them, never instead of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.advice.predictions import Prediction


class Severity(str, Enum):
    """How bad a lint finding is; ``--strict`` fails only on ERROR."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


def json_safe(value: object) -> object:
    """JSON-safe copy (the one rule every JSON edge of the advice and verify-arm uses): NaN/inf become None, enums their value, mappings/tuples recurse."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


@dataclass(frozen=True)
class LintFinding:
    """One problem in a runbook: the rule, the 1-based line and the flag/value/expression."""

    rule: str
    severity: Severity
    line: int
    subject: str
    message: str

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "line": self.line,
            "subject": self.subject,
            "message": self.message,
        }


@dataclass(frozen=True)
class VerificationPlan:
    """How to prove an arm engaged, in the runbook's order: argv, counter, bucket pair."""

    argv: str
    counter: str
    bucket_pair: str
    command: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "argv": self.argv,
            "counter": self.counter,
            "bucket_pair": self.bucket_pair,
            "command": self.command,
        }


@dataclass(frozen=True)
class TwinRow:
    """One predicted figure two ways: the closed form's arithmetic and the calibrated twin's run.

    ``now`` is the recording's value; ``closed_form`` NaN where the arithmetic says nothing about
    this figure; ``twin`` the recording's value x the twin's after/before ratio, ``twin_low`` and
    ``twin_high`` its range over the twin's seeds.
    """

    figure: str
    unit: str
    now: float
    closed_form: float
    twin: float
    twin_low: float
    twin_high: float
    trust: str = "twin"  # "twin", "closed-form", or "between" (read the truth between the two)

    def to_dict(self) -> dict[str, object]:
        return {k: json_safe(v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class TwinCheck:
    """The recommendation's effect as ``pdcensus whatif`` predicts it, beside the closed form.

    ``trust`` names the figure to act on: ``"twin"`` where the twin calibrated on this
    recording (its error within ``bound`` on every bounded figure) and ran the change,
    ``"closed-form"`` where it was refused (``refused`` says why in one line).
    """

    setting: str  # the --set the twin ran, e.g. "--prefill-interleave=2"
    trust: str
    why: str
    rows: tuple[TwinRow, ...] = ()
    refused: str = ""
    calibration_error: Mapping[str, float] = field(default_factory=dict)
    seeds: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"setting": self.setting, "trust": self.trust, "why": self.why,
                "rows": [r.to_dict() for r in self.rows], "refused": self.refused or None,
                "calibration_error": json_safe(self.calibration_error), "seeds": self.seeds}


@dataclass(frozen=True)
class Recommendation:
    """One knob to turn, with the effect predicted from the census's own ledger and buckets.

    ``predicted`` holds the numbers, a typed record per kind of knob (:mod:`pdcensus.advice.predictions`;
    field names name their units and are the JSON keys); ``tradeoff`` is a table of
    rows (one mapping per candidate value) where the knob is a dial: numbers, plus a text
    cell where a candidate is named rather than counted (a checkpoint policy).
    """

    mechanism: str
    knob: str
    value: str
    env_line: str
    rollback_env_line: str
    summary: str
    predicted: Prediction = field(default_factory=Prediction)
    cost: str = ""
    preconditions: tuple[str, ...] = ()
    verification: VerificationPlan | None = None
    tradeoff: tuple[Mapping[str, float | str], ...] = ()
    notes: tuple[str, ...] = ()
    # the engine's own spelling: the complete line (argv, env, Kubernetes args; DeployLine.to_dict()),
    # and where the dial stands ("next-step" after a value already deployed, "spent", or "")
    engine: str = "radiance"
    deploy: Mapping[str, object] = field(default_factory=dict)
    dial_state: str = ""

    @property
    def argv_fragment(self) -> str:
        return f"{self.knob} {self.value}"
    minor: bool = False  # the mechanism it acts on is minor (the views print it in one line)
    # the calibrated twin's prediction of the same change (``census`` runs it unless ``--no-twin``; None where
    # it did not run)
    twin: TwinCheck | None = None

    @property
    def act_on(self) -> str:
        """Whose figures to act on: ``"twin"`` where the calibrated twin ran the change and calibrated on this
        recording, else ``"closed-form"`` (``predicted`` is always the closed form's; ``twin`` the twin's)."""
        return "twin" if self.twin is not None and self.twin.trust == "twin" else "closed-form"

    def to_dict(self) -> dict[str, object]:
        return {
            "mechanism": self.mechanism,
            "knob": self.knob,
            "value": self.value,
            "env_line": self.env_line,
            "rollback_env_line": self.rollback_env_line,
            "summary": self.summary,
            "predicted": json_safe(self.predicted.to_dict()),
            "cost": self.cost,
            "preconditions": list(self.preconditions),
            "verification": self.verification.to_dict() if self.verification else None,
            "tradeoff": json_safe(self.tradeoff),
            "notes": list(self.notes),
            "engine": self.engine,
            "deploy": json_safe(self.deploy),
            "dial_state": self.dial_state,
            "minor": self.minor,
            "predicted_by": "closed-form",
            "act_on": self.act_on,
            "twin": self.twin.to_dict() if self.twin is not None else None,
        }
