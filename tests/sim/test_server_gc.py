"""The collector pacer: the interpreter's generations, collected only where the driver has slack."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pdcensus.sim.server_gc import FIRST_PAUSE_GUESS_SECONDS, CollectorPacer


@pytest.fixture
def restored() -> Iterator[None]:
    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    (gc.enable if enabled else gc.disable)()


def _cycles(n: int) -> list[list[object]]:
    out: list[list[object]] = []
    for _ in range(n):
        a: list[object] = []
        a.append(a)
        out.append(a)
    return out


def test_inside_the_pacer_automatic_collection_is_off_and_start_up_objects_are_frozen(restored: None) -> None:
    gc.enable()
    with CollectorPacer():
        assert not gc.isenabled()
        assert gc.get_freeze_count() > 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_tight_step_gets_no_collection_and_a_roomy_one_collects_the_young_generation(restored: None) -> None:
    with CollectorPacer(min_slack_seconds=0.005) as pacer:
        assert pacer.collect_in(0.001) is None
        assert pacer.collect_in(0.020) == 0
        assert pacer.collections == [1, 0, 0]


def test_unreachable_cycles_made_while_serving_are_freed_by_the_paced_collections(restored: None) -> None:
    with CollectorPacer() as pacer:
        before = len(gc.get_objects(0))
        _cycles(5000)  # garbage at once: only the cycle collector can free them
        assert len(gc.get_objects(0)) >= before + 5000
        pacer.collect_in(1.0)
        assert len(gc.get_objects(0)) < before + 100


def test_the_oldest_generation_waits_for_a_slack_that_fits_its_last_pause(restored: None) -> None:
    gc.set_threshold(700, 1, 1)
    with CollectorPacer(min_slack_seconds=0.001, fit_margin=1.5) as pacer:
        gc.collect(0)
        gc.collect(1)
        gc.collect(0)
        gc.collect(1)  # the counts now call for the oldest generation
        assert gc.get_count()[2] > 1
        guess = FIRST_PAUSE_GUESS_SECONDS[2]
        assert pacer.choose(1.5 * guess - 0.001) != 2  # it does not fit: a younger one goes instead
        assert pacer.choose(1.5 * guess + 0.001) == 2


def test_an_overdue_generation_is_collected_whatever_the_slack(restored: None) -> None:
    gc.set_threshold(10, 10, 10)
    with CollectorPacer(min_slack_seconds=0.005, force_factor=10) as pacer:
        keep = _cycles(200)  # alive: the young count stays over 10 x 10
        assert gc.get_count()[0] > 100
        assert pacer.collect_in(0.0) == 0
        del keep
