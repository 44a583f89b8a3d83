"""vary_fleet: many endpoints from a small pool, each with its own label, shift and gauge noise, its run's truth kept."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.errors import UsageError
from pdcensus.sim.fleet_vary import NOISY_GAUGES, simulate_pool, vary_fleet
from pdcensus.sim.run import EPOCH_SECONDS


@pytest.fixture(scope="module")
def pool() -> list:  # type: ignore[type-arg]
    return simulate_pool(["healthy", "step-time-sharing"], seeds=1, duration_seconds=600, margin_seconds=300)


def test_each_endpoint_covers_the_same_window_under_its_own_label_with_its_runs_truth(pool: list) -> None:  # type: ignore[type-arg]
    recording, members = vary_fleet(pool, 5, duration_seconds=600, seed=3)
    assert [e.instance for e in recording.endpoints] == [f"sim-{i}:7770" for i in range(5)]
    for i, (endpoint, member) in enumerate(zip(recording.endpoints, members)):
        run = pool[i % len(pool)]
        assert endpoint.timestamps[0] == EPOCH_SECONDS and endpoint.n_scrapes == 41
        assert member.truth["loss_share"] == run.truth["loss_share"] and member.truth["instance"] == endpoint.instance
        assert {k.label("instance") for k in endpoint.keys} == {endpoint.instance}


def test_counters_keep_counting_and_only_the_decode_and_prefill_gauges_get_noise(pool: list) -> None:  # type: ignore[type-arg]
    recording, members = vary_fleet(pool, 2, duration_seconds=600, seed=5, noise=0.05)
    for endpoint, run in zip(recording.endpoints, pool):
        shift = int(members[recording.endpoints.index(endpoint)].truth["varied_from"]["shift_seconds"] // 15)
        original = run.endpoint.values[shift:shift + endpoint.n_scrapes]
        for c, key in enumerate(endpoint.keys):
            column, source = endpoint.values[:, c], original[:, c]
            ok = endpoint.present[:, c]
            if key.name in NOISY_GAUGES:
                assert not np.allclose(column[ok], source[ok])
            else:
                np.testing.assert_array_equal(column[ok], source[ok])


def test_a_window_longer_than_the_pool_runs_is_refused(pool: list) -> None:  # type: ignore[type-arg]
    with pytest.raises(UsageError, match="shorter than the window"):
        vary_fleet(pool, 1, duration_seconds=3600)
