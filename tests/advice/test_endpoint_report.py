"""The endpoint report: advice typed up to the JSON edge, side evidence cited from data passed in.

The advice pass reads nothing itself: the evidence bundle here is built in memory (no file
behind it) and still shows up, cited, in the report; the JSON is the census schema's, with
the typed values flattened only by ``to_dict()``.
"""

from __future__ import annotations

import json

import pytest

from pdcensus.advice.attach import attach_advice
from pdcensus.advice.endpoint_report import EndpointReport, SideEvidence, advice_of, side_evidence_of
from pdcensus.advice.model import Recommendation
from pdcensus.census.model import CensusReport
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.sources.bundle import Bundle

from .synthetic import step_time_sharing

ARGV = ("radiance", "serve", "--prefill-interleave", "3", "--max-num-batched-tokens", "4096")
BOOT = ("stager: smallest pass 256 tokens",)


@pytest.fixture(scope="module")
def census() -> CensusReport:
    return census_recording(step_time_sharing(0, seed=2), CensusOptions(replicates=50))[0]


def test_a_bundle_held_in_memory_is_cited_and_its_flags_reach_the_advice(census: CensusReport) -> None:
    bundle = Bundle(source="in-memory", manifest={}, argv=ARGV, stats={"recent_requests": [
        {"kind": "session", "prompt_tokens": 9000}, {"kind": "single", "prompt_tokens": 50}]},
        diagnostics=None, metrics_text=None, boot_lines=BOOT)
    report = attach_advice(census, bundle)
    assert isinstance(report, EndpointReport) and report.verdict == census.verdict
    cited = report.side_evidence
    assert (cited.origin, cited.argv, cited.prefix_hit_depths) == ("in-memory", " ".join(ARGV), 1)
    assert cited.missing == ("/diagnostics",) and cited.boot_ledger == {"stager_smallest_pass_tokens": 256}
    assert report.advice and all(isinstance(r, Recommendation) for r in report.advice)
    interleave = next(r for r in report.advice if r.knob == "--prefill-interleave")
    assert interleave.rollback_env_line.endswith("=3")  # the deployed value, read from the in-memory argv


def test_only_to_dict_flattens_and_the_json_keeps_the_census_schema_order(census: CensusReport) -> None:
    report = attach_advice(census, None, unreadable="no such bundle: 'x'")
    out = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert list(out) == list(census.to_dict())  # same keys, same places
    assert out["advice"] == json.loads(json.dumps([r.to_dict() for r in report.advice], allow_nan=False))
    assert out["side_evidence"] == {"unreadable": "no such bundle: 'x'"}
    plain = json.loads(json.dumps(census.to_dict(), allow_nan=False))
    assert {k: v for k, v in out.items() if k not in ("advice", "side_evidence")} == \
        {k: v for k, v in plain.items() if k not in ("advice", "side_evidence")}


def test_a_census_no_advice_pass_saw_reads_as_no_advice(census: CensusReport) -> None:
    assert advice_of(census) == () and side_evidence_of(census) == SideEvidence()
    assert (census.to_dict()["advice"], census.to_dict()["side_evidence"]) == ([], {})


def test_side_evidence_lists_only_the_channels_that_gave_something_in_a_fixed_order() -> None:
    full = SideEvidence(unreadable="u", origin="o", argv="a", boot_ledger={"arena_tokens": 8}, prefix_hit_depths=3,
                        missing=("/stats",))
    assert list(full.to_dict()) == ["unreadable", "origin", "argv", "boot_ledger", "prefix_hit_depths_tokens",
                                    "missing"]
    assert full.to_dict()["prefix_hit_depths_tokens"] == {"n": 3, "from": "/stats recent_requests (multi-turn)"}
    assert SideEvidence().to_dict() == {}
