"""The what-if on llama.cpp's counters: a replay of its server loop whose step costs are known.

``server_trace`` (tests/engines/test_llamacpp_counting.py) replays llama.cpp b11434's server loop
call by call with a call time of ``DECODE_CALL + prompt tokens / PROMPT_RATE`` and writes the
``llamacpp:`` families as the server does. llama.cpp counts no requests, so the what-if needs
the mean prompt size; the twin's decoders restart where ``tokens_predicted_total`` jumps; the
twin is read through llama.cpp's own counters (``pdcensus.whatif.llamacpp_view``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from pdcensus.errors import UsageError
from pdcensus.whatif import what_if

ARGV = "llama-server -m model.gguf -np 4 -b 2048 -ub 512".split()


def _replay() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "engines" / "test_llamacpp_counting.py"
    spec = importlib.util.spec_from_file_location("llamacpp_replay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def replay() -> ModuleType:
    return _replay()


def _trace(replay: ModuleType, n_batch: int = 2048):  # type: ignore[no-untyped-def]
    starts = tuple(30.0 + 45.0 * k for k in range(8))
    return replay.server_trace(seconds=400, prompt_starts=starts, n_batch=n_batch)


@pytest.mark.slow
def test_a_llamacpp_recording_needs_the_mean_prompt_size(replay: ModuleType) -> None:
    recording, _ = _trace(replay)
    with pytest.raises(UsageError, match="--mean-prompt-tokens"):
        what_if(recording, ["-b=512"], argv=ARGV, seeds=1)


@pytest.mark.slow
def test_the_twin_of_a_llamacpp_replay_recovers_its_call_costs_and_predicts_a_smaller_batch_helps(
        replay: ModuleType) -> None:
    recording, truth = _trace(replay)
    result = what_if(recording, ["-b=512"], argv=ARGV, seeds=2, mean_prompt_tokens=2800)
    cal = result.calibration
    assert cal.engine == "llamacpp" and cal.flags["--max-num-batched-tokens"] == "2048"
    assert cal.costs.decode_step_seconds == pytest.approx(replay.DECODE_CALL, rel=0.05)
    assert cal.costs.per_prefill_token_seconds == pytest.approx(1 / replay.PROMPT_RATE, rel=0.10)
    assert cal.traffic.standing_decoders == 3
    assert result.refused is None
    top = result.buckets[-1]  # the highest prefill bucket: the long prompt's calls
    assert top.observed_per_stream_tokens_per_second == pytest.approx(truth["during"], rel=0.25)
    # -b 512: each call carries at most 512 prompt tokens, so a decoder beside the prompt waits less per token
    assert top.twin_after_per_stream.median > top.twin_before_per_stream.median
    _, smaller = _trace(replay, n_batch=512)
    assert smaller["during"] > truth["during"]  # the replay agrees on the direction
