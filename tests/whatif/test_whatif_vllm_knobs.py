"""vLLM's knobs in the what-if: each one ``pdcensus knobs --engine vllm`` lists is mapped onto the twin or refused
in one line, the twin speaks vLLM's spelling only, and a chunk change says which prompts it cuts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from pdcensus.advice.catalogue import engine_catalogue
from pdcensus.errors import UsageError
from pdcensus.whatif.knobs import Knob, parse_knobs
from pdcensus.whatif.vllm_knobs import REFUSED, argv_flags, blocks_from_bytes, chunk_flags, vllm_change, vllm_spelling

LLAMA = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "vllm-inferencex" / "llama70b-vllm0.15"
VALUES = {"TOKENS": "2048", "N": "8", "FRACTION": "0.95", "BYTES": "1000000", "GiB": "100", "BLOCKS": "48",
          "fcfs|priority": "priority",
          "JSON": "{}", "": "true"}
TWIN = {"--max-num-batched-tokens": "8192", "--checkpoint-interval": "8192", "--busy-prefill-chunk": "8192",
        "--max-num-seqs": "16", "--num-gpu-blocks-override": "4000000", "--max-model-len": "262144"}


def test_every_knob_the_vllm_catalogue_lists_is_accepted_or_refused_in_one_line_naming_it() -> None:
    flags = [k.flag for k in engine_catalogue("vllm").knobs]
    assert len(flags) >= 10 and "--long-prefill-token-threshold" in flags
    for knob in engine_catalogue("vllm").knobs:
        item = f"{knob.flag}={VALUES[knob.argument]}"
        if knob.flag in REFUSED:
            with pytest.raises(UsageError) as err:
                parse_knobs([item], "vllm")
            text = str(err.value)
            assert text.startswith(f"{knob.flag}: ") and "\n" not in text
        else:
            assert parse_knobs([item], "vllm")[0].spelling == knob.flag
    with pytest.raises(UsageError, match="disaggregation is not modelled by the twin"):
        parse_knobs(["--kv-transfer-config={}"], "vllm")
    # vLLM takes x_y as well as x-y
    assert parse_knobs(["max_num_seqs=8"], "vllm")[0].knob is Knob.MAX_NUM_SEQS


def test_the_budget_and_the_long_prefill_threshold_reach_the_chunk_a_decoder_waits_out() -> None:
    halved = vllm_change({"--max-num-batched-tokens": "4096"}, TWIN, {})
    assert halved == {"--max-num-batched-tokens": "4096", "--checkpoint-interval": "4096", "--busy-prefill-chunk": "4096"}
    capped = vllm_change({"--long-prefill-token-threshold": "2048"}, TWIN, {})
    assert capped["--busy-prefill-chunk"] == "2048" and capped["--checkpoint-interval"] == "8192"  # alone: whole budget
    # a threshold above the budget caps nothing; 0 turns a deployed threshold off
    assert chunk_flags(4096, 6000)["--busy-prefill-chunk"] == "4096"
    deployed = {**TWIN, "--busy-prefill-chunk": "1024"}
    assert vllm_change({"--long-prefill-token-threshold": "0"}, deployed, {})["--busy-prefill-chunk"] == "8192"
    assert vllm_change({"--max-num-batched-tokens": "4096"}, deployed, {})["--busy-prefill-chunk"] == "1024"
    assert vllm_change({"--num-gpu-blocks-override": "300"}, TWIN, {}) == {"--num-gpu-blocks-override": "300"}
    with pytest.raises(UsageError, match="only on is accepted"):
        vllm_change({"--enable-chunked-prefill": "false"}, TWIN, {})


def test_kv_bytes_become_blocks_only_at_the_bytes_per_block_the_config_labels_give() -> None:
    labels = {"num_gpu_blocks": "1000", "kv_cache_memory_bytes": "2000000"}
    assert blocks_from_bytes(1_000_000, labels) == 500
    with pytest.raises(UsageError) as err:
        blocks_from_bytes(1_000_000, {"num_gpu_blocks": "1000"})
    assert str(err.value).startswith("--kv-cache-memory-bytes: ") and "--num-gpu-blocks-override" in str(err.value)


def test_the_vllm_twin_is_shown_in_vllms_spelling_only() -> None:
    shown, left = vllm_spelling({**TWIN, "--busy-prefill-chunk": "2048"},
                                {"--num-gpu-blocks-override": "the twin models no KV pressure"})
    assert shown == [("--max-num-seqs", "16"), ("--max-num-batched-tokens", "8192"),
                     ("--long-prefill-token-threshold", "2048")]
    assert any(n.startswith("KV pool: ample") for n in left)
    assert argv_flags(["vllm", "serve", "m", "--long_prefill_token_threshold", "512", "--enforce-eager",
                       "--max-num-seqs=4"]) == {"--long-prefill-token-threshold": "512", "--enforce-eager": "",
                                                "--max-num-seqs": "4"}


@pytest.mark.slow
@pytest.mark.skipif(not LLAMA.exists(), reason="../shared/realdata/vllm-inferencex not present")
def test_a_halved_budget_on_a_real_run_says_which_prompts_it_cuts_and_shows_no_other_engines_flag() -> None:
    from pdcensus.sources.load import load_source
    from pdcensus.whatif import what_if
    from pdcensus.whatif.render import render

    run = "tp1_bs16_offloadoff"
    argv = (LLAMA / f"{run}.vllm_command.txt").read_text().split()
    result = what_if(load_source(LLAMA / f"{run}.om.gz"), ["--max-num-batched-tokens=4096"], argv=argv, seeds=1)
    assert result.refused is None
    assert result.sim_flags["--busy-prefill-chunk"] == "4096" and result.calibration.flags["--busy-prefill-chunk"] == "8192"
    assert len(result.remarks) == 1 and "8192 -> 4096" in result.remarks[0] and "longer than 4096" in result.remarks[0]
    out = io.StringIO()
    render(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "twin flags (vLLM's spelling): --max-num-seqs 16 --max-num-batched-tokens 8192" in text
    assert "--checkpoint-interval" not in text and "--busy-prefill-chunk" not in text and "why: " in text
    out_json = result.to_dict()
    assert out_json["calibration"]["flags"] == {"--max-num-seqs": "16", "--max-num-batched-tokens": "8192"}
    # the JSON speaks vLLM too: no radiance flag in the calibration, its sources or the change
    flat = json.dumps({k: out_json[k] for k in ("calibration", "change")})
    assert "--checkpoint-interval" not in flat and "--busy-prefill-chunk" not in flat
    assert out_json["change"]["twin_flags"] == {"--max-num-batched-tokens": "4096"}


def test_prompt_work_where_no_request_finished_borrows_one_and_the_window_keeps_its_request_count() -> None:
    """A finished-requests counter counts a request when its decode ends: the blocks where its prefill ran
    count none. Their work is not dropped: a request is borrowed there and repaid by the blocks after."""
    from pdcensus.whatif.traffic import Traffic

    traffic = Traffic(45.0, (0.0, 15.0, 30.0), (15.0, 30.0, 45.0), (0.0, 0.0, 2.0), (30000.0, 30000.0, 200.0),
                      100.0, 30000.0, 50.0, "finished-requests counter", borrow=True)
    assert traffic.block_counts() == [1, 1, 0]
    trace = traffic.trace(0)
    assert len(trace) == 2 and sum(r.prompt_tokens for r in trace) == 60000
    assert [int(r.arrival_seconds // 15) for r in sorted(trace, key=lambda r: r.arrival_seconds)] == [0, 1]
    # without borrowing (a count taken at the first token) the same blocks keep the old reading
    from dataclasses import replace

    assert replace(traffic, borrow=False).block_counts() == [0, 0, 2]


def test_a_busy_blocks_work_near_the_typical_prompt_is_short_prompts_not_one_long_one() -> None:
    """100 requests and 22k tokens in a block is 220 tokens a request, 1.6 shorts of 134 (the spread of
    log-normal shorts carries 2.6): short prompts around 220, not 99 of 134 and one ~9k prompt; 3 requests
    and 40k tokens are still long prompts."""
    from pdcensus.whatif.traffic import Traffic

    busy = Traffic(30.0, (0.0, 15.0), (15.0, 30.0), (100.0, 3.0), (22000.0, 40000.0), 134.0, 9000.0, 50.0,
                   "finished-requests counter")
    trace = busy.trace(0)
    first, second = [r for r in trace if r.arrival_seconds < 15.0], [r for r in trace if r.arrival_seconds >= 15.0]
    assert len(first) == 100 and all(r.kind == "short" for r in first) and max(r.prompt_tokens for r in first) < 2000
    assert [r.kind for r in second] == ["long"] * 3 and abs(sum(r.prompt_tokens for r in second) - 40000) <= 3


def test_a_short_context_caps_the_lone_chunk_and_the_deployed_pool_is_shown_with_its_block_size() -> None:
    """``--max-model-len 2048`` (the live preemption run): no prompt is longer, and the simulator refuses a
    lone chunk beyond the context, so the lone chunk is 2048 whatever the budget."""

    assert chunk_flags(8192, 0, 2048) == {"--max-num-batched-tokens": "8192", "--checkpoint-interval": "2048",
                                          "--busy-prefill-chunk": "8192"}
    short = {**TWIN, "--max-model-len": "2048"}
    assert vllm_change({"--max-num-batched-tokens": "4096"}, short, {})["--checkpoint-interval"] == "2048"
    shown, _ = vllm_spelling({**short, "--num-gpu-blocks-override": "24", "--block-size": "128"},
                             {"--num-gpu-blocks-override": "argv", "--max-model-len": "argv"})
    assert ("--num-gpu-blocks-override", "24") in shown and ("--block-size", "128") in shown
