"""What users felt (pdcensus.census.client_felt): clock alignment and the busy / idle split, on
client records built from a known timeline, then on a real run's own records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdcensus.census.buckets import assign_buckets
from pdcensus.census.client_felt import align_records, client_felt
from pdcensus.census.run import read_shape
from pdcensus.series.profiles import Signal
from pdcensus.sources.client_records import ClientRequest, load_client_records
from pdcensus.sources.load import load_source

RUN = Path(__file__).resolve().parents[2].parent / "shared" / "realdata" / "vllm-inferencex" / "llama70b-vllm0.15"


def _timeline(offset: float) -> tuple[list[ClientRequest], np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    times = 1_000_000.0 + np.arange(0.0, 900.0)
    busy = np.zeros(times.size, bool)
    busy[300:600] = True  # other sessions prefilled in the middle third
    prompt = np.zeros(times.size)
    reqs = []
    for start in np.sort(rng.uniform(0, 850, 400)):
        ttft, n = 0.3, 40
        rec_first = times[0] + offset + start + ttft
        i = int(np.searchsorted(times, rec_first))
        if i < times.size:
            prompt[i] += 2000.0
        during = busy[min(i, times.size - 1)]
        tpot = 0.05 if during else 0.025  # decode twice as slow while others prefill
        reqs.append(ClientRequest(start, ttft, tpot, ttft + tpot * (n - 1), 2000, n, session=str(start)))
    return reqs, times, prompt, busy


@pytest.mark.parametrize("offset", [0.0, 37.0])
def test_alignment_finds_the_clock_offset(offset: float) -> None:
    reqs, times, prompt, _ = _timeline(offset)
    al = align_records(reqs, times, prompt)
    assert al.trusted and abs(al.offset_seconds - (times[0] + offset)) <= 1.0


def test_users_decode_slower_in_busy_polls_and_the_ratio_says_so() -> None:
    reqs, times, prompt, busy = _timeline(12.0)
    f = client_felt(reqs, times, prompt, busy)
    assert f.decoded_busy.requests > 50 and f.decoded_idle.requests > 50
    assert f.tpot_ratio == pytest.approx(0.5, abs=0.05)
    assert f.arrived_busy.ttft_p50 == pytest.approx(0.3)


@pytest.mark.skipif(not RUN.exists(), reason="../shared/realdata not present")
def test_real_client_records_align_with_their_recording() -> None:
    path = RUN / "tp1_bs16_offloadoff.om.gz"
    rec = load_source(path)
    s = read_shape(rec.endpoints[0], rec.families, str(path)).signals
    assert s.prefill_tokens_per_second is not None
    reqs = load_client_records(RUN / "tp1_bs16_offloadoff.client_requests.csv.gz")
    f = client_felt(reqs, s.times, s.increase(Signal.PROMPT_TOKENS), assign_buckets(s.prefill_tokens_per_second).busy)
    assert f.alignment.trusted and abs(f.alignment.offset_seconds - s.times[0]) < 5.0
    # 16 chat users: what they felt decoding during others' prefill and without it
    assert f.decoded_busy.requests > 100 and f.decoded_idle.requests > 100
    assert 0.8 < f.tpot_ratio < 1.25
