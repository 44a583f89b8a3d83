"""The calibrated twin's prediction beside the closed form's, worded once for every view.

A recommendation's predicted effect has two sources (:class:`~pdcensus.advice.model.TwinCheck`):
the closed form's ledger arithmetic, and ``pdcensus whatif``'s twin where ``census --twin`` ran
it. The terminal, HTML and Markdown views print the same table and the same "trust" line from
here, so the three never name a different figure to act on. Nothing is computed here; a figure
outside its domain (a non-finite or negative rate or wait) is printed as "-", never as a number.
"""

from __future__ import annotations

import math

from pdcensus.advice.model import Recommendation, TwinCheck, TwinRow

HEADER = ("figure", "now", "closed form", "twin [range over seeds]", "trust")
_TRUST = {"twin": "twin", "closed-form": "closed form", "between": "between the two"}
CLOSED_FORM_ONLY = ("predicted in closed form from this endpoint's own ledger and buckets; `census --twin` runs "
                    "the calibrated twin (pdcensus whatif) beside it")


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


def source_line(rec: Recommendation) -> str:
    """What the summary's predicted figures are: the closed form's, with the twin's beside them or not."""
    return CLOSED_FORM_ONLY if rec.twin is None else "the summary's figures are the closed form's; the twin's are below"
