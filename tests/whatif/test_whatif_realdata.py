"""The what-if on real vLLM runs (../shared/realdata/vllm-inferencex, Llama-3.3-70B on vLLM 0.15, 1 s polls).

No step ledger and no latency histogram there: the twin is calibrated from the dose-response
and the counters, with ``--max-num-seqs`` read from the run's own argv. What must hold on real
data: the calibration error is reported against the recording before anything else; a run the
twin cannot reproduce is refused, not predicted; a change that takes the batch where the
recording never was says it extrapolates.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.sources.load import load_source
from pdcensus.whatif import what_if

LLAMA = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "vllm-inferencex" / "llama70b-vllm0.15"
pytestmark = [pytest.mark.skipif(not LLAMA.exists(), reason="../shared/realdata/vllm-inferencex not present"),
              pytest.mark.slow]
BOUNDED = ("per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second", "decode_tokens_per_second")


def _argv(run: str) -> list[str]:
    return (LLAMA / f"{run}.vllm_command.txt").read_text().split()


def test_a_real_vllm_run_calibrates_from_its_argv_and_warns_when_the_batch_leaves_the_recorded_range() -> None:
    run = "tp1_bs16_offloadoff"
    result = what_if(load_source(LLAMA / f"{run}.om.gz"), ["--max-num-seqs=128", "load=3"], argv=_argv(run), seeds=1)
    cal = result.calibration
    assert cal.engine == "vllm" and cal.flags["--max-num-seqs"] == "16" and cal.flag_sources["--max-num-seqs"] == "argv"
    assert "dose-response" in cal.costs.basis  # no ledger on vLLM
    assert cal.traffic.request_basis == "finished-requests counter"
    assert set(BOUNDED) <= set(result.calibration_error)
    assert result.refused is None
    assert all(abs(result.calibration_error[k]) <= result.bound for k in BOUNDED)
    # 16 users held running at 16 all along: the step's growth with the batch cannot be fitted there
    assert not cal.costs.per_row_identified
    assert result.warnings and result.warnings[0].startswith("extrapolated")
    ttft = result.figure("ttft_p50_seconds")
    assert ttft is not None and ttft.basis.startswith("twin only")  # the polls carry no TTFT histogram


def test_a_real_run_the_twin_cannot_reproduce_is_refused() -> None:
    run = "tp4_bs32_offloadoff"  # per-stream decode "faster" while prompts are counted: counters move in lumps
    result = what_if(load_source(LLAMA / f"{run}.om.gz"), ["--max-num-seqs=64"], argv=_argv(run), seeds=1)
    assert result.refused is not None and result.refused.startswith("calibration error beyond the bound")
    assert result.figures == ()
    assert any(abs(result.calibration_error[k]) > result.bound for k in BOUNDED)
