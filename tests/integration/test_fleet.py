"""`pdcensus fleet` against a real Prometheus holding a small simulated fleet (backfilled with promtool).

Five endpoints, each a one-hour simulation of a scenario under its own ``instance`` label; the
fifth exports engine metrics but every scrape of it has ``up`` = 0, so no census can use it.
The fleet census must find all five, agree with each usable one's ground truth, and rank the
worst per-stream collapse first, the inconclusive (idle) endpoint after the conclusive ones,
and the unusable one last with its reason.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdcensus.errors import DataError, UsageError
from pdcensus.fleet import census_fleet
from pdcensus.sim.fleet_recording import FleetMember, simulate_fleet
from pdcensus.sim.run import EPOCH_SECONDS
from pdcensus.sources.openmetrics_writer import write_openmetrics

pytestmark = pytest.mark.integration

SCENARIOS = ["healthy", "idle", "step-time-sharing", "preemption-stall", "healthy"]
BROKEN = 4  # the member whose every scrape says up = 0
DURATION_SECONDS = 3600.0
START, END = EPOCH_SECONDS, EPOCH_SECONDS + DURATION_SECONDS


@pytest.fixture(scope="module")
def fleet(prometheus_server: Callable[[Path], str], tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[str, list[FleetMember]]:
    recording, members = simulate_fleet(SCENARIOS, duration_seconds=DURATION_SECONDS, seed=1)
    broken = recording.endpoints[BROKEN]
    up = [i for i, k in enumerate(broken.keys) if k.name == "up"]
    broken.values[:, up] = np.where(broken.present[:, up], 0.0, np.nan)
    path = tmp_path_factory.mktemp("fleet") / "fleet.om"
    write_openmetrics(recording, path)
    return prometheus_server(path), members


def test_the_fleet_census_finds_every_endpoint_and_matches_each_ground_truth(
    fleet: tuple[str, list[FleetMember]],
) -> None:
    url, members = fleet
    result = census_fleet(url, selector='{job="radiance"}', start=START, end=END, concurrency=3)
    assert sorted(e.instance for e in result.endpoints) == sorted(m.instance for m in members)
    by_instance = {e.instance: e for e in result.endpoints}
    for member in members[:BROKEN]:
        report = by_instance[member.instance].report
        assert report is not None, by_instance[member.instance].error
        assert report.verdict.mechanism.value == member.truth["mechanism"], member.scenario


def test_the_ranking_puts_the_worst_collapse_first_and_the_inconclusive_endpoint_last(
    fleet: tuple[str, list[FleetMember]],
) -> None:
    url, members = fleet
    result = census_fleet(url, selector='{job="radiance"}', start=START, end=END, concurrency=2)
    scenario_of = {m.instance: m.scenario for m in members}
    ranked = [scenario_of[r.instance] for r in result.ranking]
    assert ranked[0] == "step-time-sharing" and ranked[-2] == "idle"
    assert result.ranking[-1].instance == members[BROKEN].instance and result.ranking[-1].mechanism == "error"
    effects = [r.per_stream_vs_idle for r in result.ranking[:-2]]
    assert all(e is not None for e in effects)
    assert effects == sorted(effects)  # type: ignore[type-var]
    assert [r.rank for r in result.ranking] == [1, 2, 3, 4, 5]


def test_the_fleet_cli_prints_census_objects_and_the_ranking_as_json(fleet: tuple[str, list[FleetMember]]) -> None:
    url, _ = fleet
    done = subprocess.run(
        [sys.executable, "-m", "pdcensus", "fleet", "--prometheus", url, "--selector", '{job="radiance"}',
         "--start", str(START), "--end", str(END), "--concurrency", "4", "--json"],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    assert body["schema"] == "pdcensus/fleet/v1" and len(body["endpoints"]) == 4 and len(body["ranking"]) == 5
    assert {e["schema"] for e in body["endpoints"]} == {"pdcensus/census/v2"}
    assert {e["endpoint"]["instance"] for e in body["endpoints"]} == {r["instance"] for r in body["ranking"][:4]}
    assert [e["instance"] for e in body["errors"]] == [body["ranking"][-1]["instance"]]
    assert "[5/5]" in done.stderr  # one progress line per endpoint when stderr is not a terminal


def test_the_fleet_table_names_every_instance(fleet: tuple[str, list[FleetMember]]) -> None:
    url, members = fleet
    done = subprocess.run(
        [sys.executable, "-m", "pdcensus", "fleet", "--prometheus", url, "--start", str(START), "--end", str(END)],
        capture_output=True, text=True, timeout=120, check=False, env={"COLUMNS": "200", "PATH": ""})
    assert done.returncode == 0, done.stderr
    for member in members:
        assert member.instance in done.stdout
    assert "step-time-sharing" in done.stdout and "inconclusive" in done.stdout


@pytest.mark.parametrize(("selector", "error"), [
    pytest.param('{job="nobody"}', DataError, id="no-endpoint-matches"),
    pytest.param('{job=}', UsageError, id="malformed-selector"),
])
def test_a_selector_that_finds_nothing_or_does_not_parse_is_refused(
    fleet: tuple[str, list[FleetMember]], selector: str, error: type[Exception],
) -> None:
    url, _ = fleet
    with pytest.raises(error, match="nobody|selector"):
        census_fleet(url, selector=selector, start=START, end=END)


def test_an_unusable_endpoint_keeps_its_one_line_reason_and_the_rest_still_run(
    fleet: tuple[str, list[FleetMember]],
) -> None:
    url, members = fleet
    result = census_fleet(url, selector='{job="radiance"}', start=START, end=END)
    broken = next(e for e in result.endpoints if e.instance == members[BROKEN].instance)
    assert broken.report is None and broken.error is not None
    assert members[BROKEN].instance in broken.error and "no good scrape" in broken.error
    assert sum(e.report is not None for e in result.endpoints) == BROKEN


def test_a_window_too_short_for_any_census_ranks_every_endpoint_inconclusive_or_unusable(
    fleet: tuple[str, list[FleetMember]],
) -> None:
    url, members = fleet
    result = census_fleet(url, selector='{job="radiance"}', start=START + 600, end=START + 610)
    assert [r.mechanism for r in result.ranking] == ["inconclusive"] * BROKEN + ["error"]
    assert math.isfinite(result.wall_seconds)


def test_pulling_endpoints_in_batches_gives_the_same_reports_as_one_at_a_time(
    fleet: tuple[str, list[FleetMember]],
) -> None:
    url, _ = fleet
    alone = census_fleet(url, start=START, end=END, concurrency=1, batch_size=1)
    batched = census_fleet(url, start=START, end=END, concurrency=2, batch_size=2)
    assert batched.batch_size == 2 and alone.batch_size == 1
    assert [r.to_dict() for r in alone.ranking] == [r.to_dict() for r in batched.ranking]
    for a, b in zip(alone.endpoints, batched.endpoints):
        if a.report is None or b.report is None:
            assert (a.report, a.error) == (b.report, b.error)
            continue
        assert 'instance="' in a.report.source and 'instance=~"' in b.report.source  # the one thing that differs
        assert {**a.report.to_dict(), "source": ""} == {**b.report.to_dict(), "source": ""}


@pytest.mark.parametrize("instances", [
    pytest.param(["sim-0:7770"], id="one-instance-exact-match"),
    pytest.param(["a.b:1", "c|d:2", 'q"uote:3', "sp ace:4", "back\\slash:5"], id="regex-and-string-specials"),
])
def test_a_batch_selector_matches_exactly_its_instances(instances: list[str]) -> None:
    import re

    import promql_parser

    from pdcensus.fleet import batch_selector

    parsed = promql_parser.parse(batch_selector('job="radiance"', "radiance", instances))
    matcher = next(m for m in parsed.matchers.matchers if m.name == "instance")
    for name in instances:
        assert re.fullmatch(matcher.value, name) if len(instances) > 1 else matcher.value == name
    if len(instances) > 1:
        assert not re.fullmatch(matcher.value, "a-b:1") and not re.fullmatch(matcher.value, "axb:1")
