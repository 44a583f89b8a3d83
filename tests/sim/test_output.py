"""The sim directory: files, determinism, the CLI commands, and a real promtool backfill."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pdcensus.cli import main
from pdcensus.sim import simulate, write_sim_dir
from pdcensus.sim.output import FILES

TRUTH_KEYS = {"scenario", "seed", "flags", "build", "profile", "mechanism", "mechanisms", "allowed", "segments",
              "loss_seconds", "loss_share", "rule", "decode_step_seconds", "chunk_step_seconds",
              "prefix_hit_cut_share"}


def _write(tmp_path: Path, name: str, seed: int = 5) -> Path:
    return write_sim_dir(simulate(name, duration_seconds=900.0, seed=seed), tmp_path / f"{name}-{seed}")


def test_the_sim_dir_holds_every_file_and_the_truth_has_its_contract(tmp_path: Path) -> None:
    out = _write(tmp_path, "step-time-sharing")
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    truth = json.loads((out / "truth.json").read_text())
    assert TRUTH_KEYS <= set(truth)
    assert truth["segments"][0]["mechanism"] == truth["mechanism"]
    assert (out / "metrics.om").read_text().endswith("# EOF\n")
    argv = (out / "cmdline").read_bytes().split(b"\0")
    assert argv[:2] == [b"radiance", b"serve"] and argv[-1] == b""
    assert "smallest pass 256 tokens" in (out / "boot.log").read_text()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["recent_steps"] and "radiance:prefill_steps_duration" in stats["step_detail_histograms"]
    diagnostics = json.loads((out / "diagnostics.json").read_text())
    assert {"vram", "cards", "findings", "configuration_drift"} <= set(diagnostics)


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not(tmp_path: Path) -> None:
    a, b, c = _write(tmp_path / "a", "mixed"), _write(tmp_path / "b", "mixed"), _write(tmp_path / "c", "mixed", 6)
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "metrics.om").read_bytes() != (c / "metrics.om").read_bytes()


def test_diagnostics_name_the_arena_eviction_with_a_fix(tmp_path: Path) -> None:
    out = _write(tmp_path, "eviction-tail")
    findings = json.loads((out / "diagnostics.json").read_text())["findings"]
    arena = [f for f in findings if f["id"] == "arena-evicts-experts"]
    assert arena and "--max-num-batched-tokens" in arena[0]["fix"]


def test_cli_sim_writes_the_dir_and_scenarios_lists_name_then_description(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["sim", "healthy", "--out", str(tmp_path / "h"), "--duration", "5m", "--seed", "2",
          "--set", "prefill-interleave=1", "--scrape-interval", "10s"])
    truth = json.loads((tmp_path / "h" / "truth.json").read_text())
    assert truth["flags"]["--prefill-interleave"] == "1" and truth["scrape_interval_seconds"] == 10.0
    capsys.readouterr()
    main(["scenarios"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 10
    assert all(len(line.split(None, 1)) == 2 for line in lines)
    assert lines[0].split()[0] == "step-time-sharing"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        pytest.param(["sim", "nope", "--out", "X"], "unknown scenario 'nope': expected one of: step-time-sharing",
                     id="scenario"),
        pytest.param(["sim", "healthy", "--out", "X", "--set", "checkpoint-policy=keepall"],
                     "expected one of: geometric-backoff, tip-only, keep-all", id="enum"),
        pytest.param(["sim", "healthy", "--out", "X", "--set", "--no-such-flag=1"], "unknown flag '--no-such-flag'",
                     id="flag"),
        pytest.param(["sim", "healthy", "--out", "X", "--profile", "llamacpp"], "unknown profile 'llamacpp'",
                     id="profile"),
    ],
)
def test_cli_refuses_bad_input_with_one_error_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], match: str
) -> None:
    argv = [str(tmp_path / "x") if a == "X" else a for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and match in err[0]


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_a_sim_recording_backfills_with_promtool(tmp_path: Path) -> None:
    out = write_sim_dir(simulate("upgrade", duration_seconds=1800.0, seed=1), tmp_path / "sim")
    blocks = tmp_path / "blocks"
    done = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(out / "metrics.om"), str(blocks)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert any(p.is_dir() and (p / "meta.json").exists() for p in blocks.iterdir())
