"""verify-arm's one tolerance rule on hand-built before/after pairs: an interval inside the band is
*within*, one wholly outside is a miss, one straddling an edge or wider than the band *cannot tell*
(and the arm is inconclusive, exit 3); every view prints the same band (pdcensus.verify.gate).
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import fields

import numpy as np
import pytest
from rich.console import Console

from pdcensus.census.signals import Histogram, ShapeSignals
from pdcensus.report.terminal_advice import render_arm
from pdcensus.series.profiles import Signal, get_profile
from pdcensus.verify import gate
from pdcensus.verify.arm_args import ARM_EXIT_CODES
from pdcensus.verify.model import ArmOutcome, ArmPrediction, ArmVerdict, Comparison, CompareStatus

BOUNDS = np.append(np.geomspace(0.01, 200.0, 500), np.inf)  # a fine grid: the histogram resolves ~2 %
TOL = 0.25


def _signals(values: list[np.ndarray]) -> ShapeSignals:
    """One TTFT histogram; scrape i observed ``values[i]`` (seconds)."""
    inc = np.zeros((len(values), BOUNDS.size))
    for i, v in enumerate(values):
        counts = np.bincount(np.searchsorted(BOUNDS, v, side="left"), minlength=BOUNDS.size)
        inc[i] = np.cumsum(counts)  # cumulative per le bound, as the census reads a histogram
    n = len(values)
    return ShapeSignals(times=np.arange(n) * 15.0, interval_seconds=np.full(n, 15.0), scrape_interval_seconds=15.0,
                        profile=get_profile("radiance-1.8"), names=frozenset(),
                        histograms={Signal.TTFT: Histogram("ttft", BOUNDS, inc)})


def _window(seed: int, median: float, sigma: float, scrapes: int, per_scrape: int) -> ShapeSignals:
    rng = np.random.default_rng(seed)
    return _signals([median * np.exp(sigma * rng.standard_normal(per_scrape)) for _ in range(scrapes)])


def _ttft_only(ratio: float) -> ArmPrediction:
    """A prediction of the busy TTFT p90 ratio alone (every other figure undefined)."""
    return ArmPrediction(**{**{f.name: math.nan for f in fields(ArmPrediction)}, "ttft_p90_ratio_replay": ratio})


def _compare(after_median: float, predicted: float | None, sigma: float = 0.05, scrapes: int = 120,
             per_scrape: int = 20) -> dict[str, Comparison]:
    """Before at 1 s, after at ``after_median``; every scrape in the one busy bucket."""
    b = _window(1, 1.0, sigma, scrapes, per_scrape)
    a = _window(2, after_median, sigma, scrapes, per_scrape)
    index = np.ones(scrapes, dtype=np.int64)
    cs = gate.compare_arm(b, a, index, index, ("idle", "busy-1"),
                          None if predicted is None else _ttft_only(predicted), math.nan, TOL)
    return {f"{c.bucket} {c.quantity}": c for c in cs}


@pytest.mark.parametrize(("after", "predicted", "key", "want", "why"), [
    pytest.param(1.0, None, "busy-1 TTFT p90", CompareStatus.WITHIN, "inside", id="inside-no-rise-allowed"),
    pytest.param(2.0, None, "busy-1 TTFT p90", CompareStatus.COST, "outside", id="outside-a-rise-nothing-predicted"),
    pytest.param(0.5, None, "busy-1 TTFT p90", CompareStatus.WITHIN, "inside", id="a-fall-is-no-cost"),
    pytest.param(1.25, None, "busy-1 TTFT p90", CompareStatus.CANNOT_TELL, "straddles", id="straddling-the-edge"),
    pytest.param(2.0, 2.0, "busy TTFT p90", CompareStatus.WITHIN, "inside", id="inside-the-predicted-band"),
    pytest.param(1.0, 2.0, "busy TTFT p90", CompareStatus.OFF, "outside", id="outside-below-the-prediction"),
    pytest.param(4.0, 2.0, "busy TTFT p90", CompareStatus.OFF, "outside", id="outside-above-the-prediction"),
    pytest.param(1.6, 2.0, "busy TTFT p90", CompareStatus.CANNOT_TELL, "straddles", id="straddling-the-low-edge"),
])
def test_each_interval_against_its_band(after: float, predicted: float | None, key: str, want: CompareStatus,
                                        why: str) -> None:
    c = _compare(after, predicted)[key]
    assert c.status is want, gate.describe(c)
    assert why in c.why
    inside = c.band_low <= c.low and c.high <= c.band_high
    outside = c.high < c.band_low or c.low > c.band_high
    assert inside == (want is CompareStatus.WITHIN)  # within only where the whole interval lies inside
    assert outside == (want in (CompareStatus.OFF, CompareStatus.COST))


def test_an_interval_wider_than_the_band_cannot_tell_even_on_the_prediction() -> None:
    """Thirty requests of a wide spread: the point sits on the prediction, the interval cannot decide."""
    c = _compare(2.0, 2.0, sigma=1.2, scrapes=30, per_scrape=1)["busy TTFT p90"]
    assert c.status is CompareStatus.CANNOT_TELL, gate.describe(c)
    assert "wider than the band" in c.why
    assert math.log(c.high / c.low) > math.log(c.band_high / c.band_low)


@pytest.mark.parametrize(("low", "high", "band", "want"), [
    pytest.param(1.0, 1.2, (0.0, 1.25), gate.Decision.INSIDE, id="inside"),
    pytest.param(1.0, 1.25, (0.0, 1.25), gate.Decision.INSIDE, id="on-the-edge-is-inside"),
    pytest.param(1.3, 9.0, (0.0, 1.25), gate.Decision.OUTSIDE, id="outside-above"),
    pytest.param(0.1, 0.7, (0.8, 1.25), gate.Decision.OUTSIDE, id="outside-below"),
    pytest.param(1.1, 1.4, (0.8, 1.25), gate.Decision.STRADDLES, id="straddles"),
    pytest.param(0.5, 2.0, (0.8, 1.25), gate.Decision.TOO_WIDE, id="too-wide"),
    pytest.param(0.5, math.inf, (0.0, 1.25), gate.Decision.TOO_WIDE, id="unbounded"),
    pytest.param(math.nan, math.nan, (0.0, 1.25), gate.Decision.NO_INTERVAL, id="no-interval"),
])
def test_decide(low: float, high: float, band: tuple[float, float], want: str) -> None:
    assert gate.decide(low, high, *band) == want


def test_the_band_is_two_sided_around_a_prediction_and_one_sided_for_a_rise() -> None:
    assert gate.band(2.0, TOL, two_sided=True) == pytest.approx((1.6, 2.5))
    assert gate.band(1.0, TOL, two_sided=False) == (0.0, 1.25)
    assert gate.band(1.0, TOL, two_sided=False, higher_is_worse=False) == (0.8, math.inf)


def _verdict(comparisons: tuple[Comparison, ...], outcome: ArmOutcome, reason: str) -> ArmVerdict:
    return ArmVerdict("--prefill-interleave", "2", outcome, None, reason, (), None, None, TOL, comparisons)


def test_every_view_states_the_same_band() -> None:
    """The first line (the reason), the table and the JSON print one band for a comparison."""
    cs = _compare(2.0, None)
    cost = cs["busy-1 TTFT p90"]
    assert cost.status is CompareStatus.COST
    v = _verdict(tuple(cs.values()), ArmOutcome.OFF_PREDICTION, "engaged, but 1 cost; first: " + gate.describe(cost))
    out = io.StringIO()
    render_arm(v, Console(file=out, width=200, emoji=False, highlight=False))
    text = out.getvalue()
    assert "<= x1.25" in v.reason and "x1.00" not in v.reason  # not "allowed x1.00" beside a table's x1.25
    row = next(line for line in text.splitlines() if line.strip().startswith("busy-1") and "TTFT p90" in line)
    assert "none (<= x1.25)" in row and "COST" in row
    doc = json.loads(json.dumps(v.to_dict()))
    got = next(c for c in doc["comparisons"] if c["bucket"] == "busy-1" and c["quantity"] == "TTFT p90")
    assert got["band"] == [0.0, 1.25] and got["status"] == "unpredicted-cost"


@pytest.mark.parametrize(("after", "outcome"), [
    pytest.param(1.0, ArmOutcome.ENGAGED, id="inside-exit-0"),
    pytest.param(2.0, ArmOutcome.OFF_PREDICTION, id="outside-exit-5"),
    pytest.param(1.25, ArmOutcome.INCONCLUSIVE, id="straddling-exit-3"),
])
def test_the_engaged_arms_exit_follows_the_rule(after: float, outcome: ArmOutcome) -> None:
    cs = tuple(_compare(after, None).values())
    got, reason = gate.engaged_outcome(cs, TOL, "--prefill-interleave")
    assert got is outcome, reason
    assert ARM_EXIT_CODES[got] == {ArmOutcome.ENGAGED: 0, ArmOutcome.OFF_PREDICTION: 5,
                                   ArmOutcome.INCONCLUSIVE: 3}[outcome]
    if outcome is ArmOutcome.ENGAGED:
        assert all(c.status in (CompareStatus.WITHIN, CompareStatus.UNDECIDED) for c in cs)


def test_too_wide_makes_the_arm_inconclusive_and_the_table_says_cannot_tell() -> None:
    cs = tuple(_compare(2.0, 2.0, sigma=1.2, scrapes=30, per_scrape=1).values())
    outcome, reason = gate.engaged_outcome(cs, TOL, "--prefill-interleave")
    assert outcome is ArmOutcome.INCONCLUSIVE and "cannot tell" in reason
    out = io.StringIO()
    render_arm(_verdict(cs, outcome, reason), Console(file=out, width=200, emoji=False, highlight=False))
    row = next(line for line in out.getvalue().splitlines() if line.strip().startswith("busy ") and "TTFT p90" in line)
    assert "cannot tell" in row and "within" not in row
