"""The knob catalogue per engine: cited, engine-spelled, and deploy lines that carry their preconditions."""

from __future__ import annotations

import pytest
import yaml

from pdcensus.advice.catalogue import ENGINES, engine_catalogue, engine_of_argv, engine_of_profile
from pdcensus.advice.deploy import deploy_line, deployed_flags, same_value
from pdcensus.advice.knobs import ActsOn, get_knob
from pdcensus.errors import UsageError

PINS = {"vllm": "v0.19.1", "sglang": "v0.5.4", "tgi": "v3.3.7", "llamacpp": "b11434"}


@pytest.mark.parametrize("engine", ENGINES)
def test_every_knob_cites_its_source_and_versions(engine: str) -> None:
    catalogue = engine_catalogue(engine)
    assert catalogue.knobs and catalogue.pin and catalogue.sources and catalogue.env_rule
    for knob in catalogue.knobs:
        assert knob.engine == engine and knob.versions and knob.source, knob.flag
        assert knob.flag.startswith("--") and knob.cost and knob.rollback or engine == "radiance", knob.flag
        if engine in PINS:
            assert PINS[engine] in knob.source, knob.source


@pytest.mark.parametrize("engine", ENGINES)
def test_each_primary_knob_acts_on_its_mechanism(engine: str) -> None:
    catalogue = engine_catalogue(engine)
    for mechanism, flag in catalogue.primary.items():
        knob = catalogue.knob(flag)
        assert knob is not None and mechanism in knob.acts_on, (engine, flag)
    for mechanism in (ActsOn.STEP_TIME_SHARING, ActsOn.EVICTION, ActsOn.PREEMPTION_STALL):
        # a knob for the mechanism, or the catalogue says there is none and names the structural fix
        gap = catalogue.gap(mechanism)
        assert catalogue.primary_knob(mechanism) is not None or gap is not None and gap.structural_fix, (engine, mechanism)


def test_env_spelling_follows_each_engines_own_rule() -> None:
    assert get_knob("--max-num-batched-tokens", "vllm").env_var == ""  # vLLM reads no env for its flags
    assert get_knob("--chunked-prefill-size", "sglang").env_var == ""
    assert get_knob("--max-batch-prefill-tokens", "tgi").env_var == "MAX_BATCH_PREFILL_TOKENS"
    assert get_knob("-b", "llamacpp").env_var == "LLAMA_ARG_BATCH"
    assert get_knob("--prefill-interleave").env_var == "RADIANCE_PREFILL_INTERLEAVE"


def test_vllm_v1_refuses_concurrent_partial_prefills_so_they_are_never_a_recommendation() -> None:
    for flag in ("--max-num-partial-prefills", "--max-long-partial-prefills"):
        knob = get_knob(flag, "vllm")
        assert knob.acts_on == () and "refuses" in knob.versions


def test_a_flag_another_engine_lacks_is_refused_with_the_choices() -> None:
    with pytest.raises(UsageError, match="choose one of: .*--max-num-batched-tokens"):
        get_knob("--prefill-interleave", "vllm")


def test_engine_is_read_from_profile_and_argv() -> None:
    assert engine_of_profile("vllm-v1") == "vllm" and engine_of_profile("radiance-1.8") == "radiance"
    assert engine_of_argv(["python", "-m", "sglang.launch_server", "--model-path", "m"]) == "sglang"
    assert engine_of_argv(["text-generation-router", "--max-batch-prefill-tokens", "4096"]) == "tgi"
    assert engine_of_argv(["/usr/bin/env", "true"]) is None


def test_a_prefill_span_travels_with_its_step_budget() -> None:
    line = deploy_line("radiance", "--prefill-span", "1", {"--prefill-span": "4", "--checkpoint-interval": "4096"})
    assert line.flags() == (("--prefill-span", "1"), ("--max-num-batched-tokens", "4096"))
    assert line.primary() == "RADIANCE_PREFILL_SPAN=1 RADIANCE_MAX_NUM_BATCHED_TOKENS=4096"
    assert line.rollback_primary() == "RADIANCE_PREFILL_SPAN=4 RADIANCE_MAX_NUM_BATCHED_TOKENS="


def test_a_vllm_budget_below_max_num_seqs_carries_the_smaller_seqs() -> None:
    line = deploy_line("vllm", "--max-num-batched-tokens", "512", {"--max-num-seqs": "1024"})
    assert line.argv() == ["--max-num-batched-tokens", "512", "--max-num-seqs", "512"]
    assert line.env == () and line.primary() == "--max-num-batched-tokens 512 --max-num-seqs 512"
    assert deploy_line("vllm", "--max-num-batched-tokens", "2048", {"--max-num-seqs": "64"}).argv() == [
        "--max-num-batched-tokens", "2048"]


def test_a_tgi_budget_carries_prefill_chunking_and_a_kubernetes_fragment_that_parses() -> None:
    line = deploy_line("tgi", "--max-batch-prefill-tokens", "2048", {"--max-batch-prefill-tokens": "4096"})
    assert line.primary() == "MAX_BATCH_PREFILL_TOKENS=2048 PREFILL_CHUNKING=1"
    k8s = yaml.safe_load(line.k8s_args())
    assert k8s["args"] == ["--max-batch-prefill-tokens", "2048"]
    assert k8s["env"] == [{"name": "PREFILL_CHUNKING", "value": "1"}]
    assert line.rollback_env[0] == "MAX_BATCH_PREFILL_TOKENS=4096"


def test_deployed_argv_is_read_under_each_knobs_long_spelling() -> None:
    assert deployed_flags(["--max_num_batched_tokens", "8192", "--max-num-seqs", "64"], "vllm") == {
        "--max-num-batched-tokens": "8192", "--max-num-seqs": "64"}
    assert deployed_flags(["-b", "512", "-np", "4"], "llamacpp") == {"--batch-size": "512", "--parallel": "4"}
    assert same_value("0.90", "0.9") and not same_value("2", "3") and not same_value(None, "2")


def test_docs_carry_the_catalogue_tables_as_the_code_has_them() -> None:
    from pathlib import Path

    from pdcensus.advice.catalogue import markdown_table

    text = (Path(__file__).parents[2] / "docs" / "engines.md").read_text()
    for engine in ENGINES:
        assert markdown_table(engine) in text, f"docs/engines.md: regenerate the {engine} table"


def test_the_knobs_command_prints_an_engines_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    from pdcensus.cli import main

    main(["knobs", "--engine", "vllm"])
    out = capsys.readouterr().out
    assert out.startswith("vLLM (vLLM 0.19.1") and "--max-num-batched-tokens TOKENS" in out
    assert "RADIANCE_" not in out and "--prefill-interleave" not in out
