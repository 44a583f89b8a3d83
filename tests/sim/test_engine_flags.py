"""``sim --profile ENGINE --set FLAG=VALUE`` takes the engine's own spelling and writes the engine's argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.advice.evidence import read_argv
from pdcensus.cli import main
from pdcensus.errors import UsageError
from pdcensus.sim.engine_flags import apply, translate
from pdcensus.sim.scenarios import get_scenario


def test_a_budget_in_vllm_spelling_sets_the_model_budget_and_a_span_that_validates() -> None:
    spec = apply(get_scenario("eviction-tail"), "vllm", {"--max-num-batched-tokens": "8192"})
    flags = spec.segments[0].flags
    assert flags["--max-num-batched-tokens"] == "8192" and flags["--prefill-span"] == "2"  # 2 x 4096


@pytest.mark.parametrize(("profile", "sets", "target"), [
    pytest.param("sglang", {"--chunked-prefill-size": "2048"}, ("budget", "2048"), id="sglang-chunk"),
    pytest.param("sglang", {"--max-running-requests": "32"}, ("--max-num-seqs", "32"), id="sglang-running"),
    pytest.param("tgi", {"--MAX_BATCH_PREFILL_TOKENS": "2048"}, ("budget", "2048"), id="tgi-env-spelling"),
    pytest.param("vllm", {"--max_num_seqs": "16"}, ("--max-num-seqs", "16"), id="vllm-underscores"),
])
def test_engine_spellings_map_to_the_simulated_setting(profile: str, sets: dict[str, str],
                                                       target: tuple[str, str]) -> None:
    assert translate(profile, sets) == {target[0]: target[1]}


def test_switches_the_model_always_has_on_are_accepted_and_turning_them_off_is_refused() -> None:
    assert translate("tgi", {"--PREFILL_CHUNKING": "1"}) == {}
    with pytest.raises(UsageError, match="always has it on"):
        translate("tgi", {"--PREFILL_CHUNKING": "0"})


def test_a_flag_with_no_simulated_equivalent_names_what_the_profile_accepts(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sim", "step-time-sharing", "--out", str(tmp_path / "x"), "--duration", "5m", "--profile", "vllm",
              "--set", "--prefill-interleave=2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'--prefill-interleave' has no simulated equivalent under --profile vllm" in err[0]
    assert "--max-num-batched-tokens" in err[0]


@pytest.mark.parametrize(("profile", "program", "flag"), [
    pytest.param("vllm", ["vllm", "serve"], "--max-num-batched-tokens", id="vllm"),
    pytest.param("sglang", ["python", "-m", "sglang.launch_server"], "--chunked-prefill-size", id="sglang"),
    pytest.param("tgi", ["text-generation-router"], "--max-batch-prefill-tokens", id="tgi"),
])
def test_the_cmdline_is_written_in_the_engines_spelling(tmp_path: Path, profile: str, program: list[str],
                                                        flag: str) -> None:
    out = tmp_path / profile
    main(["sim", "step-time-sharing", "--out", str(out), "--duration", "5m", "--profile", profile,
          "--set", f"{flag}=2048"])
    argv = read_argv(out)
    assert list(argv.args[:len(program)]) == program
    assert argv.flags()[flag] == "2048"
    assert not any(a.startswith("--checkpoint") or a.startswith("--prefill-") for a in argv.args)
