"""The knob catalogue, the env-line convention, argv and boot-ledger reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.advice.evidence import flags_from_argv, parse_boot_ledger, parse_cmdline, read_argv
from pdcensus.advice.knobs import CATALOGUE, ActsOn, env_var_for, flag_for_env_var, get_knob
from pdcensus.errors import UsageError

RUNBOOK_KNOBS = ["--prefill-interleave", "--busy-prefill-chunk", "--prefill-span", "--checkpoint-policy",
                 "--checkpoint-interval", "--checkpoint-slots", "--max-num-batched-tokens", "--max-num-seqs"]


def test_the_catalogue_holds_every_knob_the_runbook_names() -> None:
    assert sorted(CATALOGUE) == sorted(RUNBOOK_KNOBS)


@pytest.mark.parametrize("flag", RUNBOOK_KNOBS)
def test_env_lines_round_trip_to_the_flag(flag: str) -> None:
    knob = get_knob(flag)
    assert flag_for_env_var(knob.env_var) == flag
    assert knob.env_line("7") == f"{env_var_for(flag)}=7"


def test_rollback_restores_the_value_before_else_the_default_else_not_passed() -> None:
    assert get_knob("--prefill-interleave").rollback_env_line() == "RADIANCE_PREFILL_INTERLEAVE=0"
    assert get_knob("--prefill-interleave").rollback_env_line("3") == "RADIANCE_PREFILL_INTERLEAVE=3"
    assert get_knob("--max-num-seqs").rollback_env_line() == "RADIANCE_MAX_NUM_SEQS="


def test_busy_prefill_chunk_is_a_prefill_speed_dial_floored_by_the_stager() -> None:
    knob = get_knob("--busy-prefill-chunk")
    assert ActsOn.STEP_TIME_SHARING not in knob.acts_on
    assert any("smallest pass" in p for p in knob.preconditions)


def test_only_the_decoder_dial_acts_on_step_time_sharing() -> None:
    assert [k.flag for k in CATALOGUE.values() if ActsOn.STEP_TIME_SHARING in k.acts_on] == ["--prefill-interleave"]


def test_prefill_span_needs_the_batched_tokens_to_equal_n_intervals() -> None:
    knob = get_knob("prefill-span")
    assert "--max-num-batched-tokens = N checkpoint intervals" in knob.preconditions
    assert any("lone prefill" in i for i in knob.interactions)


def test_an_unknown_knob_lists_the_catalogue() -> None:
    with pytest.raises(UsageError, match="--prefill-interleave"):
        get_knob("--prefill-interleaving")


@pytest.mark.parametrize(
    ("args", "flags"),
    [
        pytest.param(["radiance", "serve", "--prefill-interleave", "2"], {"--prefill-interleave": "2"}, id="space"),
        pytest.param(["radiance", "--prefill-interleave=2", "--x"], {"--prefill-interleave": "2", "--x": ""},
                     id="equals-and-bare"),
        pytest.param(["radiance", "-v", "serve"], {}, id="no-long-flags"),
    ],
)
def test_argv_flags_read_both_spellings(args: list[str], flags: dict[str, str]) -> None:
    assert flags_from_argv(args) == flags


def test_a_saved_cmdline_is_nul_separated_like_proc(tmp_path: Path) -> None:
    (tmp_path / "cmdline").write_bytes(b"radiance\0serve\0--prefill-interleave\0002\0")
    argv = read_argv(tmp_path)
    assert argv.flags() == {"--prefill-interleave": "2"}
    assert argv.origin.endswith("cmdline")


def test_argv_of_this_very_process_is_read_from_proc() -> None:
    import os

    argv = read_argv(pid=os.getpid())
    assert "python" in argv.args[0] or "pytest" in " ".join(argv.args)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({}, "exactly one", id="neither"),
        pytest.param({"cmdline": "/nonexistent/cmdline"}, "cannot read cmdline", id="missing-file"),
        pytest.param({"pid": 2**22 + 7}, "cannot read argv of pid", id="no-such-pid"),
    ],
)
def test_unreadable_argv_is_a_usage_error(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        read_argv(**kwargs)  # type: ignore[arg-type]


def test_an_empty_cmdline_is_refused() -> None:
    with pytest.raises(UsageError, match="empty argv"):
        parse_cmdline(b"\0\0", "x")


def test_the_boot_ledger_names_the_stagers_smallest_pass() -> None:
    boot = parse_boot_ledger(
        "radiance 1.8.3 starting --prefill-interleave=2\n"
        "prefill stager: 3 passes, smallest pass 1,024 tokens\n"
        "kv pool capacity 262144 tokens in 16384 blocks\n"
        "arena: lends up to 4096 tokens from the expert slab\n")
    assert boot.stager_smallest_pass_tokens == 1024
    assert boot.kv_capacity_tokens == 262144
    assert boot.arena_tokens == 4096
    assert boot.flags == {"--prefill-interleave": "2"}
