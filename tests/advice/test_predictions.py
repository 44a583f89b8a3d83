"""A recommendation's prediction is a typed record whose field names are the JSON's keys, in field order."""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace

import pytest

from pdcensus.advice import predictions
from pdcensus.advice.model import Recommendation
from pdcensus.advice.predictions import ArenaPrediction, Prediction, StepBudgetPrediction
from pdcensus.report.document_labels import predicted_row

KINDS = [k for k in vars(predictions).values()
         if isinstance(k, type) and issubclass(k, Prediction) and k is not Prediction]


def _rec(predicted: Prediction) -> Recommendation:
    return Recommendation("step-time-sharing", "--max-num-batched-tokens", "2048", "", "", "s", predicted)


def test_no_prediction_serialises_as_an_empty_object_and_is_false() -> None:
    assert _rec(Prediction()).to_dict()["predicted"] == {}
    assert not Prediction() and not Recommendation("m", "k", "v", "", "", "s").predicted


def test_a_figure_not_stated_is_absent_and_an_undefined_one_is_null() -> None:
    p = StepBudgetPrediction(8192.0, 4096.0, 0.5)
    assert list(_rec(p).to_dict()["predicted"]) == ["step_tokens_now", "step_tokens_predicted",
                                                    "budget_fraction_of_now"]
    p = replace(p, step_tokens_now_is_default=1.0, chunk_step_seconds_now=math.nan)
    out = json.loads(json.dumps(_rec(p).to_dict()))["predicted"]
    assert list(out) == ["step_tokens_now", "step_tokens_predicted", "budget_fraction_of_now",
                         "chunk_step_seconds_now", "step_tokens_now_is_default"]  # field order, not call order
    assert out["chunk_step_seconds_now"] is None


def test_the_report_table_reads_the_records_fields_in_order() -> None:
    p = ArenaPrediction(0.4, stager_smallest_pass_tokens=512.0)
    assert [k for k, _ in p.items()] == ["lag_tail_effect", "stager_smallest_pass_tokens"]
    assert predicted_row(*p.items()[1])[0] != "stager_smallest_pass_tokens"  # words, not the raw name


@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
def test_every_kind_is_a_frozen_record_of_distinct_fields(kind: type[Prediction]) -> None:
    names = [f.name for f in fields(kind)]
    assert names and len(set(names)) == len(names)
    assert kind.__dataclass_params__.frozen  # type: ignore[attr-defined]
