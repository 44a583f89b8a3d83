"""`pdcensus whatif` end to end: JSON keys, the calibration error before any prediction, refusals and usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import simulate


def _pdcensus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def sharing_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whatif") / "sts"
    write_sim_dir(simulate("step-time-sharing", duration_seconds=3600, seed=2), out)
    return out


@pytest.mark.slow
def test_whatif_json_reports_the_calibration_error_and_predicts_interleave_protects_decoders(sharing_dir: Path) -> None:
    proc = _pdcensus("whatif", str(sharing_dir), "--set", "--prefill-interleave=2", "--seeds", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["schema"] == "pdcensus/whatif/v1"
    assert list(out)[:6] == ["schema", "source", "calibration", "calibration_error", "bound", "bounded_figures"]
    assert out["refused"] is None
    assert out["calibration"]["engine"] == "radiance"
    assert out["calibration"]["flags"]["--checkpoint-interval"] == "4096"  # read from the recording's cmdline
    for name in out["bounded_figures"]:
        assert abs(out["calibration_error"][name]) <= out["bound"]
    assert out["change"]["set"] == {"--prefill-interleave": "2"}
    busy = next(f for f in out["figures"] if f["name"] == "per_stream_busy_tokens_per_second")
    assert busy["predicted"]["low"] <= busy["predicted"]["median"] <= busy["predicted"]["high"]
    # held decode-only steps between chunk steps: decoders beside a prefill get more tokens, prompts wait longer
    assert busy["predicted"]["median"] > busy["observed"]
    ttft = next(f for f in out["figures"] if f["name"] == "ttft_p90_seconds")
    assert ttft["predicted"]["median"] > ttft["observed"]
    assert out["buckets"] and out["buckets"][0]["bucket"] == "idle"


@pytest.mark.slow
def test_whatif_refuses_to_predict_beyond_the_calibration_bound(sharing_dir: Path) -> None:
    proc = _pdcensus("whatif", str(sharing_dir), "--set", "max-num-seqs=16", "--seeds", "1", "--json",
                     "--max-calibration-error", "0.0001")
    assert proc.returncode == 3
    out = json.loads(proc.stdout)
    assert out["refused"].startswith("calibration error beyond the bound")
    assert out["figures"] == [] and out["calibration_error"]
    assert proc.stderr.startswith("error: calibration error beyond the bound")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--set", "-ub=128"], "unknown knob '-ub' for radiance", id="another engine's knob"),
    pytest.param(["--set", "no-such-flag=1"], "unknown knob", id="unknown knob"),
    pytest.param([], "give at least one --set", id="no knob"),
    pytest.param(["--set", "load=-1"], "positive factor", id="bad load"),
])
@pytest.mark.slow
def test_an_unknown_or_missing_knob_is_a_usage_error(sharing_dir: Path, args: list[str], message: str) -> None:
    proc = _pdcensus("whatif", str(sharing_dir), "--seeds", "1", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr
