"""What the advice's predicted figures are, in one wording for every view (pdcensus.report.twin_view).

The twin's line leads only where it is the one to act on; the closed form's summary is then labelled
as the closed form's; where the twin did not run, the line says why, and never blames --no-twin for a
recommendation the twin does not run on (a minor mechanism's, a capacity change).
"""

from __future__ import annotations

import math

from pdcensus.advice.model import Recommendation, TwinCheck, TwinRow
from pdcensus.report.twin_view import (
    CLOSED_FORM_LABEL,
    CLOSED_FORM_ONLY,
    FOR_MINOR,
    NOT_A_FLAG,
    headline,
    source_line,
    summary_line,
)

ROWS = (TwinRow("per-stream decode, heaviest bucket (5k-inf tok/s)", "tok/s", 25.0, 47.5, 30.0, 29.0, 31.0),
        TwinRow("per-stream decode, idle bucket", "tok/s", 87.0, math.nan, 86.0, 85.0, 87.0),
        TwinRow("TTFT p90, heaviest bucket (5k-inf tok/s)", "s", 1.4, 3.4, 1.7, 1.3, 2.1, "between"))


def _rec(**kw: object) -> Recommendation:
    base: dict[str, object] = dict(mechanism="step-time-sharing", knob="--prefill-interleave", value="2",
                                   env_line="", rollback_env_line="", summary="closed-form arithmetic")
    return Recommendation(**{**base, **kw})  # type: ignore[arg-type]


def test_the_twins_line_leads_and_the_closed_form_is_labelled_where_the_twin_is_trusted() -> None:
    rec = _rec(twin=TwinCheck("--prefill-interleave=2", "twin", "why", rows=ROWS, seeds=2))
    lead = headline(rec)
    assert rec.act_on == "twin" and rec.to_dict()["act_on"] == "twin"
    assert lead.startswith("predicted by the calibrated twin (--prefill-interleave=2, 2 seeds")
    assert "25.0 tok/s -> 30.0 tok/s (x1.20)" in lead and "1.40 s -> 1.70 s (x1.21)" in lead
    assert "idle bucket" not in lead  # the table's row: the change is not meant to move it
    assert summary_line(rec) == CLOSED_FORM_LABEL + "closed-form arithmetic"
    assert source_line(rec).startswith("the first line is the twin's prediction")


def test_a_refused_twin_leaves_the_closed_form_leading_and_unlabelled() -> None:
    rec = _rec(twin=TwinCheck("--prefill-interleave=2", "closed-form", "the twin was refused: x", refused="x"))
    assert rec.act_on == "closed-form" and headline(rec) == "" and summary_line(rec) == "closed-form arithmetic"
    assert "the one to act on here" in source_line(rec)


def test_a_recommendation_the_twin_does_not_run_on_says_why_not() -> None:
    assert source_line(_rec()) == CLOSED_FORM_ONLY and "--no-twin" in CLOSED_FORM_ONLY
    assert source_line(_rec(minor=True)) == FOR_MINOR and "--no-twin" not in FOR_MINOR
    assert source_line(_rec(knob="capacity", value="x1.3")) == NOT_A_FLAG
