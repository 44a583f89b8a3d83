"""The fleet ranking: by the census's total lost decode share, ties where intervals overlap; the fleet page."""

from __future__ import annotations

import math

from pdcensus.fleet.page import render_fleet_page
from pdcensus.fleet.rank import EXAMINED, FAILED, INCONCLUSIVE, SCREENED, Examined, Standing, rank
from pdcensus.fleet.run import FleetResult, StageCost, examine_batch_size, pick
from pdcensus.fleet.screen_model import ScreenRow


def _examined(mechanism: str, *found: tuple[str, float, float, float]) -> Examined:
    rows = tuple((m, "material" if v >= 0.05 else "minor", v, lo, hi) for m, v, lo, hi in found)
    total = sum(f[2] for f in rows)
    top = max(rows, key=lambda f: f[2]) if rows else None
    return Examined(mechanism, 0.9, total, (sum(f[3] for f in rows), sum(f[4] for f in rows)),
                    top[0] if top else "", top[1] if top else "", rows, math.nan)


def test_the_ranking_sums_every_found_mechanism_so_a_mixed_endpoint_outranks_a_single_one() -> None:
    standings = [
        Standing("r", "healthy", _examined("step-time-sharing", ("step-time-sharing", 0.02, 0.015, 0.025)), 0.9, (),
                 None),
        Standing("r", "mixed", _examined("mixed", ("eviction", 0.25, 0.2, 0.3), ("preemption-stall", 0.19, 0.17, 0.21)),
                 0.1, (), None),
        Standing("r", "sharing", _examined("step-time-sharing", ("step-time-sharing", 0.3, 0.28, 0.32)), 0.5, (),
                 None),
    ]
    rows = rank(standings)
    assert [r.instance for r in rows] == ["mixed", "sharing", "healthy"]
    assert rows[0].loss_share == 0.44 and rows[0].principal == "eviction"
    assert rows[0].loss_interval == (0.37, 0.51)
    assert not rows[1].tied_with_previous  # [0.28, 0.32] below [0.37, 0.51]


def test_neighbours_whose_intervals_overlap_are_marked_as_ties() -> None:
    rows = rank([Standing("r", "a", _examined("eviction", ("eviction", 0.40, 0.30, 0.50)), 0.0, (), None),
                 Standing("r", "b", _examined("eviction", ("eviction", 0.35, 0.33, 0.37)), 0.0, (), None),
                 Standing("r", "c", _examined("eviction", ("eviction", 0.10, 0.05, 0.15)), 0.0, (), None)])
    assert [r.tied_with_previous for r in rows] == [False, True, False]


def test_inconclusive_then_screened_only_then_failed_come_after_every_examined_verdict() -> None:
    rows = rank([
        Standing("r", "failed", None, 0.9, (), "no good scrape"),
        Standing("r", "screened-high", None, 0.8, (), None),
        Standing("r", "inconclusive", _examined("inconclusive"), math.nan, ("no-idle-baseline",), None),
        Standing("r", "none", _examined("none"), 0.0, (), None),
        Standing("r", "screened-low", None, 0.1, (), None),
    ])
    assert [r.instance for r in rows] == ["none", "inconclusive", "screened-high", "screened-low", "failed"]
    assert [r.group for r in rows] == [EXAMINED, INCONCLUSIVE, SCREENED, SCREENED, FAILED]
    assert [r.mechanism for r in rows][2:] == ["screened", "screened", "error"]


def test_the_examined_set_is_every_flagged_endpoint_and_the_top_k_of_the_others() -> None:
    def row(instance: str, running_busy: float, **extra: float) -> ScreenRow:
        sums = {"scrapes": 100.0, "running_all": 100.0, "running_clean": 50.0, "decode_clean": 500.0,
                "running_idle": 50.0, "decode_idle": 500.0,  # the clean scrapes are idle ones
                "running_busy": running_busy, "decode_busy": running_busy * 5, "running_tail": 0.0, **extra}
        return ScreenRow("r", instance, "radiance-1.8", sums)

    rows = [row("low", 5.0), row("high", 40.0), row("mid", 20.0), row("restarted", 50.0, resets=1.0)]
    assert [r.instance for r in pick(rows, 1)] == ["restarted", "high"]  # the flagged one takes no K place
    assert [r.instance for r in pick(rows, 2)] == ["restarted", "high", "mid"]
    assert {r.instance for r in pick(rows, 0)} == {"restarted"}


def test_the_worst_tail_is_examined_even_where_the_total_ranks_two_sharing_endpoints_above_it() -> None:
    """K places are dealt from each term's ranking, so a term the total underweighs still gets its worst in."""
    def row(instance: str, running_busy: float, running_tail: float) -> ScreenRow:
        sums = {"scrapes": 100.0, "running_all": 100.0, "running_clean": 50.0, "decode_clean": 500.0,
                "running_idle": 50.0, "decode_idle": 500.0,  # the clean scrapes are idle ones
                "running_busy": running_busy, "decode_busy": running_busy * 5,
                "running_tail": running_tail, "decode_tail": running_tail * 8}
        return ScreenRow("r", instance, "radiance-1.8", sums)

    rows = [row("sharing-a", 40.0, 0.0), row("sharing-b", 38.0, 0.0), row("tail", 0.0, 30.0), row("quiet", 1.0, 0.0)]
    assert rows[2].score < rows[1].score < rows[0].score  # the total alone would pick the two sharing ones
    assert {r.instance for r in pick(rows, 2)} == {"sharing-a", "tail"}
    assert {r.instance for r in pick(rows, 3)} == {"sharing-a", "tail", "sharing-b"}
    assert {r.instance for r in pick(rows, 4)} == {"sharing-a", "sharing-b", "tail", "quiet"}


def test_the_fleet_page_escapes_every_label_and_links_only_examined_endpoints() -> None:
    hostile = '<script>alert("x")</script>'
    standings = [Standing("job&", hostile, _examined("eviction", ("eviction", 0.4, 0.3, 0.5)), 0.2, (), None),
                 Standing("job&", "plain:1", None, 0.1, ("queue-growth",), None)]
    result = FleetResult("http://127.0.0.1:9090", '{job="a<b"}', 0.0, 3600.0, 20, (), (), (), rank(standings),
                         {("job&", hostile): {"per_stream": [1.0, 2.0, math.nan, 3.0], "prefill": [0.0, 5.0, 0.0, 0.0]}},
                         {"screen": StageCost()}, (), 1.0)
    page = render_fleet_page(result, reports_href="fleet-reports")
    assert hostile not in page and "&lt;script&gt;" in page and "job&amp;" in page and "a&lt;b" in page
    assert page.count("full report") == 1 and 'href="fleet-reports/job___script_alert_x_script-' in page
    assert "<polyline" in page and "not examined" in page


def test_a_long_window_is_pulled_in_smaller_batches_so_a_pull_holds_at_most_k_endpoint_2h_windows() -> None:
    assert examine_batch_size(25, 3600) == 25 and examine_batch_size(25, 7200) == 25
    assert examine_batch_size(25, 86_400) == 2 and examine_batch_size(25, 7 * 86_400) == 1
    assert examine_batch_size(1, 60) == 1
