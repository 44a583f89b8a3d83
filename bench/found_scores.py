"""Per-mechanism scores of the census's *found* list against a model's ground truth.

Used by ``census_accuracy.py`` (the simulator) and ``census_alien.py`` (the alien engine):
for each mechanism, detection recall (found by the census where the truth found it), the
false-found rate (found by the census where the truth did not), severity agreement (material
vs minor, where both found it), and the headline's accuracy and confident-wrong count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MECHANISMS = ("step-time-sharing", "eviction", "preemption-stall")
CONFIDENT = 0.7


@dataclass(frozen=True)
class Scored:
    """One run: truth's and the census's found mechanisms (name -> severity) and headlines."""

    truth_found: Mapping[str, str]
    census_found: Mapping[str, str]
    truth_headline: str
    census_headline: str
    confidence: float


def found_table(runs: Sequence[Scored]) -> str:
    """Markdown: per mechanism, recall, false-found rate and severity agreement, plus the headline."""
    lines = ["| mechanism | truth found | detection recall | truth not found | false-found rate | "
             "severity agreement |", "|---|---|---|---|---|---|"]
    for m in MECHANISMS:
        pos = [r for r in runs if m in r.truth_found]
        neg = [r for r in runs if m not in r.truth_found and r.truth_headline != "inconclusive"]
        hit = [r for r in pos if m in r.census_found]
        false = [r for r in neg if m in r.census_found]
        agree = [r for r in hit if r.truth_found[m] == r.census_found[m]]
        lines.append(f"| {m} | {len(pos)} | {_pct(len(hit), len(pos))} | {len(neg)} | {_pct(len(false), len(neg))} | "
                     f"{_pct(len(agree), len(hit))} |")
    n = len(runs)
    ok = sum(r.truth_headline == r.census_headline for r in runs)
    cw = sum(r.truth_headline != r.census_headline and r.confidence >= CONFIDENT for r in runs)
    lines.append(f"\nheadline accuracy {ok}/{n} = {_pct(ok, n)}, confident-wrong (conf >= {CONFIDENT}) {cw}")
    return "\n".join(lines)


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f} % ({a}/{b})" if b else "-"
