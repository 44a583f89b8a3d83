"""verify-arm --whatif: the twin's predicted ratios enter the gate (pdcensus.verify.forecast).

On the simulator, --prefill-interleave 2 holds decode steps and the idle bucket's TTFT p99 rises
about x3; the advice predicts the busy TTFT only, so without the file that rise is a cost nobody
predicted (exit 5, tests/verify/test_verify_gate.py). ``pdcensus whatif`` calibrated on the
before run predicts it; with its file the rise is a predicted one, judged on whatif's ratio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.advice.knobs import get_knob
from pdcensus.errors import UsageError
from pdcensus.verify.forecast import LATENCY_FIGURES, read_forecast

pytestmark = pytest.mark.slow


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=300,
                          env=env)


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate

    root = tmp_path_factory.mktemp("whatif-arm")
    out = {name: write_sim_dir(simulate("step-time-sharing", duration_seconds=3600, seed=5, overrides=flags),
                               root / name) for name, flags in (("sts", {}), ("on", {"--prefill-interleave": "2"}))}
    proc = _run("whatif", str(out["sts"]), "--set", "--prefill-interleave=2", "--seeds", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out["whatif"] = root / "whatif.json"
    out["whatif"].write_text(proc.stdout)
    return out


def _verify(arm: dict[str, Path], *extra: str) -> tuple[int, dict[str, object]]:
    proc = _run("verify-arm", "--before", str(arm["sts"]), "--after", str(arm["on"]), "--flag",
                "--prefill-interleave=2", "--json", *extra)
    assert proc.returncode in (0, 1, 3, 5), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_the_rise_whatif_predicted_is_judged_on_its_ratio_not_called_a_cost(arm: dict[str, Path]) -> None:
    code, plain = _verify(arm)
    cost = {(c["bucket"], c["quantity"]) for c in plain["comparisons"] if c["status"] == "unpredicted-cost"}
    assert code == 5 and ("idle", "TTFT p99") in cost  # without the file: nothing predicted the idle TTFT rise
    data = json.loads(arm["whatif"].read_text())
    figure = next(f for f in data["figures"] if f["name"] == "idle_ttft_p99_seconds")
    allowed = figure["predicted"]["high"] / figure["observed"]
    assert allowed > 1.5  # the twin did see the held steps raise it

    code, told = _verify(arm, "--whatif", str(arm["whatif"]))
    assert code != 5 or all((c["bucket"], c["quantity"]) not in cost
                            for c in told["comparisons"] if c["status"] == "unpredicted-cost")
    idle = next(c for c in told["comparisons"] if (c["bucket"], c["quantity"]) == ("idle", "TTFT p99"))
    assert idle["predicted"] and idle["status"] != "unpredicted-cost"
    assert idle["predicted_ratio"] == pytest.approx(allowed)
    assert idle["basis"].startswith("whatif whatif.json: idle_ttft_p99_seconds")
    assert "whatif" in str(told["whatif"]) and "predicted" in str(told["whatif"])
    # the advice's own prediction (the busy rate, the busy TTFT) stays the advice's
    rate = next(c for c in told["comparisons"] if c["quantity"] == "per-stream tok/s")
    assert "before ledger" in rate["basis"]


def test_a_whatif_that_refused_leaves_the_gate_as_without_it_and_says_so(arm: dict[str, Path],
                                                                          tmp_path: Path) -> None:
    data = json.loads(arm["whatif"].read_text())
    data["refused"] = "the twin's busy per-stream decode is off by 40 %"
    refused = tmp_path / "refused.json"
    refused.write_text(json.dumps(data))
    code, plain = _verify(arm)
    code_r, told = _verify(arm, "--whatif", str(refused))
    assert code_r == code
    assert [c["status"] for c in told["comparisons"]] == [c["status"] for c in plain["comparisons"]]
    assert "refused to predict (the twin's busy per-stream decode is off by 40 %)" in str(told["reason"])


@pytest.mark.parametrize(("edit", "says"), [
    pytest.param({"change": {"set": {"--max-num-seqs": "8"}}}, "predicts --max-num-seqs=8", id="another-knob"),
    pytest.param({"change": {"set": {"--prefill-interleave": "3"}}}, "the arm deployed --prefill-interleave=2",
                 id="another-value"),
    pytest.param({"schema": "pdcensus/census/v1"}, "not a whatif result", id="not-whatif"),
])
def test_a_whatif_for_another_arm_is_a_usage_error_in_one_line(arm: dict[str, Path], tmp_path: Path,
                                                               edit: dict[str, object], says: str) -> None:
    data = {**json.loads(arm["whatif"].read_text()), **edit}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    proc = _run("verify-arm", "--before", str(arm["sts"]), "--after", str(arm["on"]), "--flag",
                "--prefill-interleave=2", "--whatif", str(bad))
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert says in proc.stderr


def test_a_file_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "w.json"
    bad.write_text("what-if vllm: ...")
    with pytest.raises(UsageError, match="not JSON"):
        read_forecast(bad, get_knob("--prefill-interleave"), "2")
    with pytest.raises(UsageError, match="cannot read it"):
        read_forecast(tmp_path / "missing.json", get_knob("--prefill-interleave"), "2")


def test_another_spelling_of_the_flag_and_its_number_name_the_same_arm(tmp_path: Path) -> None:
    """whatif's long_prefill_token_threshold=512.0 is the arm's --long-prefill-token-threshold 512; a withheld
    figure gives the gate nothing."""
    knob = get_knob("--long-prefill-token-threshold", "vllm")
    figures = [{"name": name, "observed": 1.0, "predicted": {"median": 2.0, "low": 1.5, "high": 3.0},
                "basis": "observed x twin after/before"} for name in LATENCY_FIGURES.values()]
    figures[0]["basis"] = "withheld: the batch leaves the fitted range"
    data = {"schema": "pdcensus/whatif/v1", "source": "before", "refused": None, "seeds": 2,
            "change": {"set": {"long_prefill_token_threshold": "512.0"}}, "figures": figures}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    f = read_forecast(path, knob, "512")
    assert len(f.latency) == len(LATENCY_FIGURES) - 1 and f.busy_rate is None
    assert all(r == pytest.approx(3.0) for r, _ in f.latency.values())  # the high end of the seeds' range
    for fig in figures:  # a predicted fall allows no rise (it asks no bucket for a benefit)
        fig["predicted"] = {"median": 0.4, "low": 0.3, "high": 0.5}
    path.write_text(json.dumps(data))
    falls = read_forecast(path, knob, "512")
    assert all(r == 1.0 and "a fall, so no rise allowed" in why for r, why in falls.latency.values())
