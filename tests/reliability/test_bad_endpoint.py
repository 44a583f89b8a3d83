"""One bad endpoint of several never costs the others their report (issue #25 item 8).

A recording carries a good simulated endpoint and a second one whose every sample is NaN. The
census must report the good one (exit 0), name the bad one with its reason (a line in the
terminal, an ``"error"`` entry in ``--json``), and still exit 3 where no endpoint can be read.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.census.model import reports_to_dict
from pdcensus.census.run import census_recording
from pdcensus.errors import DataError
from pdcensus.series.model import Recording

from tests.census.synth import Synth, synth_recording

GOOD = "sim-0:7770"
BAD = "bad:7770"


def _nan_twin(rec: Recording, instance: str) -> Recording:
    good = rec.endpoints[0]
    twin = synth_recording(Synth(seed=2)).endpoints[0]
    twin.instance = instance
    twin.values[:] = float("nan")
    return Recording(rec.families, [good, twin], "two")


def test_the_good_endpoint_keeps_its_report_and_the_bad_one_its_reason() -> None:
    rec = _nan_twin(synth_recording(Synth(mechanism="sharing")), "other:7770")
    reports = census_recording(rec)
    assert [r.instance for r in reports] == ["synth:7770"]
    failed = reports[0].failed_endpoints
    assert [f.instance for f in failed] == ["other:7770"] and failed[0].reason
    d = reports_to_dict(reports)
    assert d["failed"] == ["other:7770"]
    by_instance = {e["endpoint"]["instance"]: e for e in d["endpoints"]}
    assert by_instance["other:7770"]["verdict"] is None and by_instance["other:7770"]["error"]
    assert by_instance["synth:7770"]["verdict"]["mechanism"] == "step-time-sharing"


def test_every_endpoint_bad_is_still_a_data_error() -> None:
    rec = _nan_twin(synth_recording(Synth()), "other:7770")
    rec.endpoints[0].values[:] = float("nan")
    with pytest.raises(DataError):
        census_recording(rec)


def _two_endpoint_file(tmp_path: Path) -> Path:
    """A simulated recording, every sample line doubled by a NaN copy on a second instance."""
    sim = tmp_path / "sim"
    subprocess.run([sys.executable, "-m", "pdcensus", "sim", "step-time-sharing", "--duration", "30m",
                    "--out", str(sim)], check=True, capture_output=True)
    lines: list[str] = []
    sample = re.compile(r'^(\S+\{.*instance=")' + re.escape(GOOD) + r'(".*\}) (\S+) (\S+)$')
    for line in (sim / "metrics.om").read_text().splitlines():
        lines.append(line)
        m = sample.match(line)
        if m:
            lines.append(f"{m.group(1)}{BAD}{m.group(2)} NaN {m.group(4)}")
    out = tmp_path / "two.om"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_the_cli_reports_the_good_endpoint_and_names_the_bad_one(tmp_path: Path) -> None:
    path = _two_endpoint_file(tmp_path)
    text = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(path)], capture_output=True, text=True)
    assert text.returncode == 0, text.stderr
    assert f"endpoint {BAD}: not censused:" in text.stdout
    assert "step-time-sharing" in text.stdout
    as_json = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(path), "--json"],
                             capture_output=True, text=True)
    assert as_json.returncode == 0, as_json.stderr
    d = json.loads(as_json.stdout)
    assert d["failed"] == [BAD]
    verdicts = {e["endpoint"]["instance"]: e["verdict"] for e in d["endpoints"]}
    assert verdicts[BAD] is None and verdicts[GOOD]["mechanism"] == "step-time-sharing"
