"""One prediction per knob (issue #26 item 4): ``census`` runs the calibrated twin on the advice
(unless ``--no-twin``): its prediction leads where it calibrates, the closed form's arithmetic
follows labelled as such, the one to trust is named, and every view says so.

On a simulated step-time-sharing hour the twin calibrates (within whatif's bound) and accepts
``--prefill-interleave``, so the twin is the one to trust; a knob the twin cannot set leaves the
closed form trusted with the twin's one-line reason. With ``--no-twin`` each view says the
figures are the closed form's and the twin did not run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pdcensus import api
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import simulate
from pdcensus.whatif.advice_check import check_recommendation
from pdcensus.whatif.run import CalibratedTwin

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sharing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("twin") / "sts"
    write_sim_dir(simulate("step-time-sharing", duration_seconds=3600, seed=3), out)
    return out


def test_the_headline_knob_carries_the_twin_beside_the_closed_form(sharing_dir: Path) -> None:
    seen: list[str] = []
    report = api.census_all(sharing_dir, twin=True, progress=seen.append)[0]
    rec = report.advice[0]
    assert rec.knob == "--prefill-interleave" and rec.twin is not None, rec
    assert seen and "--prefill-interleave" in seen[0]
    check = rec.twin
    assert check.trust == "twin" and not check.refused, check.why
    heavy = check.rows[0]
    assert heavy.figure.startswith("per-stream decode, heaviest bucket")
    # the closed form's figure is the advice's own, the twin's is its own run with a range over seeds
    assert heavy.closed_form == pytest.approx(rec.predicted.busy_bucket_per_stream_tokens_per_second_predicted)
    assert heavy.now == pytest.approx(rec.predicted.measured_busy_per_stream_tokens_per_second)
    assert heavy.twin_low <= heavy.twin <= heavy.twin_high
    assert heavy.twin > heavy.now  # held decode-only steps give decoders beside a prefill more tokens
    assert heavy.trust == "twin" and check.rows[-1].figure.startswith("TTFT p90") and check.rows[-1].trust == "between"
    assert all(abs(v) <= 0.25 for k, v in check.calibration_error.items() if k.startswith("per_stream"))
    d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert d["advice"][0]["predicted_by"] == "closed-form" and d["advice"][0]["twin"]["trust"] == "twin"
    assert d["advice"][0]["act_on"] == "twin"


def test_a_knob_the_twin_cannot_set_leaves_the_closed_form_trusted_with_the_reason(sharing_dir: Path) -> None:
    report = api.census_all(sharing_dir)[0]
    rec = replace(report.advice[0], knob="--no-such-knob", value="3")
    recording = api._recording(sharing_dir / "metrics.om")
    check = check_recommendation(lambda: CalibratedTwin(recording, seeds=1), rec, seeds=1)
    assert check.trust == "closed-form" and check.refused and not check.rows
    assert "--no-such-knob" in check.why


def test_a_spent_dial_with_no_next_value_runs_no_twin_and_says_so(sharing_dir: Path) -> None:
    """vLLM's --long-prefill-token-threshold spent at 512: the advice names no value, so there is nothing to run
    (the twin was asked for "--long-prefill-token-threshold=" and every view printed its usage error)."""
    from pdcensus.report.twin_view import NO_VALUE, source_line
    from pdcensus.whatif.advice_check import check_report

    report = api.census_all(sharing_dir)[0]
    spent = replace(report.advice[0], value="", dial_state="spent")
    asked: list[str] = []
    checked = check_report(api._recording(sharing_dir / "metrics.om"), replace(report, advice=(spent,)),
                           seeds=1, progress=asked.append)
    assert checked.advice[0].twin is None and not asked
    assert source_line(checked.advice[0]) == NO_VALUE and "--no-twin" not in NO_VALUE


def test_one_calibration_and_one_unchanged_run_per_seed_serve_every_recommendation(
        sharing_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two recommendations of one report share the twin: it is calibrated once, and its unchanged runs run once."""
    from pdcensus.whatif import advice_check, run

    report = api.census_all(sharing_dir)[0]
    rec = next(r for r in report.advice if not r.minor and r.knob.startswith("--"))
    other = replace(rec, value=str(int(rec.value) + 1))
    made, unchanged = [], []
    real_init, real_sim = run.CalibratedTwin.__init__, run.simulate_twin

    def counting_init(self: run.CalibratedTwin, *a: object, **k: object) -> None:
        made.append(1)
        real_init(self, *a, **k)  # type: ignore[arg-type]

    def counting_sim(calibration: object, seed: int, change: object = None, clients: object = None) -> object:
        if change is None:
            unchanged.append(seed)
        return real_sim(calibration, seed, change, clients)  # type: ignore[arg-type]

    monkeypatch.setattr(run.CalibratedTwin, "__init__", counting_init)
    monkeypatch.setattr(run, "simulate_twin", counting_sim)
    checked = advice_check.check_report(api._recording(sharing_dir / "metrics.om"),
                                        replace(report, advice=(rec, other)), seeds=2)
    assert [r.twin is not None and r.twin.trust for r in checked.advice] == ["twin", "twin"]
    assert checked.advice[0].twin.setting != checked.advice[1].twin.setting  # type: ignore[union-attr]
    assert len(made) == 1 and sorted(unchanged) == [0, 1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "COLUMNS": "120"})


def test_every_view_leads_with_the_twin_by_default_and_says_closed_form_with_no_twin(sharing_dir: Path,
                                                                                     tmp_path: Path) -> None:
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    default = _cli("census", str(sharing_dir), "--markdown", str(md), "--html", str(html))
    assert default.returncode == 0, default.stderr
    assert "running the calibrated twin on --prefill-interleave" in default.stderr
    trust = [line for line in md.read_text().splitlines() if "trust: per-stream decode: the twin" in line]
    assert trust, md.read_text()[-2000:]
    out = " ".join(default.stdout.split())
    assert "trust: per-stream decode: the twin" in out
    assert "| per-stream decode, heaviest bucket" in md.read_text()
    # the twin's figure leads the advice; the closed form's arithmetic follows, labelled
    lead = out.index("predicted by the calibrated twin (--prefill-interleave=")
    assert lead < out.index("closed form (the ledger's arithmetic, beside the twin's): --prefill-interleave")
    page = " ".join(md.read_text().split())
    assert page.index("predicted by the calibrated twin") < page.index("closed form (the ledger's arithmetic")
    assert "predicted by the calibrated twin" in html.read_text()
    as_json = json.loads(_cli("census", str(sharing_dir), "--json").stdout)
    assert as_json["advice"][0]["act_on"] == "twin" and as_json["advice"][0]["twin"]["trust"] == "twin"
    plain = _cli("census", str(sharing_dir), "--no-twin")
    assert plain.returncode == 0, plain.stderr
    said = " ".join(plain.stdout.split())
    assert "predicted in closed form" in said and "did not run (--no-twin)" in said
    assert "trust: per-stream decode" not in plain.stdout and "predicted by the calibrated twin" not in said
    assert "running the calibrated twin" not in plain.stderr
