"""Client records readers (pdcensus.sources.client_records): the harness CSV as recorded, and the
GuideLLM / benchmark_serving JSON layouts those tools write."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pdcensus.errors import CensusError
from pdcensus.sources.client_records import ClientRecordsError, load_client_records

LLAMA = Path(__file__).resolve().parents[2].parent / "shared" / "realdata" / "vllm-inferencex" / "llama70b-vllm0.15"


def test_harness_csv_reads_every_request_in_seconds(tmp_path: Path) -> None:
    text = ("start_time_ms,relative_time_sec,ttft_ms,tpot_ms,latency_ms,input_num_turns,input_num_tokens,"
            "output_num_tokens,output_num_chunks,output_num_first_chunk_tokens,approx_cached_percent,"
            "conversation_id,client_id,interactivity_tok_per_sec\n"
            "1.0,0.000,149.457,16.648,4777.525,1,615,279,269,1,0.00,b38c,0,60.07\n"
            "2.0,0.005,317.659,45.385,816.891,3,3000,12,11,1,80.00,60fe,3,22.03\n")
    p = tmp_path / "x.client_requests.csv.gz"
    p.write_bytes(gzip.compress(text.encode()))
    reqs = load_client_records(p)
    assert len(reqs) == 2
    r = reqs[1]
    assert r.start == pytest.approx(0.005) and r.ttft == pytest.approx(0.317659)
    assert r.tpot == pytest.approx(0.045385) and r.end == pytest.approx(0.005 + 0.816891)
    assert r.input_tokens == 3000 and r.cached_share == pytest.approx(0.8) and r.session == "60fe"


@pytest.mark.skipif(not LLAMA.exists(), reason="../shared/realdata not present")
def test_harness_csv_as_recorded_matches_its_run_summary() -> None:
    reqs = load_client_records(LLAMA / "tp4_bs64_offloadoff.client_requests.csv.gz")
    summary = (LLAMA / "experiment_summary.csv").read_text().splitlines()
    head = summary[0].split(",")
    row = next(line.split(",") for line in summary[1:] if line.startswith("tp4_bs64_offloadoff,"))
    assert len(reqs) == int(row[head.index("num_requests")])
    mean_ttft_ms = sum(r.ttft for r in reqs) / len(reqs) * 1e3
    assert mean_ttft_ms == pytest.approx(float(row[head.index("mean_ttft_ms")]), rel=1e-3)


def test_guidellm_report(tmp_path: Path) -> None:
    doc = {"benchmarks": [{"requests": {"successful": [
        {"request_id": "a", "start_time": 100.0, "first_token_time": 100.5, "end_time": 102.5,
         "prompt_tokens": 512, "output_tokens": 21},
        {"request_id": "b", "start_time": 101.0, "first_token_time": 101.2, "end_time": 101.2,
         "prompt_tokens": 64, "output_tokens": 1},
    ]}}]}
    p = tmp_path / "guidellm.json"
    p.write_text(json.dumps(doc))
    a, b = load_client_records(p)
    assert a.start == 0.0 and a.ttft == pytest.approx(0.5) and a.tpot == pytest.approx(0.1)
    assert b.start == pytest.approx(1.0) and b.tpot != b.tpot  # NaN: one output token


def test_benchmark_serving_detailed_result(tmp_path: Path) -> None:
    doc = {"input_lens": [100, 200], "output_lens": [3, 2], "ttfts": [0.2, 0.4], "itls": [[0.05, 0.07], [0.1]]}
    p = tmp_path / "bs.json"
    p.write_text(json.dumps(doc))
    a, b = load_client_records(p)
    assert a.tpot == pytest.approx(0.06) and a.latency == pytest.approx(0.32)
    assert b.input_tokens == 200 and a.start != a.start  # no start times in this format


@pytest.mark.parametrize("body", ['{"foo": 1}', "a,b\n1,2\n", "[1, 2]"])
def test_unknown_layouts_are_one_census_error(tmp_path: Path, body: str) -> None:
    p = tmp_path / "x"
    p.write_text(body)
    with pytest.raises(ClientRecordsError) as err:
        load_client_records(p)
    assert isinstance(err.value, CensusError)
