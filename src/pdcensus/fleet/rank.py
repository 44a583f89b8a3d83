"""Rank the fleet by what decoders lose: the census's total lost decode share, with its interval.

An examined endpoint's loss is the sum of the loss shares of every mechanism the census found
(:class:`pdcensus.census.verdict_model.Found`: each a share of decoders' time with a bootstrap
interval); its interval is the sum of the per-mechanism bounds, a conservative band since the
mechanisms' replicates are not paired here. The principal mechanism is the found one that costs
most, with its severity (``material`` at >= 5 % of decoders' time). Two neighbours whose bands
overlap are a tie: the order between them is not measured, and the ranking says so.

Order: examined endpoints with a verdict, by total loss (largest first; ``none`` loses 0); then
the inconclusive ones; then the endpoints only screened, by the screen's estimate (never mixed
with census numbers); then the endpoints that failed, each with its reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pdcensus.census.model import CensusReport, Mechanism

RankGroup = int
EXAMINED, INCONCLUSIVE, SCREENED, FAILED = 0, 1, 2, 3


@dataclass(frozen=True)
class Examined:
    """The census of one endpoint, summed up for the ranking (kept in the resume state file)."""

    mechanism: str
    confidence: float
    loss_share: float
    loss_interval: tuple[float, float]
    principal: str
    severity: str
    found: tuple[tuple[str, str, float, float, float], ...]  # (mechanism, severity, share, lo, hi)
    per_stream_vs_idle: float

    @classmethod
    def from_report(cls, report: CensusReport) -> Examined:
        verdict = report.verdict
        found = tuple((f.mechanism.value, f.severity.value, f.loss_share, f.interval[0], f.interval[1])
                      for f in verdict.found if math.isfinite(f.loss_share))
        total = sum(f[2] for f in found)
        lo = sum(f[3] for f in found if math.isfinite(f[3]))
        hi = sum(f[4] for f in found if math.isfinite(f[4]))
        top = max(found, key=lambda f: f[2]) if found else None
        table = report.buckets
        effects = [r.per_stream_vs_idle for r in (table.rows[1:] if table is not None else [])
                   if r.per_stream_samples > 0 and math.isfinite(r.per_stream_vs_idle)]
        return cls(verdict.mechanism.value, verdict.confidence, total, (min(lo, total), max(hi, total)),
                   top[0] if top else "", top[1] if top else "", found, min(effects) if effects else math.nan)

    @property
    def conclusive(self) -> bool:
        return self.mechanism != Mechanism.INCONCLUSIVE.value

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "confidence": _num(self.confidence),
                "loss_share": _num(self.loss_share), "loss_interval": [_num(x) for x in self.loss_interval],
                "principal": self.principal or None, "severity": self.severity or None,
                "found": [{"mechanism": m, "severity": s, "loss_share": _num(v), "interval": [_num(a), _num(b)]}
                          for m, s, v, a, b in self.found],
                "per_stream_vs_idle": _num(self.per_stream_vs_idle)}

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> Examined:
        def val(x: Any) -> float:
            return math.nan if x is None else float(x)

        lo, hi = body["loss_interval"]
        return cls(str(body["mechanism"]), val(body["confidence"]), val(body["loss_share"]), (val(lo), val(hi)),
                   body.get("principal") or "", body.get("severity") or "",
                   tuple((f["mechanism"], f["severity"], val(f["loss_share"]), val(f["interval"][0]),
                          val(f["interval"][1])) for f in body.get("found", [])),
                   val(body.get("per_stream_vs_idle")))


def _num(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


@dataclass(frozen=True)
class RankRow:
    """One line of the ranking, the same in the terminal, the JSON and the HTML page."""

    rank: int
    job: str
    instance: str
    group: RankGroup
    mechanism: str  # the census's headline, "screened" (not examined) or "error"
    loss_share: float  # census total where examined, the screen's estimate otherwise
    loss_interval: tuple[float, float]
    principal: str
    severity: str
    confidence: float
    screen_score: float
    flags: tuple[str, ...]
    tied_with_previous: bool
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "job": self.job, "instance": self.instance,
                "examined": self.group in (EXAMINED, INCONCLUSIVE), "mechanism": self.mechanism,
                "loss_share": _num(self.loss_share), "loss_interval": [_num(x) for x in self.loss_interval],
                "principal": self.principal or None, "severity": self.severity or None,
                "confidence": _num(self.confidence), "screen_score": _num(self.screen_score),
                "flags": list(self.flags), "tied_with_previous": self.tied_with_previous, "error": self.error}


@dataclass(frozen=True)
class Standing:
    """What the ranking needs to know about one endpoint."""

    job: str
    instance: str
    examined: Examined | None
    screen_score: float
    flags: tuple[str, ...]
    error: str | None


def _key(s: Standing) -> tuple[int, float, str, str]:
    if s.examined is not None and s.error is None:
        group = EXAMINED if s.examined.conclusive else INCONCLUSIVE
        value = s.examined.loss_share if s.examined.conclusive else -math.inf
    elif s.error is not None:
        group, value = FAILED, -math.inf
    else:
        group, value = SCREENED, s.screen_score
    return group, -(value if math.isfinite(value) else -math.inf), s.job, s.instance


def rank(standings: list[Standing]) -> tuple[RankRow, ...]:
    """Largest census loss first, ties marked; inconclusive, screened-only, then failed endpoints."""
    rows: list[RankRow] = []
    for i, s in enumerate(sorted(standings, key=_key), start=1):
        group = _key(s)[0]
        ex = s.examined if group in (EXAMINED, INCONCLUSIVE) else None
        interval = ex.loss_interval if ex is not None else (math.nan, math.nan)
        tied = False
        if rows and group == EXAMINED and rows[-1].group == EXAMINED:
            tied = interval[1] >= rows[-1].loss_interval[0] and rows[-1].loss_interval[1] >= interval[0]
        if group == FAILED:
            mechanism = "error"
        elif ex is None:
            mechanism = "screened"
        else:
            mechanism = ex.mechanism
        rows.append(RankRow(i, s.job, s.instance, group, mechanism,
                            ex.loss_share if ex is not None else s.screen_score, interval,
                            ex.principal if ex else "", ex.severity if ex else "",
                            ex.confidence if ex else math.nan, s.screen_score, s.flags, tied, s.error))
    return tuple(rows)
