"""`pdcensus fleet` on real vLLM recordings, in a real Prometheus 2.42 and a real VictoriaMetrics 1.79.5.

Real vLLM servers under benchmark load (``../shared/realdata/vllm-inferencex``: vLLM 0.19.1 /
DeepSeek-R1 and vLLM 0.15.0 / Llama-3.3-70B, ``/metrics`` polled once a second), each run one
endpoint under its own ``instance`` label, shifted so that every run ends at one window end
(``bench/fleet_real_vllm.py`` builds the fleet; ``docs/fleet.md`` says why ends are aligned).
The real CLI runs against each store (Prometheus with ``--step 1s``, VictoriaMetrics with the
default ``--step auto``, which must read the same 1 s from the store) and ``--examine`` the number of runs, so
every endpoint gets the full census from the store's raw samples. The reference is
``pdcensus census FILE --json`` on each original file: nothing expected is written here.

A subset of the 15 runs (7) keeps the test under a minute on two cores: both models, runs with and
without preemptions, the two runs with the longest poller stalls (37 s and 138 s), the shortest
run (6.5 min: no 2-14 min tail fits) and runs the census calls ``none``; ``python
bench/fleet_real_vllm.py`` runs all 15 (BENCHMARKS.md).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pdcensus.series.profiles import Signal, get_profile
from pdcensus.sources.load import load_source
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.prometheus_local import LocalPrometheus
from pdcensus.sources.victoria_local import LocalVictoriaMetrics
from bench_modules import load_bench

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO.parent / "shared" / "realdata" / "vllm-inferencex"
SUBSET = ("deepseek-r1-vllm0.19/tp4_bs2_offloadoff_s_2", "deepseek-r1-vllm0.19/tp4_bs64_offloadoff_s_5",
          "deepseek-r1-vllm0.19/tp8_bs512_offloadoff_s_8", "deepseek-r1-vllm0.19/tp8_bs64_offloadon_s_3",
          "llama70b-vllm0.15/tp1_bs128_offloadoff", "llama70b-vllm0.15/tp4_bs32_offloadoff",
          "llama70b-vllm0.15/tp4_bs64_offloadoff")
ENGINES = ("prometheus", "victoria-metrics")
LOSS_TOLERANCE = 0.001  # store census vs file census, absolute share (the shift moves timestamps by whole ms)
SCORE_TOLERANCE = 0.01  # the screen's score between the engines (measured <= 0.004 on all 15 runs: poller stalls)

pytestmark = [
    pytest.mark.skipif(not ROOT.exists(), reason="../shared/realdata/vllm-inferencex not present"),
    pytest.mark.skipif(any(shutil.which(b) is None for b in ("promtool", "prometheus", "victoria-metrics")),
                       reason="needs Debian's prometheus, promtool and victoria-metrics"),
    pytest.mark.integration, pytest.mark.slow,
]


def _bench() -> ModuleType:
    return load_bench("fleet_real_vllm")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    bench = _bench()
    paths = [ROOT / f"{run}.om.gz" for run in SUBSET]
    recording, members, start, end = bench.real_fleet(paths)
    work = tmp_path_factory.mktemp("real-fleet")
    om = work / "fleet.om"
    write_openmetrics(recording, om)
    with ThreadPoolExecutor(2) as pool:
        files = dict(zip((m.instance for m in members), pool.map(bench.file_census, paths)))
    with LocalPrometheus.backfilled(om, work / "prometheus") as prom, LocalVictoriaMetrics(work / "vm") as vm:
        vm.import_recording(recording)
        # Prometheus with --step 1s said, VictoriaMetrics with the default (auto: read from the store)
        runs = {engine: bench.fleet_cli(url, start, end, len(members), step=step)
                for engine, url, step in (("prometheus", prom.url, "1s"), ("victoria-metrics", vm.url, "auto"))}
    yield {"members": members, "files": files, "runs": runs, "start": start, "end": end, "recording": recording}


def test_each_run_is_one_endpoint_ending_at_the_window_end_with_its_own_spacing(fleet: dict[str, Any]) -> None:
    members, recording = fleet["members"], fleet["recording"]
    assert len({m.instance for m in members}) == len(members) == len(SUBSET)
    for m, moved in zip(members, recording.endpoints):
        original = load_source(m.path).endpoints[0]
        assert moved.instance == m.instance
        assert all(k.label("instance") == m.instance for k in moved.keys)
        assert moved.timestamps[-1] == pytest.approx(fleet["end"], abs=1e-3)
        assert fleet["start"] < moved.timestamps[0]
        np.testing.assert_allclose(np.diff(moved.timestamps), np.diff(original.timestamps), atol=2e-6)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_endpoint_is_screened_and_examined_none_dropped(engine: str, fleet: dict[str, Any]) -> None:
    code, body, stderr = fleet["runs"][engine]
    instances = {m.instance for m in fleet["members"]}
    assert code == 0, stderr[-2000:]  # 0: every endpoint screened
    assert sorted(r["instance"] for r in body["ranking"]) == sorted(instances)
    assert sorted(r["instance"] for r in body["screen"]) == sorted(instances)
    for row in body["screen"]:
        assert row["profile"] == "vllm-v1" and row["error"] is None and row["sums"]["scrapes"] > 0
    assert {e["endpoint"]["instance"] for e in body["endpoints"]} == instances
    assert all(r["examined"] and r["error"] is None for r in body["ranking"])


@pytest.mark.parametrize("engine", ENGINES)
def test_the_store_census_is_the_file_census(engine: str, fleet: dict[str, Any]) -> None:
    bench = _bench()
    _, body, _ = fleet["runs"][engine]
    ranked = {r["instance"]: r for r in body["ranking"]}
    for report in body["endpoints"]:
        instance = report["endpoint"]["instance"]
        mine, theirs = report["verdict"], fleet["files"][instance]["verdict"]
        assert mine["mechanism"] == theirs["mechanism"], instance
        assert mine["confidence"] == pytest.approx(theirs["confidence"], abs=0.01), instance
        assert [f["mechanism"] for f in mine["found"]] == [f["mechanism"] for f in theirs["found"]], instance
        assert bench.total_loss(mine) == pytest.approx(bench.total_loss(theirs), abs=LOSS_TOLERANCE), instance
        assert ranked[instance]["loss_share"] == pytest.approx(bench.total_loss(mine), abs=1e-5)


def test_the_default_step_is_the_scrape_interval_read_from_the_store(fleet: dict[str, Any]) -> None:
    # 1 s polls: the step the screen used, told on stderr, is the poll interval the user would have had to pass
    code, body, stderr = fleet["runs"]["victoria-metrics"]
    assert code == 0 and body["step_seconds"] == 1.0 and fleet["runs"]["prometheus"][1]["step_seconds"] == 1.0
    assert "scrape interval 1 s (median of 7 endpoint(s)" in stderr


def test_prometheus_and_victoria_metrics_rank_and_screen_alike(fleet: dict[str, Any]) -> None:
    prom, vm = (fleet["runs"][e][1] for e in ENGINES)
    assert [r["instance"] for r in prom["ranking"]] == [r["instance"] for r in vm["ranking"]]
    vm_rows = {r["instance"]: r for r in vm["screen"]}
    for row in prom["screen"]:
        other = vm_rows[row["instance"]]
        assert row["flags"] == other["flags"], row["instance"]
        assert row["score"] is not None and other["score"] is not None
        assert abs(row["score"] - other["score"]) <= SCORE_TOLERANCE, row["instance"]


@pytest.mark.parametrize("engine", ENGINES)
def test_vllm_preemptions_are_flagged_unweighed_exactly_where_the_counter_moved(
    engine: str, fleet: dict[str, Any],
) -> None:
    """vLLM exports no preempted depth: the screen cannot weigh a preemption, so it sends the endpoint on."""
    assert get_profile("vllm-v1").name_of(Signal.PREEMPTED_DEPTH) is None
    _, body, _ = fleet["runs"][engine]
    screen = {r["instance"]: r for r in body["screen"]}
    for m, endpoint in zip(fleet["members"], fleet["recording"].endpoints):
        col = [i for i, k in enumerate(endpoint.keys) if k.name == "vllm:num_preemptions_total"]
        counter = endpoint.values[endpoint.present[:, col[0]], col[0]]
        moved = bool(np.any(np.diff(counter) > 0))
        row = screen[m.instance]
        assert ("preemptions-unweighed" in row["flags"]) == moved, m.instance
        assert row["preemption_share"] is None
        assert row["phase_ratio"] is None and row["inflation_loss"] is None  # no step ledger on vLLM
        if moved:
            assert row["preemptions"] == pytest.approx(float(np.sum(np.clip(np.diff(counter), 0, None))), rel=0.05)
        assert math.isfinite(row["score"])  # every run had an idle baseline
