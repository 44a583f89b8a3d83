"""The fleet's resume state: what each finished stage found, in one JSON file written after every step.

A fleet run over a thousand endpoints can be interrupted (a deploy, a lost connection, Ctrl-C).
The state file holds the discovered endpoints, the screen rows and timelines, and each examined
endpoint's outcome (its census summed up and as JSON), and the key of the run (store, selector,
window, K). ``--resume`` reads it back when the key matches and refuses it when not, so a state
file is never applied to another question. Writes go to a temporary file renamed into place, so an
interruption mid-write leaves the previous state whole.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdcensus.errors import UsageError
from pdcensus.fleet.discover import Discovered
from pdcensus.fleet.examine import ExamineOutcome
from pdcensus.fleet.rank import Examined
from pdcensus.fleet.screen_model import ScreenRow

STATE_SCHEMA = "pdcensus/fleet-state/v1"


def _outcome_to_dict(o: ExamineOutcome) -> dict[str, Any]:
    return {"job": o.job, "instance": o.instance, "examined": o.examined.to_dict() if o.examined else None,
            "report": o.report_json, "error": o.error, "warnings": list(o.warnings), "seconds": o.seconds}


def _outcome_from_dict(body: dict[str, Any]) -> ExamineOutcome:
    examined = Examined.from_dict(body["examined"]) if body.get("examined") else None
    return ExamineOutcome(str(body["job"]), str(body["instance"]), examined, body.get("report"), body.get("error"),
                          tuple(body.get("warnings", [])), float(body.get("seconds", 0.0)))


@dataclass
class FleetState:
    """The stages done so far; ``save`` writes it where ``path`` says (nowhere when None)."""

    path: Path | None
    key: dict[str, Any]
    discovered: list[Discovered] | None = None
    screen: list[ScreenRow] | None = None
    timelines: dict[tuple[str, str], dict[str, list[float]]] | None = None
    examined: dict[tuple[str, str], ExamineOutcome] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    resumed: bool = False

    @classmethod
    def open(cls, path: Path | None, key: dict[str, Any], *, resume: bool) -> FleetState:
        """A fresh state, or (``resume``) the one in ``path`` if it answers the same question."""
        if not resume or path is None or not path.exists():
            if resume and path is None:
                raise UsageError("--resume needs --state FILE")
            return cls(path, key)
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"cannot resume from {path}: {exc}") from None
        if body.get("schema") != STATE_SCHEMA or body.get("key") != key:
            raise UsageError(f"cannot resume from {path}: it is the state of another run "
                             f"({body.get('key')}); this run is {key}")
        state = cls(path, key, resumed=True, warnings=list(body.get("warnings", [])))
        if body.get("discovered") is not None:
            state.discovered = [Discovered(*d) for d in body["discovered"]]
        if body.get("screen") is not None:
            state.screen = [ScreenRow.from_dict(r) for r in body["screen"]]
            state.timelines = {(t["job"], t["instance"]): {k: [float("nan") if v is None else v for v in vs]
                                                           for k, vs in t["series"].items()}
                               for t in body.get("timelines", [])}
        for o in body.get("examined", []):
            outcome = _outcome_from_dict(o)
            state.examined[(outcome.job, outcome.instance)] = outcome
        return state

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": STATE_SCHEMA, "key": self.key,
            "discovered": (None if self.discovered is None
                           else [[d.job, d.instance, d.profile] for d in self.discovered]),
            "screen": None if self.screen is None else [r.to_dict() for r in self.screen],
            "timelines": [{"job": j, "instance": i, "series": {k: [v if v == v else None for v in vs]
                                                               for k, vs in series.items()}}
                          for (j, i), series in (self.timelines or {}).items()],
            "examined": [_outcome_to_dict(o) for o in self.examined.values()],
            "warnings": self.warnings,
        }

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), allow_nan=False), encoding="utf-8")
        os.replace(tmp, self.path)
