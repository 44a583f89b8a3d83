"""The report of one endpoint: its census, the advice as typed values, and the side evidence cited.

Why a type of its own: the census (:mod:`pdcensus.census`) sits below advice and must not know
it exists, yet the renderers need each recommendation as a value whose fields mypy checks, not
as a dictionary read back by key (a renamed field would then fail silently). An
:class:`EndpointReport` is a :class:`~pdcensus.census.model.CensusReport` (every census field,
unchanged, so whatever reads a census reads this) plus ``advice`` as
:class:`~pdcensus.advice.model.Recommendation` values and ``side_evidence`` as
:class:`SideEvidence`. Only :meth:`EndpointReport.to_dict`, the JSON edge, flattens them; the
JSON is the census schema ``pdcensus/census/v2``, key for key.

A plain census (no advice pass ran, e.g. the fleet screen or a test calling the census
directly) reads as no advice and no side evidence through :func:`advice_of` and
:func:`side_evidence_of`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

from pdcensus.advice.model import Recommendation
from pdcensus.census.model import CensusReport

PREFIX_DEPTHS_FROM = "/stats recent_requests (multi-turn)"


@dataclass(frozen=True)
class SideEvidence:
    """Where the advice's side-channel facts came from; None/empty where a channel gave nothing.

    ``unreadable`` says why an evidence bundle that was asked for could not be read;
    ``origin`` names the bundle read; ``argv`` is the engine's command line as one string;
    ``boot_ledger`` holds the boot ledger's numbers that were found (None: no boot lines);
    ``prefix_hit_depths`` counts the multi-turn requests whose prompt depth ``/stats`` gave;
    ``missing`` names the side channels the bundle lacks.
    """

    unreadable: str | None = None
    origin: str | None = None
    argv: str | None = None
    boot_ledger: Mapping[str, int] | None = None
    prefix_hit_depths: int = 0
    missing: tuple[str, ...] = ()
    # /diagnostics as read by pdcensus.advice.capacity.read_diagnostics (BoxReading.to_dict())
    diagnostics: Mapping[str, object] | None = None

    def to_dict(self) -> dict[str, object]:
        """The JSON ``side_evidence`` object: only the keys a channel filled, in a fixed order."""
        out: dict[str, object] = {}
        if self.unreadable is not None:
            out["unreadable"] = self.unreadable
        if self.origin is not None:
            out["origin"] = self.origin
        if self.argv is not None:
            out["argv"] = self.argv
        if self.boot_ledger is not None:
            out["boot_ledger"] = dict(self.boot_ledger)
        if self.prefix_hit_depths:
            out["prefix_hit_depths_tokens"] = {"n": self.prefix_hit_depths, "from": PREFIX_DEPTHS_FROM}
        if self.diagnostics is not None:
            out["diagnostics"] = dict(self.diagnostics)
        if self.missing:
            out["missing"] = list(self.missing)
        return out


@dataclass(frozen=True)
class EndpointReport(CensusReport):
    """A census report with its advice attached (typed) and the side evidence that advice cited."""

    advice: tuple[Recommendation, ...] = field(default=())
    side_evidence: SideEvidence = field(default_factory=SideEvidence)

    @classmethod
    def of(cls, census: CensusReport, advice: Sequence[Recommendation],
           side_evidence: SideEvidence) -> EndpointReport:
        """``census`` (its census fields, as they are) with ``advice`` and ``side_evidence``."""
        census_fields = {f.name: getattr(census, f.name) for f in fields(CensusReport)}
        return cls(**census_fields, advice=tuple(advice), side_evidence=side_evidence)

    def to_dict(self) -> dict[str, object]:
        """The census's JSON object with the ``advice`` and ``side_evidence`` keys filled (same place)."""
        out = super().to_dict()
        out["advice"] = [r.to_dict() for r in self.advice]
        out["side_evidence"] = self.side_evidence.to_dict()
        return out


def advice_of(report: CensusReport) -> tuple[Recommendation, ...]:
    """The report's recommendations; none for a census no advice pass has seen."""
    return report.advice if isinstance(report, EndpointReport) else ()


def side_evidence_of(report: CensusReport) -> SideEvidence:
    """The report's side evidence; empty for a census no advice pass has seen."""
    return report.side_evidence if isinstance(report, EndpointReport) else SideEvidence()
