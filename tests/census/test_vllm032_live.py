"""vLLM 0.32 recorded live (our own runs: vLLM 0.32.0 on CPU, Prometheus at 1 s, client truth).

The fixtures are the census's families cut from two recordings (tests/fixtures/vllm032): a
sharing run (three decoding streams beside 3,000-token prompts in chunk steps of 10-23 s) and a
preemption run (a 24-block KV pool, ten streams, stalls up to 130 s). The truth files are the
clients' own per-token records, summarised apart from the census (inter-token gaps while a long
prompt waited for its first token vs otherwise; gaps over 2 s as stalls).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pdcensus.census.model import Mechanism
from pdcensus.census.run import census_recording, read_shape
from pdcensus.series.vllm_steps import itl_depth, span_mask
from pdcensus.sources.load import load_source

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm032"
WITHIN = 0.25  # the goal: the census's loss within 25 % of the clients'


def _truth(name: str) -> dict[str, object]:
    doc: dict[str, object] = json.loads((FIXTURES / f"{name}.truth.json").read_text())
    return doc


def _close(census: float, truth: float) -> bool:
    return abs(census - truth) <= WITHIN * truth


def test_sharing_run_is_named_confidently_with_the_clients_loss() -> None:
    rec = load_source(FIXTURES / "sharing-default.om.gz")
    shape = census_recording(rec)[0]
    v, truth = shape.verdict, _truth("sharing-default")
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    assert v.confidence >= 0.7
    sharing = next(f for f in v.found if f.mechanism is Mechanism.STEP_TIME_SHARING)
    assert _close(sharing.loss_share, float(truth["decode_time_lost_share"]))  # type: ignore[arg-type]
    during, outside = truth["during"], truth["outside"]
    acts = during["seconds"] / (during["seconds"] + outside["seconds"])  # type: ignore[index]
    assert _close(sharing.active_share, acts)
    # the counted ledger ran: the chunk spans' mean step is far above the decode-only step
    assert shape.ledger.available
    assert shape.ledger.chunk_step_seconds > 10 * shape.ledger.decode_step_seconds


def test_inter_token_histogram_gives_the_clients_lost_share() -> None:
    rec = load_source(FIXTURES / "sharing-default.om.gz")
    s = read_shape(rec.endpoints[0], rec.families, "sharing-default").signals
    assert s.counted_steps is not None and s.chunk_intervals is not None
    ratio, lost, chunk_tokens, clean_tokens = itl_depth(s.counted_steps, s.chunk_intervals)
    assert chunk_tokens > 0 and clean_tokens > chunk_tokens
    assert _close(lost, float(_truth("sharing-default")["decode_time_lost_share"]))  # type: ignore[arg-type]
    assert 0 < ratio < 0.2  # decoders barely moved while a chunk ran (clients: 0.012)
    # every long step (no step ended while requests ran) lies in a span that carried prefill
    cs = s.counted_steps
    long_step = cs.busy & (np.nan_to_num(cs.steps) == 0)
    assert long_step.any()
    assert span_mask(cs, s.chunk_intervals)[long_step].all()


def test_preemption_run_reads_the_stalls_from_the_resume_gaps() -> None:
    rec = load_source(FIXTURES / "preemption.om.gz")
    shape = census_recording(rec)[0]
    v, truth = shape.verdict, _truth("preemption")
    assert v.mechanism is Mechanism.PREEMPTION_STALL
    stall = next(f for f in v.found if f.mechanism is Mechanism.PREEMPTION_STALL)
    stalled = truth["stalls"]["stalled_share"]  # type: ignore[index]
    assert _close(stall.loss_share, stalled)
    assert shape.losses is not None and shape.losses.preemption_stall_basis.startswith("inter-token gaps ended")


def test_small_budget_run_depth_and_loss_match_the_clients() -> None:
    # --max-num-batched-tokens 512: a 3,000-token prompt runs six chunk steps of ~8 s; its middle
    # chunks move no counter, the admitted-not-done balance marks them
    rec = load_source(FIXTURES / "sharing-small.om.gz")
    v, truth = census_recording(rec)[0].verdict, _truth("sharing-small")
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence >= 0.7
    sharing = next(f for f in v.found if f.mechanism is Mechanism.STEP_TIME_SHARING)
    assert _close(sharing.loss_share, float(truth["decode_time_lost_share"]))  # type: ignore[arg-type]
    assert _close(sharing.depth, float(truth["ratio"]))  # type: ignore[arg-type]
    assert any(e.rule == "itl-depth" and e.value == sharing.depth for e in v.evidence)


@pytest.mark.parametrize("name", ["sharing-default", "sharing-small", "preemption"])
def test_no_cap_for_missing_step_counters_where_they_are_counted(name: str) -> None:
    rec = load_source(FIXTURES / f"{name}.om.gz")
    v = census_recording(rec)[0].verdict
    assert not any("decode-only step counters" in s for s in v.settle)
