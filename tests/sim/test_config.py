"""Flag parsing refuses what radiance's config_parse refuses, and the C++ source agrees with it."""

from __future__ import annotations

import re

import pytest

from pdcensus.errors import UsageError
from pdcensus.sim.config import FLAGS, Build, CheckpointPolicy, parse_config
from pdcensus.sim.config_source import render_config_source


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        pytest.param({"--checkpoint-policy": "keepall"},
                     r"unknown value 'keepall' for --checkpoint-policy: expected one of: "
                     r"geometric-backoff, tip-only, keep-all", id="enum-member"),
        pytest.param({"--prefill-interleve": "2"}, r"unknown flag '--prefill-interleve': expected one of: .*"
                     r"--prefill-interleave", id="unknown-flag"),
        pytest.param({"--busy-prefill-chunk": "half"}, r"unknown value 'half' for --busy-prefill-chunk: "
                     r"expected one of: auto, a positive integer", id="auto-or-int"),
        pytest.param({"--checkpoint-slots": "lots"}, r"expected one of: auto", id="slots"),
        pytest.param({"--max-num-seqs": "many"}, r"bad value 'many' for --max-num-seqs", id="not-int"),
        pytest.param({"--max-num-seqs": "0"}, r"must be >= 1", id="below-minimum"),
        pytest.param({"--build": "1.9.0"}, r"unknown value '1.9.0' for --build: expected one of: 1.8.3, 1.0.13",
                     id="build"),
        pytest.param({"--prefill-span": "4"}, r"--prefill-span 4 needs --max-num-batched-tokens = 4 x "
                     r"--checkpoint-interval = 16384, got 4096", id="span-without-budget"),
    ],
)
def test_bad_flags_are_refused_at_start_with_the_valid_choices(flags: dict[str, str], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        parse_config(flags)


def test_flags_parse_into_typed_values_and_keep_argv_order() -> None:
    config = parse_config({
        "checkpoint_policy": "keep-all", "--busy-prefill-chunk": "512", "--max-num-seqs": "32",
        "--build": "1.0.13",
    })
    assert config.checkpoint_policy is CheckpointPolicy.KEEP_ALL
    assert config.busy_prefill_chunk == 512
    assert config.build is Build.V1_0_13
    assert config.argv() == ["radiance", "serve", "--max-num-seqs", "32", "--busy-prefill-chunk", "512",
                             "--checkpoint-policy", "keep-all"]
    assert "--build" not in config.argv()


def test_a_span_with_the_matching_budget_is_accepted() -> None:
    config = parse_config({"--prefill-span": "4", "--max-num-batched-tokens": "16384"})
    assert config.prefill_span * config.checkpoint_interval == config.max_num_batched_tokens


def test_build_1_0_13_accepts_interleave_but_holds_nothing() -> None:
    config = parse_config({"--build": "1.0.13", "--prefill-interleave": "2"})
    assert "--prefill-interleave" in config.argv()
    assert config.held_steps_per_chunk == 0
    assert parse_config({"--prefill-interleave": "2"}).held_steps_per_chunk == 2


def test_config_source_has_a_help_row_per_flag_and_the_validator_lists_enum_members() -> None:
    source = render_config_source()
    rows = re.findall(r'^\s*\{"(--[a-z-]+)", "([^"]*)", "([^"]*)"\},$', source, re.MULTILINE)
    assert [r[0] for r in rows] == [spec.flag for spec in FLAGS]
    assert "unknown flag '" in source
    assert "for --checkpoint-policy: expected one of: geometric-backoff, tip-only, keep-all" in source
    assert source.count("{") == source.count("}")
