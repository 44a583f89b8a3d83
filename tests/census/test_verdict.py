"""The verdict on synthetic recordings of each mechanism, and its refusals to guess."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pdcensus.api import census
from pdcensus.census.model import Mechanism, reports_to_dict
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.errors import DataError, UsageError
from pdcensus.series.model import Recording, RecordingBuilder, SeriesKey

from .synth import Synth, synth_recording


@pytest.mark.parametrize("mechanism,expected,min_confidence", [
    pytest.param("sharing", Mechanism.STEP_TIME_SHARING, 0.9, id="sharing"),
    pytest.param("eviction", Mechanism.EVICTION, 0.9, id="eviction"),
    # material preemption confounds decode-only step times: the census says so by its confidence
    pytest.param("preemption", Mechanism.PREEMPTION_STALL, 0.5, id="preemption"),
    pytest.param("none", Mechanism.NONE, 0.9, id="none"),
])
@pytest.mark.parametrize("seed", [1, 2])
def test_verdict_names_the_synthesised_mechanism_with_its_evidence(mechanism, expected, min_confidence, seed):
    v = census(synth_recording(Synth(mechanism=mechanism, seed=seed))).verdict
    assert v.mechanism == expected
    assert v.confidence >= min_confidence
    assert all(e.rule and e.text for e in v.evidence)


def test_counted_preemption_bursts_are_found_with_confidence_and_their_cost_measured():
    v = census(synth_recording(Synth(mechanism="preemption", seed=1))).verdict
    (stall,) = [f for f in v.found if f.mechanism is Mechanism.PREEMPTION_STALL]
    assert v.mechanism is Mechanism.PREEMPTION_STALL and v.confidence >= 0.9
    assert stall.severity.value == "material" and stall.loss_share >= 0.05
    # a material stall sheds and re-admits rows: any other mechanism found beside it is less sure
    assert all(f.confidence < 0.7 for f in v.found if f is not stall)


def test_an_idle_endpoint_is_inconclusive_and_says_what_would_settle_it():
    v = census(synth_recording(Synth(mechanism="idle"))).verdict
    assert v.mechanism == Mechanism.INCONCLUSIVE and v.confidence == 0.0
    assert any("prefills while others decode" in s for s in v.settle)


def test_too_short_a_window_is_inconclusive_not_a_guess():
    v = census(synth_recording(Synth(mechanism="sharing", duration_seconds=300))).verdict
    assert v.mechanism == Mechanism.INCONCLUSIVE
    assert any("at least" in s or "window" in s for s in v.settle)


def test_an_unprovable_shape_is_not_ranked():
    rec = synth_recording(Synth(mechanism="sharing"))
    ep = rec.endpoints[0]
    for i, k in enumerate(ep.keys):
        if k.name.endswith("_total") or k.name.endswith("_bucket") or k.name.endswith("_count"):
            ep.present[:, i] = False
    ep.present[:, [i for i, k in enumerate(ep.keys) if k.name.endswith("_total")]] = False
    rep = census(rec)
    assert rep.verdict.mechanism == Mechanism.INCONCLUSIVE
    assert not rep.shape.proven


def test_a_recording_without_a_running_gauge_is_inconclusive_not_a_crash():
    rec = synth_recording(Synth(mechanism="sharing", seed=1))
    ep = rec.endpoints[0]
    ep.present[:, [i for i, k in enumerate(ep.keys) if k.name == "vllm:num_requests_running"]] = False
    rep = census(rec)
    assert rep.verdict.mechanism == Mechanism.INCONCLUSIVE
    assert rep.timeline.running == ()
    assert any("decoders running" in e.text and not e.satisfied for e in rep.verdict.evidence)


def test_plain_vllm_metric_sets_rank_from_counters_at_lower_confidence():
    rep = census(synth_recording(Synth(mechanism="sharing", profile="vllm", seed=3)))
    assert rep.profile.startswith("vllm")
    assert not rep.ledger.available and "no ledger" in rep.ledger.reason
    assert rep.buckets is not None and "counter increase" in rep.buckets.basis
    assert rep.verdict.mechanism in (Mechanism.STEP_TIME_SHARING, Mechanism.INCONCLUSIVE)
    assert rep.verdict.confidence <= 0.8


def test_the_latest_shape_is_analysed_and_another_can_be_chosen():
    rec = synth_recording(Synth(mechanism="sharing", upgrade_at=300, duration_seconds=9000))
    latest = census(rec)
    first = census(rec, segment=1)
    assert latest.shape.analysed == 2 and latest.profile == "radiance-1.8"
    assert first.profile == "radiance-1.0.13" and not first.ledger.available


def test_a_window_cut_by_start_and_end_keeps_only_those_scrapes():
    rec = synth_recording(Synth(mechanism="sharing"))
    t0 = rec.endpoints[0].timestamps[0]
    rep = census(rec, start=t0 + 600, end=t0 + 3600)
    seg = rep.shape.segments[0]
    assert seg.start >= t0 + 600 and seg.end <= t0 + 3600


def test_report_json_has_the_v1_schema_and_no_nan():
    rep = census(synth_recording(Synth(mechanism="eviction")))
    d = json.loads(json.dumps(rep.to_dict(), allow_nan=False))
    assert d["schema"] == "pdcensus/census/v2"
    assert set(d) >= {"source", "endpoint", "profile", "verdict", "shape", "ledger", "buckets", "lag", "ttft",
                      "preemption", "traps", "advice"}
    assert d["verdict"]["mechanism"] == "eviction"
    assert {"rule", "value", "threshold", "satisfied", "text"} <= set(d["verdict"]["evidence"][0])
    assert len(d["ledger"]["timeline"]["times"]) == len(d["timeline"]["times"])


def test_several_instances_serialise_as_endpoints():
    a = synth_recording(Synth(seed=1)).endpoints[0]
    b = synth_recording(Synth(seed=2)).endpoints[0]
    b.instance = "other:7770"
    rec = Recording(synth_recording(Synth()).families, [a, b], "two")
    reports = census_recording(rec)
    d = reports_to_dict(reports)
    assert [e["endpoint"]["instance"] for e in d["endpoints"]] == ["synth:7770", "other:7770"]
    with pytest.raises(UsageError, match="other:7770"):
        census(rec)


@pytest.mark.parametrize("recording,match", [
    pytest.param(Recording({}, [], "empty.om"), "no endpoint", id="no-endpoint"),
    pytest.param(None, "no engine metric", id="no-engine-metric"),
])
def test_unusable_data_is_a_one_line_data_error(recording, match):
    if recording is None:
        b = RecordingBuilder("node.om")
        b.add_many(SeriesKey("node_load1", (("instance", "n"), ("job", "node"))), [0, 15, 30], [1, 2, 3])
        recording = b.build()
    with pytest.raises(DataError, match=match):
        census_recording(recording, CensusOptions())


def test_one_scrape_runs_every_pass_and_is_inconclusive():
    rec = synth_recording(Synth(duration_seconds=15))
    rep = census(rec)
    assert rep.verdict.mechanism == Mechanism.INCONCLUSIVE
    assert rep.shape.segments[0].scrapes == 1
    assert not rep.lag.available
    json.dumps(rep.to_dict(), allow_nan=False)


def test_confidence_is_the_headline_mechanisms_share_of_bootstrap_replicates():
    rep = census(synth_recording(Synth(mechanism="sharing", seed=1)))
    (lead,) = [f for f in rep.verdict.found if f.mechanism is rep.verdict.mechanism]
    assert rep.verdict.confidence == lead.confidence
    assert 0.0 <= rep.verdict.confidence <= 1.0
    assert np.isfinite(rep.losses.step_time_sharing)
