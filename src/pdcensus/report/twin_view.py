"""The calibrated twin's prediction beside the closed form's, worded once for every view.

A recommendation's predicted effect has two sources (:class:`~pdcensus.advice.model.TwinCheck`):
the closed form's ledger arithmetic, and ``pdcensus whatif``'s twin, which ``census`` runs unless
``--no-twin``. Where the twin calibrated on the recording and ran the change, its figures lead
(:func:`headline`) and the closed form's arithmetic follows, labelled as such; where it was
refused, the closed form leads and the refusal's line says why. The terminal, HTML and Markdown
views print the same lines, table and "trust" line from here, so the three never name a
different figure to act on. Nothing is computed here; a figure
outside its domain (a non-finite or negative rate or wait) is printed as "-", never as a number.
"""

from __future__ import annotations

import math

from pdcensus.advice.model import Recommendation, TwinCheck, TwinRow

HEADER = ("figure", "now", "closed form", "twin [range over seeds]", "trust")
_TRUST = {"twin": "twin", "closed-form": "closed form", "between": "between the two"}
CLOSED_FORM_ONLY = ("predicted in closed form from this endpoint's own ledger and buckets; the calibrated twin "
                    "(pdcensus whatif) did not run (--no-twin)")
NOT_A_FLAG = "predicted in closed form from this endpoint's own ledger and buckets (the twin sets engine flags only)"
FOR_MINOR = ("predicted in closed form from this endpoint's own ledger and buckets (the twin runs on the advice for "
             "material mechanisms)")
NO_VALUE = ("predicted in closed form from this endpoint's own ledger and buckets (no next value for the twin to run: "
            "the dial is spent where it stands)")
CLOSED_FORM_LABEL = "closed form (the ledger's arithmetic, beside the twin's): "


def _value(x: float, unit: str) -> str:
    if not (isinstance(x, (int, float)) and math.isfinite(x)) or x < 0:
        return "-"
    return f"{x:.2f} s" if unit == "s" else f"{x:.1f} {unit}"


def _ratio(x: float, now: float) -> str:
    if not (math.isfinite(x) and math.isfinite(now)) or now <= 0 or x < 0:
        return ""
    return f" (x{x / now:.2f})"


def row_cells(row: TwinRow) -> tuple[str, str, str, str, str]:
    """One row: the figure, its value now, the closed form's (x change), the twin's (x change) [range], which to trust."""
    closed = _value(row.closed_form, row.unit)
    twin = _value(row.twin, row.unit)
    if twin != "-":
        twin += _ratio(row.twin, row.now) + f" [{_value(row.twin_low, row.unit)}, {_value(row.twin_high, row.unit)}]"
    trust = _TRUST.get(row.trust, row.trust)
    if closed == "-" and row.trust == "between":
        trust = "twin"  # nothing to read it between
    return (row.figure, _value(row.now, row.unit), closed + (_ratio(row.closed_form, row.now) if closed != "-" else ""),
            twin, trust)


def trust_line(check: TwinCheck) -> str:
    """Which prediction to act on, and why, in one line."""
    seeds = f"{check.setting}, {check.seeds} twin seed{'s' if check.seeds != 1 else ''}"
    if check.trust == "twin":
        return f"trust: {check.why} ({seeds})"
    return f"trust the closed form: {check.why} ({seeds})"


def headline(rec: Recommendation) -> str:
    """The twin's prediction in one line, where it is the one to act on (``rec.act_on == "twin"``); else ""."""
    if rec.act_on != "twin" or rec.twin is None:
        return ""
    said = []
    for r in rec.twin.rows:
        now, twin = _value(r.now, r.unit), _value(r.twin, r.unit)
        if "-" in (now, twin) or r.figure.startswith("per-stream decode, idle"):
            continue  # the idle bucket's figure is the table's: the change is not meant to move it
        said.append(f"{r.figure} {now} -> {twin}{_ratio(r.twin, r.now)}")
    if not said:
        return ""
    return (f"predicted by the calibrated twin ({rec.twin.setting}, {rec.twin.seeds} seed"
            f"{'s' if rec.twin.seeds != 1 else ''}, as pdcensus whatif runs it): " + "; ".join(said))


def summary_line(rec: Recommendation) -> str:
    """The recommendation's closed-form summary, labelled as the closed form's where the twin's leads."""
    return CLOSED_FORM_LABEL + rec.summary if headline(rec) and rec.summary else rec.summary


def lead_lines(rec: Recommendation) -> tuple[str, ...]:
    """The advice's opening lines in every view: the twin's prediction where it leads, then the summary."""
    lead = headline(rec)
    return ((lead,) if lead else ()) + (summary_line(rec),)


def source_line(rec: Recommendation) -> str:
    """What the predicted figures are: the twin's leading, the closed form's alone, or the closed form's trusted."""
    if rec.twin is None:
        if rec.minor:
            return FOR_MINOR
        if not rec.knob.strip().startswith("--"):
            return NOT_A_FLAG
        return CLOSED_FORM_ONLY if rec.value.strip() else NO_VALUE
    if headline(rec):
        return "the first line is the twin's prediction; the closed form's arithmetic is beside it in the table"
    return "the summary's figures are the closed form's, the one to act on here; the twin's are below"
