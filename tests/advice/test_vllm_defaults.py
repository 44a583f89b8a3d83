"""vLLM advice from the deployed argv: a flag argv lacks is vLLM 0.32's own default, cited and said to be one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus import api
from pdcensus.advice.engine_advice import with_deploy
from pdcensus.advice.evidence import flags_from_argv
from pdcensus.engines.vllm_0_32 import config_file_note, deployed_value, world_size
from shared_data import SHARED_REALDATA

REAL = SHARED_REALDATA / "vllm-inferencex"
TP1_BS16 = ("vllm serve nvidia/Llama-3.3-70B-Instruct-FP4 --host 0.0.0.0 --port 8888 --config missing/config.yaml "
            "--max-num-seqs 16 --gpu-memory-utilization 0.9 --tensor-parallel-size 1").split()


def _flags(args: list[str]) -> dict[str, str]:
    return flags_from_argv(args[2:])


def test_a_budget_argv_lacks_is_vllm_032s_api_server_default_and_says_so() -> None:
    got = deployed_value("--max-num-batched-tokens", _flags(TP1_BS16))
    assert got is not None and got.value == "8192" and got.is_default
    assert "vllm/engine/arg_utils.py:2937" in got.why and "assumed" in got.why and "16384" in got.why
    assert "Chunked prefill is enabled with max_num_batched_tokens" in got.why  # the start-up line that tells
    # argv that sets it wins, and the default follows vLLM's own adjustments
    given = deployed_value("--max-num-batched-tokens", {"--max-num-batched-tokens": "2048"})
    assert given is not None and given.source == "argv" and given.value == "2048"
    doubled = deployed_value("--max-num-batched-tokens", {"--performance-mode": "throughput"})
    assert doubled is not None and doubled.value == "16384" and ":3130" in doubled.why
    capped = deployed_value("--max-num-batched-tokens", {"--max-num-seqs": "2", "--max-model-len": "1024"})
    assert capped is not None and capped.value == "2048" and ":3168" in capped.why


def test_the_other_defaults_are_read_from_the_pinned_source() -> None:
    util = deployed_value("--gpu-memory-utilization", {})
    assert util is not None and util.value == "0.92" and "cache.py:102" in util.why
    threshold = deployed_value("--long-prefill-token-threshold", {})
    assert threshold is not None and threshold.value == "0"
    seqs = deployed_value("--max-num-seqs", {"--max-num-batched-tokens": "512"})
    assert seqs is not None and seqs.value == "512"  # 1024 by default, at most the budget
    assert world_size({"--tensor-parallel-size": "4", "--pipeline-parallel-size": "2"}) == 8
    assert deployed_value("--kv-cache-memory-bytes", {}) is None  # unset: the pool is profiled


def test_a_readable_config_yaml_is_read_before_the_default(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("max_num_batched_tokens: 6144\nenable-prefix-caching: true\n")
    got = deployed_value("--max-num-batched-tokens", {"--config": str(config)})
    assert got is not None and got.value == "6144" and got.source == "config"
    assert config_file_note({"--config": str(config)}) == ""
    assert "does not read" in config_file_note({"--config": str(tmp_path / "absent.yaml")})


@pytest.mark.skipif(not REAL.exists(), reason="shared/realdata/vllm-inferencex not present")
def test_a_real_vllm_run_gets_the_next_budget_from_the_default_with_its_deploy_and_rollback(tmp_path: Path) -> None:
    """vLLM 0.19.1, DeepSeek-R1 at 8 users: argv has no budget (it reads --config, absent here)."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    (evidence / "cmdline").write_text((REAL / "deepseek-r1-vllm0.19" / "tp4_bs8_offloadoff_s_8.vllm_command.txt").read_text())
    report = api.census(REAL / "deepseek-r1-vllm0.19" / "tp4_bs8_offloadoff_s_8.om.gz", evidence=evidence)
    budget = [r for r in report.advice if r.knob == "--max-num-batched-tokens"]
    assert budget, [r.knob for r in report.advice]
    rec = budget[0]
    assert rec.value == "4096" and rec.env_line == "--max-num-batched-tokens 4096"
    assert rec.rollback_env_line == "(drop --max-num-batched-tokens)"  # back to what argv and --config gave
    assert "not in argv" in rec.summary and "default" in rec.summary and "arg_utils.py:2937" in rec.summary
    assert any("--config /workspace/results/config.yaml" in n for n in rec.notes)
    assert rec.predicted.step_tokens_now == 8192.0


@pytest.mark.skipif(not REAL.exists(), reason="shared/realdata/vllm-inferencex not present")
@pytest.mark.parametrize(("threshold", "value"), [("2048", "1024"), ("256", "")])
def test_a_deployed_long_prefill_threshold_under_the_budget_is_the_dial(tmp_path: Path, threshold: str,
                                                                       value: str) -> None:
    """vLLM caps a long prompt's chunk at the threshold beside decoders: halving the budget above it moves nothing."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    argv = (REAL / "deepseek-r1-vllm0.19" / "tp4_bs8_offloadoff_s_8.vllm_command.txt").read_text().strip()
    (evidence / "cmdline").write_text(f"{argv} --long-prefill-token-threshold {threshold}\n")
    report = api.census(REAL / "deepseek-r1-vllm0.19" / "tp4_bs8_offloadoff_s_8.om.gz", evidence=evidence)
    assert not [r for r in report.advice if r.knob == "--max-num-batched-tokens"]
    (rec,) = [r for r in report.advice if r.knob == "--long-prefill-token-threshold"]
    assert rec.value == value and f"the deployed --long-prefill-token-threshold {threshold} caps" in rec.summary
    assert "scheduler.py l. 640-649 and 708-709" in rec.summary
    if value:
        assert rec.env_line == f"--long-prefill-token-threshold {value}"
        assert f"at most {value} tokens instead of {threshold}" in rec.summary
    else:  # at 512 tokens or fewer the dial is spent: the structural fix instead
        assert rec.dial_state == "spent" and "disaggregation" in rec.summary


def test_the_next_value_from_the_default_is_never_the_default_itself() -> None:
    from pdcensus.advice.model import Recommendation

    rec = Recommendation("step-time-sharing", "--max-num-batched-tokens", "4096", "", "", "s")
    out = with_deploy(rec, "vllm", _flags(TP1_BS16))
    assert out.env_line == "--max-num-batched-tokens 4096" and out.dial_state != "spent"


@pytest.mark.parametrize("argv", [
    "vllm serve /models/llama --max-num-batched-tokens 1024",
    "/opt/venv/bin/python3 -m vllm.entrypoints.openai.api_server --model /models/llama --port 8000",
])
def test_the_verify_steps_pid_lookup_finds_both_ways_vllm_is_started(argv: str) -> None:
    import re

    from pdcensus.engines.vllm import KNOBS

    lookups = {k.pid_lookup for k in KNOBS}
    assert len(lookups) == 1
    (pattern,) = re.findall(r"pgrep -f '([^']+)'", lookups.pop())
    assert re.search(pattern, argv)  # pgrep -f matches an extended regex against the whole command line
    assert not re.search(pattern, "python -m sglang.launch_server --model /models/llama")
