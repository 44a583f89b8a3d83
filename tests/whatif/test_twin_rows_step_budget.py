"""The step budget's closed form in the twin table (issue #26 item 4, the real-engine column).

vLLM's ``--max-num-batched-tokens`` advice states a decoder beside one chunk and the prompt's TTFT
stretch, not a bucket figure; the table puts its ratios on the heaviest bucket's figures now, so
``census --twin`` and ``bench/three_way_live.py`` show a closed form beside the twin (it was "-").
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from pdcensus.advice.predictions import StepBudgetPrediction
from pdcensus.whatif.advice_check import twin_rows
from pdcensus.whatif.model import BucketPrediction, Spread


def _bucket(name: str, per_stream: float, ttft: float) -> BucketPrediction:
    s = Spread(per_stream, per_stream, per_stream)
    t = Spread(ttft, ttft, ttft)
    n = Spread(math.nan, math.nan, math.nan)
    return BucketPrediction(name, per_stream, s, s, ttft, t, t, math.nan, n, n, n)


def _rows(prediction: StepBudgetPrediction) -> Any:
    result = SimpleNamespace(buckets=(_bucket("idle", 50.0, 0.2), _bucket("1.1k-inf tok/s", 3.0, 4.74)))
    return twin_rows(SimpleNamespace(predicted=prediction), result)  # type: ignore[arg-type]


def test_a_step_budget_puts_its_beside_a_chunk_ratio_and_ttft_stretch_on_the_heaviest_bucket() -> None:
    rows = _rows(StepBudgetPrediction(2048.0, 1024.0, 0.5, per_stream_tokens_per_second_beside_prefill_now=4.3,
                                      per_stream_tokens_per_second_beside_prefill=8.0, prompt_ttft_stretch=1.08))
    decode, idle, ttft = rows
    assert decode.closed_form == pytest.approx(3.0 * 8.0 / 4.3)
    assert math.isnan(idle.closed_form)
    assert ttft.closed_form == pytest.approx(4.74 * 1.08)


def test_without_a_ledger_the_step_budget_states_no_bucket_figure() -> None:
    decode, _, ttft = _rows(StepBudgetPrediction(2048.0, 1024.0, 0.5))
    assert math.isnan(decode.closed_form) and math.isnan(ttft.closed_form)
