"""Real vLLM recordings (../shared/realdata/vllm-inferencex: vLLM 0.15 / 0.19 under benchmark
load, 1 s polls), read where they lie: prefill counted when it ends, cache hits counted as
prompt tokens, a poll without another session, windows too short for a lag, contrasts above 1.

The client-side truth comes from the harness's own per-request records, derived apart from the
census (bench/vllm_realdata.py's ``client_truth``).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from pdcensus.census.buckets import assign_buckets
from pdcensus.census.client_felt import client_felt
from pdcensus.census.guards import ContrastCause, SessionContrast, shape_guards
from pdcensus.census.lag import TAIL_WINDOW_SECONDS
from pdcensus.census.prefill_progress import ComputedSource, PrefillBasis
from pdcensus.census.run import CensusOptions, census_recording, read_shape
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.model import Recording
from pdcensus.series.profiles import Signal
from pdcensus.sources.client_records import load_client_records
from pdcensus.sources.load import load_source
from bench_modules import load_bench

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO.parent / "shared" / "realdata" / "vllm-inferencex"
DEEPSEEK, LLAMA = ROOT / "deepseek-r1-vllm0.19", ROOT / "llama70b-vllm0.15"
pytestmark = [pytest.mark.skipif(not ROOT.exists(), reason="../shared/realdata/vllm-inferencex not present"),
              pytest.mark.slow]
CONFIDENT = 0.7
_CACHE: dict[Path, Recording] = {}


def _rec(path: Path) -> Recording:
    if path not in _CACHE:
        _CACHE[path] = load_source(path)
    return _CACHE[path]


def _signals(path: Path, start: float | None = None, end: float | None = None) -> ShapeSignals:
    rec = _rec(path)
    return read_shape(rec.endpoints[0], rec.families, str(path), start=start, end=end).signals


def _bench() -> ModuleType:
    return load_bench("vllm_realdata")


@pytest.mark.parametrize("run", sorted(p.name for p in LLAMA.glob("*.om.gz")) if LLAMA.exists() else [])
def test_no_confident_verdict_the_client_records_contradict(run: str) -> None:
    path = LLAMA / run
    rec = _rec(path)
    verdict = census_recording(rec)[0].verdict
    reqs = load_client_records(path.with_name(run.replace(".om.gz", ".client_requests.csv.gz")))
    truth = _bench().client_truth(reqs)
    assert truth.requests > 100
    s = _signals(path)
    assert s.prefill_tokens_per_second is not None
    felt = client_felt(reqs, s.times, s.increase(Signal.PROMPT_TOKENS), assign_buckets(s.prefill_tokens_per_second).busy)
    assert felt.alignment.trusted  # the records line up with the recording they belong to
    if verdict.confidence >= CONFIDENT:
        # what the users felt in the census's own buckets, else the per-request overlap view
        ratio = felt.tpot_ratio if np.isfinite(felt.tpot_ratio) else truth.decode_ratio_terciles
        assert np.isfinite(ratio), "a confident verdict where the clients cannot tell"
        slowed = ratio < 0.9
        assert (verdict.mechanism.value not in ("none", "inconclusive")) == slowed, (verdict.mechanism, ratio)


def test_reconstructed_prefill_falls_where_the_raw_counter_was_flat_and_decode_slowed() -> None:
    s = _signals(DEEPSEEK / "tp4_bs64_offloadoff_s_5.om.gz")  # agentic prompts of 30k-120k tokens
    p = s.prefill_progress
    assert p is not None and p.basis is PrefillBasis.SPREAD_BACK
    assert p.computed_source is ComputedSource.LOCAL_COMPUTE
    assert p.hidden_share > 0.5  # most prefill time lies in polls the raw counter called idle
    run, gen, dt = s.gauge(Signal.RUNNING), s.increase(Signal.GENERATION_TOKENS), s.interval_seconds
    assert run is not None and gen is not None
    raw = np.nan_to_num(p.raw_tokens_per_second) > 0.5
    placed = np.nan_to_num(p.tokens_per_second) > 1.0
    ok = np.isfinite(gen) & (run > 0)

    def per_stream(m: np.ndarray) -> float:
        m = m & ok
        return float(gen[m].sum() / (run[m] * dt[m]).sum())

    # where prefill was placed but never counted, decoders really were slowed: it ran there
    assert per_stream(placed & ~raw) < 0.5 * per_stream(~placed & ~raw)


def test_one_user_stretch_gets_the_no_other_session_guard() -> None:
    path = DEEPSEEK / "tp4_bs2_offloadoff_s_2.om.gz"
    whole = _signals(path)
    run = whole.gauge(Signal.RUNNING)
    assert run is not None
    # the longest stretch in which the second user was idle: one session only
    le1 = np.r_[False, run <= 1, False].astype(int)
    starts, ends = np.flatnonzero(np.diff(le1) == 1), np.flatnonzero(np.diff(le1) == -1)
    k = int(np.argmax(ends - starts))
    assert ends[k] - starts[k] >= 120
    s = _signals(path, start=float(whole.times[starts[k]]), end=float(whole.times[ends[k] - 1]))
    assert s.prefill_tokens_per_second is not None
    g = shape_guards(s, assign_buckets(s.prefill_tokens_per_second).busy)
    assert g.session.contrast is SessionContrast.NO_OTHER_SESSION and not g.session.allows_contrast
    # the whole run had a second user in some prefill polls, but not in all
    gw = shape_guards(whole, assign_buckets(whole.prefill_tokens_per_second).busy)  # type: ignore[arg-type]
    assert 0 < gw.session.prefill_polls_with_other < gw.session.prefill_polls


def test_a_nine_minute_ramping_window_supports_no_lagged_tail() -> None:
    path = LLAMA / "tp2_bs64_offloadon.om.gz"
    s = _signals(path)
    g = shape_guards(s, assign_buckets(s.prefill_tokens_per_second).busy)  # type: ignore[arg-type]
    assert g.window.window_seconds < 600
    assert not g.window.supports(TAIL_WINDOW_SECONDS[0])
    report = census_recording(_rec(path), CensusOptions())[0]
    assert not (report.verdict.mechanism.value == "eviction" and report.verdict.confidence >= CONFIDENT)


@pytest.mark.parametrize("run", ["tp4_bs32_offloadoff.om.gz", "tp4_bs256_offloadon.om.gz"])
def test_contrasts_above_one_are_explained(run: str) -> None:
    s = _signals(LLAMA / run)
    g = shape_guards(s, assign_buckets(s.prefill_tokens_per_second).busy)  # type: ignore[arg-type]
    assert g.contrast is not None and g.contrast.contrast > 1.2
    assert g.contrast.cause is ContrastCause.COUNTERS_MOVE_TOGETHER
    assert g.contrast.turnover_counted > g.contrast.turnover_other  # turns end and start in the same polls


def test_cache_hits_are_taken_out_and_the_trap_says_how() -> None:
    report = census_recording(_rec(DEEPSEEK / "tp4_bs24_offloadon_s_4.om.gz"))[0]
    trap = next(t for t in report.traps if t.name == "prompt-tokens-include-cache-hits")
    assert trap.fired and trap.value is not None and trap.value < 0.5
    assert "admission attempt" in trap.text  # queries counted per attempt: hits/queries is no share there
    llama = _signals(LLAMA / "tp1_bs16_offloadoff.om.gz").prefill_progress
    assert llama is not None and llama.computed_source is ComputedSource.MISS_SHARE
    assert llama.basis is PrefillBasis.ADMISSION_TO_COMPLETION
