"""The long inter-token gaps' arithmetic (pdcensus.series.vllm_gaps) on hand-made histograms with vLLM 0.32's
inter-token bucket bounds."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.series.vllm_gaps import gap_contrast, gap_dose, long_gap_excess, median_gaps

# vLLM 0.32's inter-token latency buckets (vllm/v1/metrics/loggers.py), +Inf last
BOUNDS = np.array([0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                   40.0, 80.0, np.inf])


def _cumulative(per_bucket: dict[float, float]) -> np.ndarray:
    """One interval's cumulative bucket increases from {upper bound: observations in that bucket}."""
    per = np.array([per_bucket.get(float(b), 0.0) for b in BOUNDS])
    return np.cumsum(per)


def _rows(*intervals: dict[float, float]) -> np.ndarray:
    return np.vstack([_cumulative(i) for i in intervals])


def test_the_median_gap_is_read_as_histogram_quantile_reads_it() -> None:
    inc = _rows({0.025: 10.0}, {0.01: 4.0, 0.025: 4.0, 0.2: 2.0}, {})
    med = median_gaps(BOUNDS, inc)
    assert med[0] == pytest.approx(0.0175)  # half way through the 10-25 ms bucket
    assert med[1] == pytest.approx(0.01 + 0.015 * 1 / 4)  # the 5th of 10 observations: 1 of 4 into the second bucket
    assert np.isnan(med[2])  # no observation: no median


def test_a_chunk_steps_gaps_count_at_their_buckets_midpoint_less_the_gap_they_stand_in_for() -> None:
    # 100 decode-only gaps under 10 ms and the 5 decoders' gaps across one 170 ms chunk step
    inc = _rows({0.01: 100.0, 0.2: 5.0})
    count, excess = long_gap_excess(BOUNDS, inc, np.array([0.015]), np.array([0.005]))
    assert count[0] == pytest.approx(5.0)
    assert excess[0] == pytest.approx(5 * (0.175 - 0.005))


def test_only_the_part_of_a_bucket_above_the_line_counts() -> None:
    # 10 gaps spread over 10-25 ms; the line at 20 ms keeps a third of them, read at 22.5 ms
    count, excess = long_gap_excess(BOUNDS, _rows({0.025: 10.0}), np.array([0.02]), np.array([0.005]))
    assert count[0] == pytest.approx(10 / 3)
    assert excess[0] == pytest.approx(10 / 3 * (0.0225 - 0.005))


def _contrast(beside_rows: list[dict[float, float]], without_rows: list[dict[float, float]],
              beside_sums: list[float], without_sums: list[float], clean: float = 0.005):
    inc = _rows(*beside_rows, *without_rows)
    n = inc.shape[0]
    beside = np.arange(n) < len(beside_rows)
    sums = np.array(beside_sums + without_sums)
    weights = np.ones((1, n))
    return gap_contrast(weights, sums, BOUNDS, inc, beside, ~beside, sums, clean)


def test_long_gaps_that_come_with_prefill_are_sharing_and_their_excess_is_its_loss() -> None:
    # 10 intervals beside a 170 ms chunk step (5 decoders), 10 without: 5 x 190 decode-only gaps of 5 ms
    beside = [{0.01: 950.0, 0.2: 5.0}] * 10
    without = [{0.01: 1000.0}] * 10
    g = _contrast(beside, without, [950 * 0.005 + 5 * 0.17] * 10, [1000 * 0.005] * 10)
    assert g is not None
    assert g.without[0] == pytest.approx(0.0)
    assert g.difference[0] > 0.1
    # each chunk step costs the 5 decoders 0.165 s beyond a decode-only gap (0.175 s read at the midpoint)
    total = 10 * (950 * 0.005 + 5 * 0.17) + 10 * 5.0
    assert g.loss[0] == pytest.approx(10 * 5 * 0.170 / total, rel=0.05)
    assert g.clean_gap_seconds / g.mean_long_gap_seconds == pytest.approx(0.005 / 0.175, rel=0.01)


def test_long_gaps_as_common_without_prefill_are_the_hosts_not_sharing() -> None:
    rows = [{0.01: 950.0, 0.2: 5.0}] * 10
    g = _contrast(rows, rows, [950 * 0.005 + 5 * 0.17] * 10, [950 * 0.005 + 5 * 0.17] * 10)
    assert g is not None
    assert g.difference[0] == pytest.approx(0.0, abs=1e-12)
    assert g.loss[0] == pytest.approx(0.0, abs=1e-12)


def test_a_batch_that_grew_slows_every_gap_and_none_is_long() -> None:
    # beside prefill the batch doubled: every gap 12-20 ms against a 5 ms clean pace; the line follows the
    # interval's own median gap, so none of them is long (a fixed line at 15 ms would count half of them)
    beside = [{0.025: 1000.0}] * 10
    without = [{0.01: 1000.0}] * 10
    g = _contrast(beside, without, [1000 * 0.016] * 10, [1000 * 0.005] * 10)
    assert g is None or g.loss[0] == pytest.approx(0.0, abs=1e-12)


def test_a_long_gap_is_never_read_longer_than_the_intervals_sum_allows() -> None:
    # one 10.6 s stall in the 10-20 s bucket: its midpoint (15 s) is more than the interval's whole sum
    beside = [{0.1: 10.0, 20.0: 1.0}] * 6
    without = [{0.1: 100.0}] * 6
    g = _contrast(beside, without, [10 * 0.07 + 10.6] * 6, [100 * 0.07] * 6, clean=0.07)
    assert g is not None
    assert 0.0 <= g.beside[0] <= 1.0
    assert g.mean_long_gap_seconds <= 10.6 + 10 * 0.07 + 1e-9


def test_too_few_long_gaps_beside_prefill_give_no_contrast() -> None:
    g = _contrast([{0.01: 100.0, 0.2: 1.0}] * 4, [{0.01: 100.0}] * 4, [0.5 + 0.17] * 4, [0.5] * 4)
    assert g is None


DECODER_SECONDS = 50.0  # 5 decoders through a 10 s scrape


def _dose(per_interval: list[tuple[float, dict[float, float], float]]):
    """gap_dose over intervals of (prompt tokens per second, buckets, inter-token sum), each of 5 decoders over
    10 s; every interval beside prefill where its dose is above 0."""
    inc = _rows(*[b for _, b, _ in per_interval])
    dose = np.array([d for d, _, _ in per_interval])
    sums = np.array([s for _, _, s in per_interval])
    n = inc.shape[0]
    return gap_dose(np.ones((1, n)), sums, BOUNDS, inc, dose, dose > 0, np.ones(n, dtype=bool),
                    np.full(n, DECODER_SECONDS))


def test_long_gaps_that_grow_with_the_prompt_tokens_are_sharing_with_no_span_free_of_prefill() -> None:
    # every interval carries prompts: 1, 2 or 3 prompts (15, 30, 45 tok/s), each one 170 ms chunk step beside
    # 5 decoders (5 long gaps each), and a host pause of one 170 ms gap in every interval whatever the dose
    rows = []
    for k in [1, 2, 3] * 8:
        long = 5.0 * k + 1.0
        rows.append((15.0 * k, {0.01: 950.0, 0.2: long}, 950 * 0.0075 + long * 0.175))
    g = _dose(rows)
    assert g is not None and g.by_dose
    # the intercept holds the host's pause (one long gap per interval), not the prompts' 5 per prompt
    excess = 0.175 - g.clean_gap_seconds
    assert g.clean_gap_seconds == pytest.approx(0.0075, rel=0.4)  # the intervals' median: inside the 5-10 ms bucket
    assert g.without[0] == pytest.approx(excess / DECODER_SECONDS, rel=0.02)
    assert g.difference[0] == pytest.approx(2 * 5 * excess / DECODER_SECONDS, rel=0.02)  # 2 prompts on average
    # the loss is the prompts' long gaps' excess alone: 5 per prompt, 48 prompts, beyond the median gap
    assert g.loss[0] == pytest.approx(5 * 48 * excess / (24 * DECODER_SECONDS), rel=0.02)


def test_long_gaps_that_do_not_grow_with_the_dose_are_no_sharing() -> None:
    # the same two long gaps per interval whatever the prompt tokens: the fit is flat, its intercept the mean
    rows = [(15.0 * k, {0.01: 950.0, 0.2: 2.0}, 950 * 0.0075 + 2 * 0.175) for k in [1, 2, 3] * 8]
    g = _dose(rows)
    assert g is not None
    assert g.difference[0] == pytest.approx(0.0, abs=1e-9)
    assert g.loss[0] == pytest.approx(0.0, abs=1e-9)


def test_the_dose_needs_spread_and_enough_intervals() -> None:
    flat = [(30.0, {0.01: 950.0, 0.2: 10.0}, 950 * 0.0075 + 10 * 0.175)] * 24
    assert _dose(flat) is None  # every interval the same dose: no slope to read
    few = [(15.0 * k, {0.01: 950.0, 0.2: 5.0 * k}, 950 * 0.0075 + 5 * k * 0.175) for k in [1, 2, 3] * 3]
    assert _dose(few) is None  # 9 intervals: under MIN_DOSE_INTERVALS
