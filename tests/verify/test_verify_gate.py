"""verify-arm as a gate: every exit code on real simulator runs, the three ways to write the knob,
the tolerance, and the comparison of every bucket's TTFT and ITL (pdcensus.verify.gate).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pdcensus.errors import UsageError
from pdcensus.verify import gate
from pdcensus.verify.arm_args import ARM_EXIT_CODES, parse_flag
from pdcensus.verify.model import ArmOutcome, CompareStatus

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One hour each: step-time sharing without and with --prefill-interleave 2, and a preemption stall
    without and with --max-num-seqs 32 (each arm at another seed: another day of the same load)."""
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate

    root = tmp_path_factory.mktemp("gate")
    plan = {"sts": ("step-time-sharing", 5, {}), "interleave": ("step-time-sharing", 5, {"--prefill-interleave": "2"}),
            "stall": ("preemption-stall", 1, {}), "seqs": ("preemption-stall", 2, {"--max-num-seqs": "32"})}
    return {name: write_sim_dir(simulate(scenario, duration_seconds=3600, seed=seed, overrides=flags), root / name)
            for name, (scenario, seed, flags) in plan.items()}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # a wide terminal: one table row per line
    return subprocess.run([sys.executable, "-m", "pdcensus", "verify-arm", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_an_engaged_arm_the_histograms_cannot_place_is_inconclusive_never_within(runs: dict[str, Path]) -> None:
    """--max-num-seqs 32 engaged, but the le buckets cannot resolve a 25 % rise of most latencies: exit 3."""
    proc = _cli("--before", str(runs["stall"]), "--after", str(runs["seqs"]), "--flag", "--max-num-seqs 32", "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "inconclusive" and out["tolerance"] == pytest.approx(gate.DEFAULT_TOLERANCE)
    assert [s["status"] for s in out["steps"]] == ["passed"] * 3  # it did engage
    assert "cannot tell" in out["reason"]
    decided = [c for c in out["comparisons"] if c["status"] != "undecided"]
    assert {c["quantity"] for c in decided} >= {"TTFT p90", "ITL p99"}  # latencies of every bucket, not only the pair
    for c in decided:
        (low, high), (b_low, b_high) = c["interval"], c["band"]
        high = float("inf") if high is None else high
        b_high = float("inf") if b_high is None else b_high
        if c["status"] == "within":  # only where the whole interval lies inside the band
            assert b_low <= low and high <= b_high, c
        elif c["status"] == "cannot-tell":
            assert not (b_low <= low and high <= b_high) and not (high < b_low or low > b_high), c


def test_exit_5_when_held_steps_raise_the_idle_buckets_ttft_that_nothing_predicted(runs: dict[str, Path]) -> None:
    proc = _cli("--before", str(runs["sts"]), "--after", str(runs["interleave"]), "--flag", "--prefill-interleave",
                "2", "--json")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "engaged-off-prediction"
    assert [s["status"] for s in out["steps"]] == ["passed"] * 3  # it did engage
    costs = [c for c in out["comparisons"] if c["status"] == "unpredicted-cost"]
    assert costs and all(c["bucket"] == "idle" and c["quantity"].startswith("TTFT") for c in costs)
    for c in costs:  # the whole interval of after / before lies above the allowed rise
        assert c["interval"][0] > 1 + out["tolerance"] and not c["predicted"]


def test_a_wider_tolerance_widens_the_band_in_every_view(runs: dict[str, Path]) -> None:
    proc = _cli("--before", str(runs["sts"]), "--after", str(runs["interleave"]), "--flag", "--prefill-interleave=2",
                "--tolerance", "4")
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr  # no cost at x5; what straddles x5 cannot tell
    assert "400%" in proc.stdout and "predicted vs observed" in proc.stdout and "per-stream tok/s" in proc.stdout
    first = proc.stdout.split(" argv ")[0]
    table = proc.stdout.split("predicted vs observed")[1]
    if "<= x" in first:  # the first line and the table state the same band
        assert "<= x5.00" in first and "none (<= x5.00)" in table
    assert "x1.00)" not in first


def test_exit_1_when_the_flag_is_not_in_argv(runs: dict[str, Path]) -> None:
    proc = _cli("--before", str(runs["sts"]), "--after", str(runs["sts"]), "--flag", "--prefill-interleave", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NOT-ENGAGED" in proc.stdout and "argv" in proc.stdout


def test_exit_3_when_no_argv_can_prove_the_deploy(runs: dict[str, Path]) -> None:
    # a bare recording file has no cmdline beside it: the counter and buckets agree, argv is unknown
    proc = _cli("--before", str(runs["sts"]), "--after", str(runs["interleave"] / "metrics.om"), "--flag",
                "--prefill-interleave=2", "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "inconclusive"


def test_exit_3_with_one_line_when_a_recording_cannot_be_read(tmp_path: Path, runs: dict[str, Path]) -> None:
    proc = _cli("--before", str(tmp_path / "missing.om"), "--after", str(runs["sts"]), "--flag", "--max-num-seqs=8")
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("args", [pytest.param(["--tolerance", "0"], id="zero-tolerance"),
                                  pytest.param(["--flag", "--a 1 2"], id="three-words"),
                                  pytest.param(["extra", "words"], id="two-values")])
def test_exit_2_on_a_usage_error(args: list[str], runs: dict[str, Path]) -> None:
    base = ["--before", str(runs["sts"]), "--after", str(runs["sts"])]
    proc = _cli(*base, *(args if args[0] == "--flag" else ["--flag", "--prefill-interleave", *args]))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


@pytest.mark.parametrize(("flag", "rest"), [
    pytest.param("--prefill-interleave 2", [], id="as-the-advice-prints-it"),
    pytest.param("--prefill-interleave=2", [], id="equals"),
    pytest.param("--prefill-interleave", ["2"], id="two-words"),
    pytest.param("prefill-interleave=2", [], id="bare-name"),
])
def test_every_way_of_writing_the_knob_names_the_same_arm(flag: str, rest: list[str]) -> None:
    assert parse_flag(flag, rest) == ("--prefill-interleave", "2")


def test_a_knob_without_a_value_and_bad_forms() -> None:
    assert parse_flag("--max-num-seqs") == ("--max-num-seqs", None)
    for bad in ("--", "--x=1 2", "-- 2"):
        with pytest.raises(UsageError):
            parse_flag(bad)


def test_every_outcome_has_its_documented_exit_code() -> None:
    assert ARM_EXIT_CODES == {ArmOutcome.ENGAGED: 0, ArmOutcome.NOT_ENGAGED: 1, ArmOutcome.INCONCLUSIVE: 3,
                              ArmOutcome.OFF_PREDICTION: 5}
    doc = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text()
    assert "engaged-off-prediction" in doc and "| 5 |" in doc


def test_two_days_of_the_same_flags_pass_the_gate(runs: dict[str, Path], tmp_path: Path) -> None:
    """Seed noise alone (same scenario and flags, another seed) is no cost in any bucket."""
    from pdcensus.verify.arm import bucket_pair, read_window
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate
    from pdcensus.sources.load import load_source

    other = write_sim_dir(simulate("step-time-sharing", duration_seconds=3600, seed=6), tmp_path / "sts6")
    b, a = read_window(load_source(runs["sts"])), read_window(load_source(other))
    pair = bucket_pair(b.signals, a.signals)
    comparisons = gate.compare_arm(b.signals, a.signals, pair.before_index, pair.after_index,
                                   tuple(r.bucket for r in pair.before.rows), None, float("nan"))
    assert len(comparisons) >= 10
    assert not [c for c in comparisons if c.status in (CompareStatus.COST, CompareStatus.OFF)]
    assert np.isfinite([c.ratio for c in comparisons if c.status is CompareStatus.WITHIN]).all()


def test_the_replicates_quantile_is_prometheus_histogram_quantile(runs: dict[str, Path]) -> None:
    """quantile_rows (the bootstrap's matrix form) gives what series.quantile gives, on a real TTFT histogram."""
    from pdcensus.verify.arm import read_window
    from pdcensus.series.profiles import Signal
    from pdcensus.series.quantile import quantile_of_bounds, quantile_rows
    from pdcensus.sources.load import load_source

    h = read_window(load_source(runs["sts"])).signals.histograms[Signal.TTFT]
    cumulative = np.cumsum(np.nan_to_num(h.increases), axis=0)  # every prefix of the window: many shapes
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        got = quantile_rows(q, h.upper_bounds, cumulative)
        want = np.array([quantile_of_bounds(q, h.upper_bounds, row) for row in cumulative])
        np.testing.assert_allclose(got, want, equal_nan=True)


def test_an_arm_on_an_endpoint_over_capacity_says_a_knob_only_moves_the_wait(tmp_path: Path) -> None:
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate

    before = write_sim_dir(simulate("overloaded", duration_seconds=3600, seed=1), tmp_path / "before")
    after = write_sim_dir(simulate("overloaded", duration_seconds=3600, seed=2, overrides={"--max-num-seqs": "32"}),
                          tmp_path / "after")
    proc = _cli("--before", str(before), "--after", str(after), "--flag", "--max-num-seqs 32", "--json")
    out = json.loads(proc.stdout)
    assert out["verdict"] != "not-engaged", out["reason"]  # the flag did reach argv and cap the batch
    assert "over capacity in the before and after window" in out["reason"]
    assert "cannot fix it" in out["reason"]
