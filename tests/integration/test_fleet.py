"""`pdcensus fleet` on two real stores side by side: Prometheus 2.42 (backfilled with promtool) and VictoriaMetrics.

Eight endpoints, each a one-hour simulation under its own ``instance`` label: the six scenarios
of the fleet case (step-time sharing, eviction tail, preemption stall, healthy, idle, mixed), one
whose every scrape has ``up`` = 0 (no census can use it), and one that exports only the waiting
queue (no screen numbers can be made for it). Both stores get the same samples; every test runs
on each, and one compares them.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdcensus.errors import DataError, UsageError
from pdcensus.fleet import FleetResult, ScreenOptions, census_fleet
from pdcensus.fleet.rank import EXAMINED
from pdcensus.series.model import Endpoint, Recording
from pdcensus.sim.fleet_recording import FleetMember, simulate_fleet
from pdcensus.sim.run import EPOCH_SECONDS
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.victoria_local import LocalVictoriaMetrics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCENARIOS = ["step-time-sharing", "eviction-tail", "preemption-stall", "healthy", "idle", "mixed", "healthy",
             "healthy"]
BROKEN = 6  # every scrape says up = 0
QUEUE_ONLY = 7  # exports vllm:num_requests_waiting and nothing else
DURATION_SECONDS = 3600.0
START, END = EPOCH_SECONDS, EPOCH_SECONDS + DURATION_SECONDS
ENGINES = ("prometheus", "victoria-metrics")
SCORE_TOLERANCE = 0.05  # the screen's estimate may differ this much (absolute share) between the engines


def _fleet_recording() -> tuple[Recording, list[FleetMember]]:
    recording, members = simulate_fleet(SCENARIOS, duration_seconds=DURATION_SECONDS, seed=1)
    broken = recording.endpoints[BROKEN]
    up = [i for i, k in enumerate(broken.keys) if k.name == "up"]
    broken.values[:, up] = np.where(broken.present[:, up], 0.0, np.nan)
    q = recording.endpoints[QUEUE_ONLY]
    keep = [i for i, k in enumerate(q.keys) if k.name in ("vllm:num_requests_waiting", "up")]
    recording.endpoints[QUEUE_ONLY] = Endpoint(q.job, q.instance, q.timestamps, [q.keys[i] for i in keep],
                                               q.values[:, keep], q.present[:, keep])
    return recording, members


@pytest.fixture(scope="module")
def fleet(prometheus_server: Callable[[Path], str], tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[dict[str, str], list[FleetMember]]]:
    if shutil.which("victoria-metrics") is None:
        pytest.skip("victoria-metrics is not installed (Debian package 'victoria-metrics')")
    recording, members = _fleet_recording()
    path = tmp_path_factory.mktemp("fleet") / "fleet.om"
    write_openmetrics(recording, path)
    with LocalVictoriaMetrics(tmp_path_factory.mktemp("vm")) as vm:
        vm.import_recording(recording)
        yield {"prometheus": prometheus_server(path), "victoria-metrics": vm.url}, members


@pytest.fixture(scope="module")
def results(fleet: tuple[dict[str, str], list[FleetMember]]) -> dict[str, FleetResult]:
    urls, _ = fleet
    return {engine: census_fleet(url, start=START, end=END) for engine, url in urls.items()}


def _scenario(members: list[FleetMember]) -> dict[str, str]:
    return {m.instance: m.scenario for m in members}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_six_endpoint_case_ranks_eviction_tail_and_mixed_first(
    engine: str, results: dict[str, FleetResult], fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    scenario = _scenario(fleet[1])
    ranked = [scenario[r.instance] for r in results[engine].ranking]
    assert set(ranked[:2]) == {"eviction-tail", "mixed"}, ranked


@pytest.mark.parametrize("engine", ENGINES)
def test_the_ranking_is_the_census_total_loss_with_its_interval_and_ties(
    engine: str, results: dict[str, FleetResult],
) -> None:
    result = results[engine]
    reports = {e["endpoint"]["instance"]: e for e in result.to_dict()["endpoints"]}
    examined = [r for r in result.ranking if r.group == EXAMINED]
    assert len(examined) >= 5
    assert [r.loss_share for r in examined] == sorted((r.loss_share for r in examined), reverse=True)
    for above, row in zip(examined, examined[1:]):
        overlap = row.loss_interval[1] >= above.loss_interval[0] and above.loss_interval[1] >= row.loss_interval[0]
        assert row.tied_with_previous == overlap
    for row in examined:
        found = reports[row.instance]["verdict"]["found"]
        assert row.loss_share == pytest.approx(sum(f["loss_share"] for f in found), abs=1e-5)
        assert row.loss_interval[0] <= row.loss_share <= row.loss_interval[1]
        if found:
            assert row.principal == max(found, key=lambda f: f["loss_share"])["mechanism"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failed_endpoint_is_reported_last_with_its_reason_never_dropped(
    engine: str, results: dict[str, FleetResult], fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    result, members = results[engine], fleet[1]
    assert {r.instance for r in result.ranking} == {m.instance for m in members}
    tail = {r.instance: r for r in result.ranking[-2:]}
    assert set(tail) == {members[BROKEN].instance, members[QUEUE_ONLY].instance}
    assert "no good scrape" in (tail[members[BROKEN].instance].error or "")
    assert "no decode/prefill signal" in (tail[members[QUEUE_ONLY].instance].error or "")  # the census's reason
    screen = next(r for r in result.screen if r.instance == members[QUEUE_ONLY].instance)
    assert "no screen numbers" in (screen.error or "")
    assert not result.screened_all


@pytest.mark.parametrize("engine", ENGINES)
def test_only_the_flagged_endpoints_and_the_top_k_of_the_others_are_examined(
    engine: str, fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    result = census_fleet(fleet[0][engine], start=START, end=END, examine=1)
    scored = sorted((r for r in result.screen if math.isfinite(r.score) and not r.flags), key=lambda r: -r.score)
    expected = {scored[0].instance} | {r.instance for r in result.screen if r.flags}
    assert {o.instance for o in result.examined} == expected
    assert len(expected) < len(result.screen)
    assert all(r.mechanism == "screened" for r in result.ranking if r.instance not in expected)


def test_prometheus_and_victoria_metrics_give_the_same_screen_and_ranking(results: dict[str, FleetResult]) -> None:
    prom, vm = results["prometheus"], results["victoria-metrics"]
    assert [r.instance for r in prom.ranking] == [r.instance for r in vm.ranking]
    vm_rows = {r.instance: r for r in vm.screen}
    for row in prom.screen:
        other = vm_rows[row.instance]
        assert row.flags == other.flags, row.instance
        if math.isfinite(row.score):
            assert abs(row.score - other.score) <= SCORE_TOLERANCE, row.instance
        assert row.get("scrapes") == other.get("scrapes") or not (row.get("scrapes") > 0 or other.get("scrapes") > 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_long_window_cut_into_chunks_gives_the_same_sums(
    engine: str, results: dict[str, FleetResult], fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    chunked = census_fleet(fleet[0][engine], start=START, end=END, examine=0,
                           screen_options=ScreenOptions(max_points=60))  # 15 min chunks
    whole = {r.instance: r for r in results[engine].screen}
    for row in chunked.screen:
        if row.error is None:
            assert row.get("scrapes") == whole[row.instance].get("scrapes")
            assert row.get("running_all") == pytest.approx(whole[row.instance].get("running_all"), rel=1e-9, nan_ok=True)
            assert row.get("decode_busy") == pytest.approx(whole[row.instance].get("decode_busy"), rel=1e-9, nan_ok=True)


def test_a_subquery_victoria_metrics_refuses_is_asked_again_in_halves(
    fleet: tuple[dict[str, str], list[FleetMember]], results: dict[str, FleetResult], tmp_path: Path,
) -> None:
    recording, _ = _fleet_recording()
    with LocalVictoriaMetrics(tmp_path / "vm", extra_flags=["-search.maxPointsPerTimeseries=320"]) as vm:
        vm.import_recording(recording)
        result = census_fleet(vm.url, start=START, end=END, examine=0)
    assert result.to_dict()["stages"]["screen"]["requests"] > results["victoria-metrics"].to_dict()[
        "stages"]["screen"]["requests"]
    whole = {r.instance: r for r in results["victoria-metrics"].screen}
    for row in result.screen:
        if row.error is None:
            assert row.get("running_all") == pytest.approx(whole[row.instance].get("running_all"), rel=1e-9, nan_ok=True)


@pytest.mark.parametrize("engine", ENGINES)
def test_resume_examines_only_what_the_interrupted_run_left(
    engine: str, fleet: tuple[dict[str, str], list[FleetMember]], results: dict[str, FleetResult], tmp_path: Path,
) -> None:
    state = tmp_path / "state.json"
    census_fleet(fleet[0][engine], start=START, end=END, state_path=state)
    body = json.loads(state.read_text())
    kept = body["examined"][:2]
    body["examined"] = kept  # as if interrupted after two endpoints
    state.write_text(json.dumps(body))
    calls: list[tuple[str, int, int, str]] = []
    again = census_fleet(fleet[0][engine], start=START, end=END, state_path=state, resume=True,
                         progress=lambda *a: calls.append(a))
    assert again.resumed and not any(c[0] in ("discover", "screen") and c[1] > 0 and c[3] == "queries" for c in calls)
    examined_now = [c for c in calls if c[0] == "examine" and c[3]]
    assert len(examined_now) == len(results[engine].examined) - len(kept)
    def same(rows: tuple[Any, ...]) -> list[dict[str, Any]]:  # the batch selector in an error differs
        return [{**r.to_dict(), "error": r.error.rsplit(": ", 1)[-1] if r.error else None} for r in rows]

    assert same(again.ranking) == same(results[engine].ranking)
    with pytest.raises(UsageError, match="another run"):
        census_fleet(fleet[0][engine], start=START, end=END - 60, state_path=state, resume=True)


def test_the_cli_reports_each_stage_writes_the_page_and_exits_3_when_an_endpoint_was_not_screened(
    fleet: tuple[dict[str, str], list[FleetMember]], tmp_path: Path,
) -> None:
    page = tmp_path / "fleet.html"
    done = subprocess.run(
        [sys.executable, "-m", "pdcensus", "fleet", "--prometheus", fleet[0]["victoria-metrics"],
         "--start", str(START), "--end", str(END), "--examine", "3", "--json", "--html", str(page)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 3, done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    assert body["schema"] == "pdcensus/fleet/v2" and len(body["ranking"]) == len(SCENARIOS)
    assert {e["schema"] for e in body["endpoints"]} == {"pdcensus/census/v2"}
    for stage in ("discover", "screen", "examine"):
        assert f"\n{stage}: [" in "\n" + done.stderr
    assert "error: 1 endpoint(s) not screened" in done.stderr
    # no --step: the screen stepped at the scrape interval it read from the store (15 s here)
    assert body["step_seconds"] == 15.0 and "scrape interval 15 s" in done.stderr
    html = page.read_text()
    reports = sorted((tmp_path / "fleet-reports").glob("*.html"))
    assert len(reports) == sum(r["examined"] for r in body["ranking"]) and reports
    for report in reports:
        assert f'href="fleet-reports/{report.name}"' in html


@pytest.mark.parametrize(("selector", "error"), [
    pytest.param('{job="nobody"}', DataError, id="no-endpoint-matches"),
    pytest.param('{job=}', UsageError, id="malformed-selector"),
])
def test_a_selector_that_finds_nothing_or_does_not_parse_is_refused(
    fleet: tuple[dict[str, str], list[FleetMember]], selector: str, error: type[Exception],
) -> None:
    with pytest.raises(error, match="nobody|selector"):
        census_fleet(fleet[0]["prometheus"], selector=selector, start=START, end=END)


def test_screen_only_examines_nothing_and_ranks_every_endpoint_by_the_screen(
    fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    result = census_fleet(fleet[0]["victoria-metrics"], start=START, end=END, screen_only=True)
    assert result.examined == () and result.to_dict()["stages"]["examine"]["requests"] == 0
    scores = [r.screen_score for r in result.ranking if math.isfinite(r.screen_score)]
    assert scores == sorted(scores, reverse=True) and {r.mechanism for r in result.ranking} <= {"screened", "error"}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_threshold_said_once_selects_the_same_scrapes_as_the_plain_two_sided_condition(
    engine: str, fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    """``(thr >= now) < then`` (one threshold) sums exactly what ``now <= thr and then > thr`` sums, on each store."""
    import httpx

    from pdcensus.fleet.screen_queries import idle_threshold, signal_exprs
    from pdcensus.series.profiles import get_profile

    profile = get_profile("radiance-1.8")
    s, before = signal_exprs(profile, ""), signal_exprs(profile, "", offset_seconds=300.0)
    thr = "(" + idle_threshold(s["prefill"], window_seconds=END - START, window_end=END, step_seconds=15.0) + ")"
    on = "on (job, instance)"
    rng = "[59m59s999ms:15s]"
    plain = f"(({s['prefill']} <= {on} {thr}) and {on} ({before['prefill']} > {on} {thr}))"
    once = f"(({thr} >= {on} {s['prefill']}) < {on} {before['prefill']})"
    sums = {}
    for name, cond in (("plain", plain), ("once", once)):
        expr = f"sum_over_time(({s['running']} and {on} {cond}){rng})"
        body = httpx.post(f"{fleet[0][engine]}/api/v1/query", data={"query": expr, "time": f"{END:.3f}"}).json()
        sums[name] = {r["metric"]["instance"]: float(r["value"][1]) for r in body["data"]["result"]}
    assert sums["plain"] and sums["once"] == sums["plain"]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_screen_alone_puts_eviction_tail_and_mixed_first_as_the_census_does(
    engine: str, results: dict[str, FleetResult], fleet: tuple[dict[str, str], list[FleetMember]],
) -> None:
    """The screen estimates the census's own terms: a preemption stall no longer reads above an eviction tail."""
    scenario = _scenario(fleet[1])
    scored = sorted((r for r in results[engine].screen if math.isfinite(r.score)), key=lambda r: -r.score)
    assert {scenario[r.instance] for r in scored[:2]} == {"eviction-tail", "mixed"}, [
        (scenario[r.instance], round(r.score, 3)) for r in scored]
    for r in scored:  # the eviction tail's loss is read as eviction (the ledger's residency), not as sharing
        if scenario[r.instance] == "eviction-tail":
            assert r.eviction_term > max(r.sharing_term, r.preemption_share if math.isfinite(r.preemption_share) else 0)
