"""Counter increases and the shape proof, on hand-made and synthetic recordings."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.counters import counter_decreases
from pdcensus.census.model import SegmentStart
from pdcensus.census.shape import choose_segment, split_shapes
from pdcensus.errors import UsageError
from pdcensus.series.increases import interval_increase, spanned, summed_increase
from pdcensus.series.model import Endpoint, Family, MetricType, RecordingBuilder, SeriesKey

from .synth import Synth, synth_recording


def test_increase_after_a_reset_is_the_new_value():
    inc, valid = interval_increase(np.array([5.0, 9.0, 2.0, 4.0]), np.ones(4, bool))
    assert list(inc[1:]) == [4.0, 2.0, 2.0]
    assert not valid[0] and np.isnan(inc[0])


def test_a_sample_missing_in_one_series_shares_its_delta_over_the_intervals_it_spans():
    # one series missed the scrape at t=15 that other series had: 6 over 15 s + 30 s, by their lengths
    present = np.array([True, False, True])
    inc, valid = interval_increase(np.array([1.0, np.nan, 7.0]), present, np.array([0.0, 15.0, 45.0]))
    assert np.isnan(inc[0]) and inc[1:].tolist() == [2.0, 4.0] and valid.tolist() == [False, True, True]
    assert spanned(present).tolist() == [False, True, True]
    even, _ = interval_increase(np.array([1.0, np.nan, 7.0]), present)  # no times: equal shares
    assert even[1:].tolist() == [3.0, 3.0]


def test_a_reset_across_a_missing_sample_counts_the_new_value_over_the_span():
    inc, _ = interval_increase(np.array([9.0, np.nan, 4.0]), np.array([True, False, True]), np.array([0.0, 15.0, 30.0]))
    assert inc[1:].tolist() == [2.0, 2.0]


def test_a_label_child_that_appears_later_is_no_gap():
    vals = np.array([[1.0, np.nan], [2.0, np.nan], [3.0, 5.0], [4.0, 6.0]])
    present = np.isfinite(vals)
    assert summed_increase(vals, present)[1:].tolist() == [1.0, 1.0, 2.0]
    assert not spanned(present).any()


def test_summed_increase_adds_label_sets_and_is_nan_without_an_interval():
    vals = np.array([[1.0, 10.0], [2.0, 13.0]])
    out = summed_increase(vals, np.ones((2, 2), bool))
    assert np.isnan(out[0]) and out[1] == 4.0


def test_counter_decrease_ignores_float_noise_but_sees_a_reset():
    vals = np.array([[1e9], [1e9 - 1e-4], [3.0]])
    dec = counter_decreases(vals, np.ones((3, 1), bool))
    assert dec[:, 0].tolist() == [False, False, True]


def _endpoint_of(cfg: Synth) -> tuple[Endpoint, dict[str, Family]]:
    rec = synth_recording(cfg)
    return rec.endpoints[0], rec.families


def test_an_empty_endpoint_has_no_shape():
    ep = Endpoint("j", "i", np.empty(0), [], np.empty((0, 0)), np.empty((0, 0), bool))
    split = split_shapes(ep, {})
    assert split.result.segments == () and split.rows == ()


def test_one_scrape_is_one_shape_of_one_scrape():
    b = RecordingBuilder()
    b.add_family(Family("x", MetricType.COUNTER))
    b.add(SeriesKey("x_total", (("instance", "i"), ("job", "j"))), 100.0, 5.0)
    rec = b.build()
    split = split_shapes(rec.endpoints[0], rec.families)
    assert [s.scrapes for s in split.result.segments] == [1]


def test_a_counter_reset_starts_a_new_shape():
    ep, fam = _endpoint_of(Synth(duration_seconds=1800, restart_at=60))
    split = split_shapes(ep, fam)
    segs = split.result.segments
    assert len(segs) == 2
    assert segs[1].starts_because == SegmentStart.COUNTER_RESET
    assert segs[0].scrapes == 60 and segs[1].scrapes == 60


def test_a_missed_scrape_with_continuous_counters_is_noted_not_split():
    ep, fam = _endpoint_of(Synth(duration_seconds=1800, missed=(40, 41)))
    split = split_shapes(ep, fam)
    assert len(split.result.segments) == 1
    assert split.result.segments[0].scrapes == 118
    assert any("same process" in n for n in split.result.segments[0].notes)


def test_an_upgrade_from_1_0_13_to_1_8_is_two_shapes_with_their_profiles():
    ep, fam = _endpoint_of(Synth(duration_seconds=1800, upgrade_at=50))
    res = choose_segment(split_shapes(ep, fam), None)
    assert [s.profile for s in res.segments] == ["radiance-1.0.13", "radiance-1.8"]
    assert res.analysed == 2 and res.proven


def test_a_new_build_family_without_a_restart_still_starts_a_shape():
    rec = synth_recording(Synth(duration_seconds=900, upgrade_at=30))
    ep = rec.endpoints[0]
    # undo the counter reset: make every counter continue across the upgrade
    for i, key in enumerate(ep.keys):
        if key.name.endswith("_total") or key.name.endswith("_bucket") or key.name.endswith("_count"):
            col = ep.values[:, i]
            if ep.present[29, i] and ep.present[30, i]:
                col[30:] += col[29]
    split = split_shapes(ep, rec.families)
    assert [s.starts_because for s in split.result.segments] == [SegmentStart.WINDOW_START, SegmentStart.NEW_FAMILY]


def test_a_gap_that_no_counter_bridges_starts_a_shape():
    b = RecordingBuilder()
    key = SeriesKey("radiance:decode_tokens_per_second", (("instance", "i"), ("job", "j")))
    b.add_many(key, [0, 15, 30, 300, 315], [1, 1, 1, 1, 1])
    rec = b.build()
    res = split_shapes(rec.endpoints[0], rec.families).result
    assert [s.starts_because for s in res.segments] == [SegmentStart.WINDOW_START, SegmentStart.GAP]
    assert not res.proven


@pytest.mark.parametrize("segment", [pytest.param(0, id="zero"), pytest.param(3, id="past-the-end"),
                                     pytest.param(-1, id="negative")])
def test_choosing_a_segment_that_does_not_exist_lists_the_choices(segment):
    ep, fam = _endpoint_of(Synth(duration_seconds=900, restart_at=30))
    with pytest.raises(UsageError, match=r"choose 1\.\.2"):
        choose_segment(split_shapes(ep, fam), segment)
