"""verify-arm: engaged, not-engaged (which step) and inconclusive, on simulator runs and a closed form."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.advice.evidence import Argv
from pdcensus.series.model import Recording
from pdcensus.verify.arm import verify_arm
from pdcensus.verify.model import ArmOutcome, CompareStatus, StepStatus

from advice.synthetic import cmdline_bytes, step_time_sharing

ARGV_ON = Argv(("radiance", "serve", "--prefill-interleave", "2"), "test argv")
ARGV_OFF = Argv(("radiance", "serve", "--max-num-seqs", "64"), "test argv")


@pytest.fixture(scope="module")
def before() -> Recording:
    return step_time_sharing(0, seed=1)


def test_flag_in_argv_counter_moving_and_faster_busy_bucket_is_engaged(before: Recording) -> None:
    verdict = verify_arm(before, step_time_sharing(2, seed=2), "--prefill-interleave", "2", ARGV_ON)
    assert [s.status for s in verdict.steps] == [StepStatus.PASSED] * 3  # engaged
    # the TTFT histogram's le buckets (x0.5-x2 here) cannot place its TTFT against the predicted band
    # (x1.09-x1.70): the gate cannot tell, and says so, rather than pass it
    assert verdict.outcome is ArmOutcome.INCONCLUSIVE and "cannot tell" in verdict.reason
    rate = next(c for c in verdict.comparisons if c.quantity == "per-stream tok/s")
    assert rate.status is CompareStatus.WITHIN
    counter = verdict.step("counter")
    assert counter is not None and counter.numbers["held_per_chunk_step"] == pytest.approx(2.0)
    assert verdict.observed is not None and verdict.observed.prediction_error == pytest.approx(0.0, abs=0.10)


def test_a_1_0_13_build_with_the_flag_in_argv_is_not_engaged_at_the_counter(before: Recording) -> None:
    verdict = verify_arm(before, step_time_sharing(2, build="1.0.13", seed=3), "--prefill-interleave", "2", ARGV_ON)
    assert verdict.outcome is ArmOutcome.NOT_ENGAGED
    assert verdict.failed_step == "counter"
    assert "1.0.13" in verdict.reason


def test_a_flag_missing_from_argv_is_not_engaged_at_argv_whatever_the_metrics_say(before: Recording) -> None:
    verdict = verify_arm(before, step_time_sharing(2, seed=2), "--prefill-interleave", "2", ARGV_OFF)
    assert verdict.outcome is ArmOutcome.NOT_ENGAGED
    assert verdict.failed_step == "argv"


def test_argv_with_another_value_is_not_engaged(before: Recording) -> None:
    argv = Argv(("radiance", "serve", "--prefill-interleave=1"), "x")
    verdict = verify_arm(before, step_time_sharing(2, seed=2), "--prefill-interleave", "2", argv)
    assert verdict.failed_step == "argv" and "'1'" in verdict.reason


def test_without_argv_a_deploy_is_not_evidence_so_the_arm_is_inconclusive(before: Recording) -> None:
    verdict = verify_arm(before, step_time_sharing(2, seed=2), "--prefill-interleave", "2", None)
    assert verdict.outcome is ArmOutcome.INCONCLUSIVE
    assert "deploy is not evidence" in verdict.reason


def test_held_counter_staying_zero_is_not_engaged(before: Recording) -> None:
    verdict = verify_arm(before, step_time_sharing(0, seed=2), "--prefill-interleave", "2", ARGV_ON)
    assert verdict.failed_step == "counter" and "stayed zero" in verdict.reason


def test_a_rollback_to_zero_is_verified_by_the_counter_staying_zero(before: Recording) -> None:
    argv = Argv(("radiance", "serve", "--prefill-interleave", "0"), "x")
    verdict = verify_arm(step_time_sharing(2, seed=4), before, "--prefill-interleave", "0", argv)
    counter = verdict.step("counter")
    assert counter is not None and counter.status is StepStatus.PASSED


def test_cli_reads_argv_from_the_after_dirs_cmdline_and_prints_json(tmp_path: Path, before: Recording) -> None:
    from pdcensus.sources.openmetrics_writer import write_openmetrics

    (tmp_path / "before").mkdir()
    (tmp_path / "after").mkdir()
    write_openmetrics(before, tmp_path / "before" / "metrics.om")
    write_openmetrics(step_time_sharing(2, seed=2), tmp_path / "after" / "metrics.om")
    (tmp_path / "after" / "cmdline").write_bytes(cmdline_bytes({"--prefill-interleave": "2"}))
    proc = subprocess.run([sys.executable, "-m", "pdcensus", "verify-arm", "--before", str(tmp_path / "before"),
                           "--after", str(tmp_path / "after"), "--flag", "--prefill-interleave=2", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr  # engaged, but the TTFT histogram cannot tell (above)
    out = json.loads(proc.stdout)
    assert out["verdict"] == "inconclusive" and "cannot tell" in out["reason"]
    assert [s["name"] for s in out["steps"]] == ["argv", "counter", "bucket-pair"]
    assert out["steps"][0]["detail"].endswith(f"({tmp_path / 'after' / 'cmdline'})")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param(["--flag", "--prefill-interleaving=2"], "no knob", id="unknown-knob"),
        pytest.param(["--flag", "--prefill-interleave=2", "--cmdline", "/x", "--pid", "1"], "not both", id="two-argvs"),
    ],
)
def test_cli_refuses_bad_arguments_with_one_error_line(tmp_path: Path, args: list[str], match: str) -> None:
    from pdcensus.sources.openmetrics_writer import write_openmetrics

    write_openmetrics(step_time_sharing(0, duration_seconds=600), tmp_path / "m.om")
    proc = subprocess.run([sys.executable, "-m", "pdcensus", "verify-arm", "--before", str(tmp_path / "m.om"),
                           "--after", str(tmp_path / "m.om"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and match in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_on_simulator_runs_the_three_cases_come_out_as_the_runbook_says(tmp_path: Path) -> None:
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate
    from pdcensus.sources.load import load_source

    runs = {}
    for name, overrides in (("before", {"--prefill-interleave": "0"}), ("on", {"--prefill-interleave": "2"}),
                            ("old", {"--prefill-interleave": "2", "--build": "1.0.13"}), ("missing", {})):
        runs[name] = write_sim_dir(simulate("step-time-sharing", duration_seconds=3600, seed=5, overrides=overrides),
                                   tmp_path / name)
    before = load_source(runs["before"])

    def run(name: str) -> ArmOutcome:
        from pdcensus.advice.evidence import read_argv

        verdict = verify_arm(before, load_source(runs[name]), "--prefill-interleave", "2", read_argv(runs[name]))
        return verdict.outcome, verdict.failed_step  # type: ignore[return-value]

    # engaged (argv, counter, bucket pair); held steps also leave a backlog that raises the idle
    # bucket's TTFT tail, which no prediction covers: the gate says so (tests/verify/test_verify_gate.py)
    assert run("on") == (ArmOutcome.OFF_PREDICTION, None)
    assert run("old") == (ArmOutcome.NOT_ENGAGED, "counter")
    assert run("missing") == (ArmOutcome.NOT_ENGAGED, "argv")
