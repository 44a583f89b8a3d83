"""One histogram quantile, Prometheus's ``BucketQuantile``, for PromQL and for the census's TTFT.

Where the census's old copy and Prometheus differed (duplicate ``le`` bounds, float noise
between neighbouring buckets, ``q = 0`` over an empty first bucket), the PromQL engine
and the census now give Prometheus's answer, the same number.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdcensus.census.signals import Histogram
from pdcensus.census.ttft import summed_quantile
from pdcensus.series.promql import Storage, instant_query
from pdcensus.series.quantile import Bucket, bucket_quantile, quantile_of_bounds

T0 = 1_700_000_000.0


def promql_quantile(q: float, buckets: dict[str, float]) -> float:
    storage = Storage.from_series([({"__name__": "lat_bucket", "le": le}, [T0], [n]) for le, n in buckets.items()])
    result = instant_query(storage, f"histogram_quantile({q}, lat_bucket)", T0)
    return float(result.series[0].values[0])


def test_duplicate_bounds_are_added_together_as_prometheus_coalesces_them() -> None:
    # le="1" and le="1.0" are two series of one bound: Prometheus adds their counts (3), so
    # the median rank 2 falls inside (0, 1] at 2/3; a copy that kept them apart said 1.0
    buckets = {"1": 1.0, "1.0": 2.0, "2": 3.0, "+Inf": 4.0}
    expected = 2 / 3
    assert promql_quantile(0.5, buckets) == pytest.approx(expected)
    bounds = np.array([1.0, 1.0, 2.0, np.inf])
    counts = np.array(list(buckets.values()))
    assert quantile_of_bounds(0.5, bounds, counts) == pytest.approx(expected)


def test_the_census_ttft_quantile_is_the_promql_one_on_the_same_increases() -> None:
    bounds = np.array([0.1, 0.25, 0.25, 0.5, 1.0, np.inf])
    increases = np.array([[1.0, 3.0, 1.0, 6.0, 7.0, 8.0], [0.0, 2.0, 0.0, 5.0, 9.0, 9.0]])
    histogram = Histogram(family="ttft", upper_bounds=bounds, increases=increases)
    summed = increases.sum(axis=0)
    les = ["0.1", "0.25", "0.250", "0.5", "1", "+Inf"]  # two series of the bound 0.25
    for q in (0.1, 0.5, 0.9, 0.99):
        census = summed_quantile(q, histogram, np.array([True, True]))
        assert census == pytest.approx(promql_quantile(q, dict(zip(les, summed)))), q


def test_q_zero_over_an_empty_first_bucket_is_nan_as_go_divides_zero_by_zero() -> None:
    assert math.isnan(bucket_quantile(0.0, [Bucket(1.0, 0.0), Bucket(2.0, 3.0), Bucket(math.inf, 4.0)]))
    assert bucket_quantile(0.0, [Bucket(1.0, 2.0), Bucket(math.inf, 4.0)]) == 0.0


def test_float_noise_between_buckets_is_ignored_in_3x_and_forced_monotonic_in_2x() -> None:
    noisy = [Bucket(1.0, 10.0), Bucket(2.0, 10.0 - 1e-13), Bucket(4.0, 20.0), Bucket(math.inf, 20.0)]
    assert bucket_quantile(0.5, noisy, semantics=3) == pytest.approx(1.0)
    assert bucket_quantile(0.5, noisy, semantics=2) == pytest.approx(1.0)
    decreasing = [Bucket(1.0, 10.0), Bucket(2.0, 8.0), Bucket(4.0, 20.0), Bucket(math.inf, 20.0)]
    assert bucket_quantile(0.25, decreasing) == pytest.approx(0.5)
