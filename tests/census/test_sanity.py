"""Numbers that cannot be true never reach a verdict: corrupted recordings, each check named.

Each case corrupts one signal of a real simulator recording the way a broken exporter or a
sped-up clock would, and asserts that the census names the broken signal, withholds what
rests on it, and still does not give a confident answer that the corruption made up.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from pdcensus.census.model import Mechanism
from pdcensus.census.run import census_recording
from pdcensus.census.sanity import BrokenKind, check_shares
from pdcensus.series.model import Recording
from pdcensus.sim import simulate


@lru_cache(maxsize=None)
def _clean() -> tuple[dict, Recording]:
    result = simulate("step-time-sharing", duration_seconds=7200.0, seed=0)
    return result.truth, result.recording


def _corrupted(name: str, change) -> Recording:
    _, rec = _clean()
    ep = rec.endpoints[0]
    values = ep.values.copy()
    for i, key in enumerate(ep.keys):
        if key.name == name:
            values[:, i] = change(values[:, i])
    ep2 = type(ep)(ep.job, ep.instance, ep.timestamps, list(ep.keys), values, ep.present.copy())
    return Recording(rec.families, [ep2], rec.source)


def test_the_clean_recording_has_nothing_withheld():
    truth, rec = _clean()
    report = census_recording(rec)[0]
    assert report.verdict.withheld == () and report.ledger.available
    assert report.verdict.mechanism.value == truth["mechanism"]


def test_a_decode_only_step_counter_stuck_at_zero_withholds_the_ledger():
    rec = _corrupted("radiance:engine_step_seconds_decode_total", lambda v: np.zeros_like(v))
    report = census_recording(rec)[0]
    assert not report.ledger.available and report.ledger.reason.startswith("withheld")
    assert any("never moves" in w and "engine_step_seconds_decode_total" in w for w in report.verdict.withheld)
    # no "decode-only step 0.0 ms, sharing 99.9 %": the ledger's numbers are gone, not zero
    assert all(e.rule != "chunk-step-collapse" for e in report.verdict.evidence)
    assert report.losses is not None and report.losses.step_time_sharing < 0.5


def test_engine_time_counters_read_against_wall_clock_scrapes_are_withheld():
    # a sped-up engine (serve --speed 10) counts ten engine seconds per wall second
    speed = 10.0
    rec = _corrupted("radiance:engine_step_seconds_total", lambda v: v * speed)
    ep = rec.endpoints[0]
    for i, key in enumerate(ep.keys):
        if key.name == "radiance:engine_step_seconds_decode_total":
            ep.values[:, i] *= speed
    report = census_recording(rec)[0]
    assert any("wall clock" in w for w in report.verdict.withheld)
    assert not report.ledger.available
    shares = report.losses
    assert shares is not None
    total = sum(x for x in (shares.step_time_sharing, shares.eviction, shares.preemption_stall) if np.isfinite(x))
    assert total <= 1.0


def test_a_decode_rate_beyond_any_decode_only_step_is_withheld():
    # a hundredth of the decode-only steps counted: each would take 1.5 s, streams would emit ~60 tokens per step
    rec = _corrupted("radiance:engine_steps_decode_total", lambda v: v / 100.0)
    report = census_recording(rec)[0]
    assert any("tokens per decode-only step" in w for w in report.verdict.withheld)
    assert not report.ledger.available


def test_loss_shares_over_the_whole_are_named():
    broken = check_shares({"sharing": 0.626, "eviction": 0.419}, ledger=True)
    assert broken is not None and broken.kind is BrokenKind.SHARES_OVER_WHOLE
    assert "104 %" in broken.text and "the step ledger" in broken.withholds
    assert check_shares({"sharing": 0.6, "eviction": 0.3}, ledger=True) is None


@pytest.mark.parametrize("name", ["radiance:engine_steps_decode_total", "radiance:engine_step_seconds_total"])
def test_no_corruption_gives_a_confident_made_up_mechanism(name):
    rec = _corrupted(name, lambda v: np.zeros_like(v))
    v = census_recording(rec)[0].verdict
    truth, _ = _clean()
    assert v.mechanism.value in (truth["mechanism"], Mechanism.INCONCLUSIVE.value) or v.confidence < 0.7
