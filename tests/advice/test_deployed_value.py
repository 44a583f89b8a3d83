"""A value already deployed is never recommended again: the next step on the same dial, or the dial is spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus import api
from pdcensus.advice.engine_advice import with_deploy
from pdcensus.advice.model import Recommendation
from pdcensus.cli import main
from shared_data import SHARED_REALDATA


def _advice(tmp_path: Path, scenario: str, profile: str, sets: list[str]) -> list[dict[str, object]]:
    out = tmp_path / f"{profile}-{scenario}"
    args = ["sim", scenario, "--out", str(out), "--duration", "1h", "--seed", "3", "--profile", profile]
    for item in sets:
        args += ["--set", item]
    main(args)
    return [a.to_dict() for a in api.census(out).advice]


@pytest.mark.slow
def test_an_endpoint_running_prefill_interleave_2_is_told_the_next_step_not_2_again(tmp_path: Path) -> None:
    recs = [r for r in _advice(tmp_path, "protected", "radiance", []) if r["knob"] == "--prefill-interleave"]
    assert recs, "the protected scenario still shows step-time sharing"
    rec = recs[0]
    assert rec["value"] != "2" and rec["env_line"] != "RADIANCE_PREFILL_INTERLEAVE=2"
    assert rec["dial_state"] in ("next-step", "spent")
    if rec["value"]:
        assert int(str(rec["value"])) > 2 and rec["rollback_env_line"] == "RADIANCE_PREFILL_INTERLEAVE=2"


@pytest.mark.slow
@pytest.mark.parametrize(("profile", "flag"), [("vllm", "--max-num-batched-tokens"),
                                               ("sglang", "--chunked-prefill-size")])
def test_an_engine_running_the_advised_budget_is_told_the_next_budget(tmp_path: Path, profile: str, flag: str) -> None:
    recs = [r for r in _advice(tmp_path, "step-time-sharing", profile, [f"{flag}=2048"]) if r["knob"] == flag]
    assert recs and all(r["value"] != "2048" for r in recs)
    assert recs[0]["value"] == "1024" and "2048" in str(recs[0]["rollback_env_line"])


def test_a_recommendation_equal_to_the_deployed_value_becomes_a_spent_dial_not_a_deploy_line() -> None:
    rec = Recommendation("preemption-stall", "--max-num-seqs", "32", "", "", "summary")
    out = with_deploy(rec, "vllm", {"--max-num-seqs": "32"})
    assert out.value == "" and out.env_line == "" and out.dial_state == "spent"
    assert "already deployed" in out.summary
    assert with_deploy(rec, "vllm", {"--max-num-seqs": "64"}).env_line == "--max-num-seqs 32"


def test_a_real_vllm_argv_with_an_unreadable_config_file_gets_the_default_said_as_such(tmp_path: Path) -> None:
    """vLLM 0.19.1 on real load (shared/realdata): argv reads --config YAML, absent here: the next budget is
    computed from vLLM's default, the summary says it is the default and the note says the file may set it."""
    real = SHARED_REALDATA / "vllm-inferencex" / "deepseek-r1-vllm0.19"
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    (evidence / "cmdline").write_text((real / "tp4_bs8_offloadoff_s_8.vllm_command.txt").read_text())
    report = api.census(real / "tp4_bs8_offloadoff_s_8.om.gz", evidence=evidence)
    budget = [r for r in report.advice if r.knob == "--max-num-batched-tokens"]
    assert budget and budget[0].value == "4096" and "default" in budget[0].summary
    assert any("--config /workspace/results/config.yaml" in n and "halve its value instead" in n for n in budget[0].notes)
    assert all(r.engine == "vllm" and "RADIANCE_" not in r.env_line for r in report.advice)


def test_vllms_own_config_labels_are_read_as_deployed_flags() -> None:
    """A real vLLM /metrics dump (shared/realdata/metrics): vllm:cache_config_info labels become flags; None is unset."""
    from pdcensus.advice.deploy import deployed_from_labels
    from pdcensus.sources.load import load_source

    rec = load_source(SHARED_REALDATA / "metrics" / "vllm-0.7-v0_qwen2.5-coder-1.5b_aibrix-docs_PARTIAL.prom",
                      scrape_time=1_800_000_000.0)
    flags = deployed_from_labels(rec.endpoint(rec.instances()[0]))
    assert flags == {"--gpu-memory-utilization": "0.9", "--block-size": "16"}
    assert with_deploy(Recommendation("eviction", "--gpu-memory-utilization", "0.9", "", "", "s"), "vllm",
                       flags).dial_state == "spent"
