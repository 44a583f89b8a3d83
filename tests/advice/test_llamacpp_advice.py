"""llama.cpp's knobs: -b is the decoder dial, -ub is not, and an arm is found in argv under its short flag."""

from __future__ import annotations

import pytest

from pdcensus.advice.evidence import Argv, flags_from_argv
from pdcensus.advice.knobs import get_knob
from pdcensus.advice.llamacpp import batch_point, flag_value
from pdcensus.verify.arm import check_argv
from pdcensus.verify.model import StepStatus

ARGV = ("llama-server", "-m", "m.gguf", "--host", "127.0.0.1", "--metrics", "-np", "4", "-c", "32768", "-b", "512",
        "-ub", "512", "-t", "2")


def test_short_flags_are_read_only_when_asked() -> None:
    assert "-b" not in flags_from_argv(ARGV[1:])
    flags = flags_from_argv(ARGV[1:], short=True)
    assert flags["-b"] == "512" and flags["-np"] == "4" and flags["--metrics"] == ""


@pytest.mark.parametrize("spelling", ["-b", "--batch-size", "batch-size"])
def test_every_spelling_of_the_batch_size_is_one_knob(spelling: str) -> None:
    knob = get_knob(spelling)
    assert knob.flag == "--batch-size" and knob.env_var == "LLAMA_ARG_BATCH"
    assert "pidof llama-server" in knob.argv_check("512")


def test_verify_arm_finds_the_knob_under_its_short_flag_in_argv() -> None:
    knob = get_knob("--batch-size")
    argv = Argv(ARGV, "/proc/1/cmdline")
    assert check_argv(argv, knob.flag, "512", knob.aliases).status is StepStatus.PASSED
    assert check_argv(argv, knob.flag, "256", knob.aliases).status is StepStatus.FAILED
    assert flag_value(argv.flags(short=True), knob) == "512"


def test_a_smaller_batch_shortens_the_wait_beside_a_prompt_and_stretches_the_prompt() -> None:
    # 3 decoders, prompt at 400 tok/s inside a call, 50 ms decode-only step, 18 tok/s idle
    now = batch_point(2048, 2048, 3.0, 400.0, 0.05, 18.0)
    small = batch_point(512, 2048, 3.0, 400.0, 0.05, 18.0)
    assert now["chunk_call_seconds"] == pytest.approx(0.05 + 2045 / 400)
    assert small["per_stream_tokens_per_second_beside_prompt"] == pytest.approx(1 / (0.05 + 509 / 400))
    assert small["per_stream_tokens_per_second_beside_prompt"] > 3 * now["per_stream_tokens_per_second_beside_prompt"]
    assert now["prompt_ttft_stretch"] == pytest.approx(1.0)
    assert small["prompt_ttft_stretch"] == pytest.approx((1 / 400 + 0.05 / 509) / (1 / 400 + 0.05 / 2045))


def test_the_micro_batch_is_not_a_decoder_dial() -> None:
    knob = get_knob("-ub")
    assert knob.flag == "--ubatch-size"
    assert all(a.value != "step-time-sharing" for a in knob.acts_on)
