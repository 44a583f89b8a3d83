"""The screen's estimate term by term: each the census's own quantity, each lost sequence-second counted once.

Hand-built sums (what the store would return for one endpoint), so that every property is a
plain arithmetic fact about :class:`pdcensus.fleet.screen_model.ScreenRow`: the lag-0 loss is read
against the idle scrapes (the census's collapse), the ledger's sharing replaces the busy scrapes'
rate deficit where a ledger exists (that deficit also holds re-prefill after preemptions and slow
steps after an eviction), residency uses the census's reference and weighting, eviction is one
term (the larger of its two readings), and the preempted share is over running + preempted.
"""

from __future__ import annotations

import math

import pytest

from pdcensus.fleet.run import pick
from pdcensus.fleet.screen_model import ScreenRow
from pdcensus.fleet.screen_queries import screen_queries
from pdcensus.series.profiles import PROFILES, Signal

ALL = 1000.0  # running sequence-scrapes in the window


def _row(instance: str = "a:1", **sums: float) -> ScreenRow:
    base = {"scrapes": 240.0, "running_all": ALL, "running_tail": 0.0, "decode_tail": 0.0}
    return ScreenRow("radiance", instance, "radiance-1.8", {**base, **sums}, 1.0, 1.0)


# idle scrapes: 600 sequence-scrapes at 9 tok/s per stream, of which 400 clean at 10 and 200 in a tail at 7
IDLE = dict(running_idle=600.0, decode_idle=400.0 * 10 + 200.0 * 7, running_clean=400.0, decode_clean=4000.0,
            running_tail=200.0, decode_tail=1400.0)


def test_the_lag0_loss_is_read_against_every_idle_scrape_as_the_census_reads_its_collapse() -> None:
    # busy scrapes decode at the idle speed (9): no sharing; against the clean speed (10) they would show a
    # loss that is the tail's, counted a second time
    row = _row(**IDLE, running_busy=400.0, decode_busy=400.0 * 9)
    assert row.idle_per_stream == pytest.approx(9.0) and row.baseline_per_stream == pytest.approx(10.0)
    assert row.lag0_loss == pytest.approx(0.0)
    assert row.tail_loss == pytest.approx((200 - 1400 / 10) / ALL)  # the tail against the clean scrapes
    assert row.score == pytest.approx(row.tail_loss)


def test_with_a_ledger_the_sharing_term_is_the_chunk_steps_excess_not_the_busy_scrapes_rate_deficit() -> None:
    # a preemption stall: busy scrapes (re-prefill) decode at half speed, 20 % of decoders' time by rates;
    # the ledger says chunk steps cost 5 %; 16 % of sequence-time was preempted
    sums = dict(**IDLE, running_busy=400.0, decode_busy=400.0 * 4.5, ledger_sharing=0.05 * ALL,
                preempted_depth=0.16 / 0.84 * ALL)
    row = _row(**sums)
    assert row.lag0_loss == pytest.approx((400 - 400 * 4.5 / 9) / ALL)
    assert row.sharing_loss == pytest.approx(0.05) and row.sharing_term == pytest.approx(0.05)
    assert row.preemption_share == pytest.approx(0.16)
    assert row.score == pytest.approx(0.05 + row.tail_loss + 0.16)
    no_ledger = _row(**{k: v for k, v in sums.items() if k != "ledger_sharing"})
    assert math.isnan(no_ledger.sharing_loss) and no_ledger.sharing_term == pytest.approx(no_ledger.lag0_loss)


def test_residency_is_each_steps_excess_over_the_median_step_weighted_by_the_running_sequences() -> None:
    # sum over scrapes of running x step x steps/s, and of running x steps/s (steps/s = 60)
    row = _row(**IDLE, running_busy=0.0, decode_busy=0.0, decode_step_q10=0.0095, decode_step_q50=0.010,
               residency_step_seconds=ALL * 0.0125 * 60, residency_steps=ALL * 60)
    assert row.reference_step == 0.010
    assert row.residency_loss == pytest.approx((0.0125 - 0.010) * 60)  # 15 % of running sequence-time
    assert row.eviction_term == pytest.approx(max(row.residency_loss, row.tail_loss))
    assert row.score == pytest.approx(row.eviction_term)  # one eviction, read twice, counted once


def test_an_eviction_over_most_of_the_window_is_measured_from_the_fast_steps_as_the_census_does() -> None:
    # the median step is the slow one: a cluster over twice as fast (the 10th percentile) is the undisturbed step
    row = _row(**IDLE, running_busy=0.0, decode_busy=0.0, decode_step_q10=0.010, decode_step_q50=0.025,
               residency_step_seconds=ALL * 0.022 * 40, residency_steps=ALL * 40)
    assert row.reference_step == 0.010
    assert row.residency_loss == pytest.approx((0.022 - 0.010) * 40)
    near = _row(**{**row.sums, "decode_step_q10": 0.013})  # not twice as fast: the median stands
    assert near.reference_step == 0.025 and near.residency_loss < 0


def test_a_negative_reading_never_lowers_the_total_and_a_missing_ledger_leaves_the_rate_terms() -> None:
    row = _row(**IDLE, running_busy=0.0, decode_busy=0.0, decode_step_q10=0.009, decode_step_q50=0.010,
               residency_step_seconds=ALL * 0.0098 * 60, residency_steps=ALL * 60, ledger_sharing=0.0)
    assert row.residency_loss < 0 and row.eviction_term == pytest.approx(row.tail_loss)
    assert row.score == pytest.approx(row.tail_loss)
    old = _row(**IDLE, running_busy=0.0, decode_busy=0.0, decode_step_q10=0.009)  # a state file of before
    assert math.isnan(old.residency_loss) and old.eviction_term == old.tail_loss


def test_the_new_terms_survive_the_state_file_and_are_in_the_json() -> None:
    row = _row(**IDLE, running_busy=100.0, decode_busy=500.0, decode_step_q10=0.009, decode_step_q50=0.010,
               residency_step_seconds=ALL * 0.012 * 60, residency_steps=ALL * 60, ledger_sharing=30.0)
    body = row.to_dict()
    assert body["sharing_loss"] == pytest.approx(0.03) and body["residency_loss"] == pytest.approx(0.12)
    assert body["eviction_term"] == pytest.approx(0.12) and body["reference_step"] == 0.010
    assert ScreenRow.from_dict(body).score == pytest.approx(row.score)


def test_after_the_worst_of_each_term_the_places_follow_the_total() -> None:
    """Each term's worst is examined; the rest of K goes to the largest totals, not to each term's runners-up."""
    def row(instance: str, sharing: float, residency: float) -> ScreenRow:
        return _row(instance, **IDLE, running_busy=0.0, decode_busy=0.0, ledger_sharing=sharing * ALL,
                    decode_step_q10=0.009, decode_step_q50=0.010,
                    residency_step_seconds=ALL * (0.010 + residency / 60) * 60, residency_steps=ALL * 60)

    rows = [row("evict-a", 0.02, 0.45), row("evict-b", 0.02, 0.44), row("evict-c", 0.02, 0.43),
            row("share-a", 0.16, 0.01), row("share-b", 0.15, 0.01)]
    assert {r.instance for r in pick(rows, 2)} == {"evict-a", "share-a"}
    assert {r.instance for r in pick(rows, 3)} == {"evict-a", "share-a", "evict-b"}
    assert {r.instance for r in pick(rows, 4)} == {"evict-a", "share-a", "evict-b", "evict-c"}


@pytest.mark.parametrize("profile", ["radiance-1.8", "radiance-1.0.13", "vllm-v1", "sglang"])
def test_the_ledger_losses_are_asked_only_where_the_ledger_is_and_are_weighted_by_the_running_sequences(
        profile: str) -> None:
    queries = {q.name: q for q in screen_queries(PROFILES[profile], "", chunk_seconds=3600.0, step_seconds=15.0,
                                                 window_seconds=7200.0, window_end=1_793_498_400.0)}
    ledger = {"ledger_sharing", "residency_step_seconds", "residency_steps", "decode_step_q50"}
    assert (ledger <= queries.keys()) == PROFILES[profile].has_ledger
    if PROFILES[profile].has_ledger:
        running = PROFILES[profile].name_of(Signal.RUNNING)
        assert running is not None
        for name in ("ledger_sharing", "residency_step_seconds", "residency_steps"):
            assert queries[name].additive and running in queries[name].expr, name
        assert not queries["decode_step_q50"].additive and "quantile_over_time(0.5," in queries["decode_step_q50"].expr


@pytest.mark.parametrize("clean_share", [0.049, 0.051])
def test_the_tail_baseline_needs_the_census_s_scrape_count_not_a_share_so_a_day_long_tail_does_not_jump(
    clean_share: float,
) -> None:
    # a day at 15 s, 10 sequences running: clean scrapes hold ~5 % of the sequence-time either side of
    # the old 5 % share rule; both are hundreds of scrapes, and the tail is read against them both times
    scrapes, running = 5760.0, 10.0
    total = scrapes * running
    clean, tail = clean_share * total, 0.3 * total
    row = ScreenRow("radiance", "a:1", "radiance-1.8", {
        "scrapes": scrapes, "running_all": total, "running_clean": clean, "decode_clean": clean * 10.0,
        "running_idle": clean + tail, "decode_idle": clean * 10.0 + tail * 5.0,
        "running_tail": tail, "decode_tail": tail * 5.0, "running_busy": 0.0, "decode_busy": 0.0}, 1.0, 1.0)
    assert row.baseline_kind == "clean"
    assert row.tail_loss == pytest.approx(0.3 * 0.5)


def test_a_baseline_of_fewer_scrapes_than_the_census_s_contrast_needs_is_not_used() -> None:
    # 9 scrapes' worth of clean sequence-time at a mean batch of 10: the idle scrapes stand in
    row = ScreenRow("radiance", "a:1", "radiance-1.8", {
        "scrapes": 240.0, "running_all": 2400.0, "running_clean": 90.0, "decode_clean": 900.0,
        "running_idle": 1200.0, "decode_idle": 9000.0, "running_tail": 0.0, "decode_tail": 0.0}, 1.0, 1.0)
    assert row.baseline_kind == "idle"
    assert row.baseline_per_stream == pytest.approx(7.5)
