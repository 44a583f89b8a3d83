"""`census --prometheus` and `fleet` without --selector find the engine endpoints a real Prometheus holds.

One store (Debian's Prometheus, backfilled with promtool) holds a radiance-named endpoint, a
vLLM-named one under a job called neither, and a node exporter's target with only ``up`` and a
load gauge. Without --selector the census takes both engines (each under its own profile), names
them on stderr and names the node target as skipped; a --selector still narrows; a window with
nothing in it is exit 3 with one line; the fleet's default takes both engines too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdcensus.series.model import Endpoint, Family, MetricType, Recording, SeriesKey, normalize_labels
from pdcensus.sim import simulate
from pdcensus.sim.fleet_recording import relabel
from pdcensus.sources.openmetrics_writer import write_openmetrics

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RADIANCE = ("radiance", "10.0.0.1:7770")
VLLM = ("serving-prod", "10.0.0.2:8000")  # a job name that says nothing about the engine
NODE = ("node", "10.0.0.3:9100")
DURATION_SECONDS = 3600.0


def _node(like: Endpoint) -> Endpoint:
    """A non-engine target scraped alongside: ``up`` and a load gauge, nothing an engine exports."""
    job, instance = NODE
    keys = [SeriesKey(name, normalize_labels({"job": job, "instance": instance})) for name in ("up", "node_load1")]
    n = like.timestamps.size
    values = np.column_stack([np.ones(n), np.linspace(0.5, 2.0, n)])
    return Endpoint(job, instance, like.timestamps, keys, values, np.ones((n, 2), dtype=bool))


@pytest.fixture(scope="module")
def store(prometheus_server: Callable[[Path], str], tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[str, float, float]:
    radiance = simulate("step-time-sharing", duration_seconds=DURATION_SECONDS, seed=1)
    vllm = simulate("step-time-sharing", duration_seconds=DURATION_SECONDS, seed=2, profile="vllm")
    endpoints = [relabel(radiance.recording.endpoints[0], RADIANCE[1], RADIANCE[0]),
                 relabel(vllm.recording.endpoints[0], VLLM[1], VLLM[0])]
    endpoints.append(_node(endpoints[0]))
    families = {**radiance.recording.families, **vllm.recording.families,
                "node_load1": Family("node_load1", MetricType.GAUGE, "load")}
    path = tmp_path_factory.mktemp("discovery") / "store.om"
    write_openmetrics(Recording(families=families, endpoints=endpoints, source="store"), path)
    t0 = float(endpoints[0].timestamps[0])
    return prometheus_server(path), t0, t0 + DURATION_SECONDS


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=600,
                          check=False, env={**os.environ, "COLUMNS": "200"})


def _reports(stdout: str) -> list[dict[str, Any]]:
    data = json.loads(stdout)
    return list(data["endpoints"]) if "endpoints" in data else [data]


def test_census_without_a_selector_takes_every_engine_endpoint_and_says_which_on_stderr(
        store: tuple[str, float, float]) -> None:
    url, t0, t1 = store
    done = _cli("census", "--prometheus", url, "--start", str(t0), "--end", str(t1), "--json")
    assert done.returncode == 0, done.stderr
    got = {(r["endpoint"]["job"], r["endpoint"]["instance"]): r["profile"]["name"] for r in _reports(done.stdout)}
    assert got == {RADIANCE: "radiance-1.8", VLLM: "vllm-v1"}
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("census: no --selector")]
    assert "took 2 engine endpoint(s)" in line
    assert f"{RADIANCE[0]}/{RADIANCE[1]} (radiance-1.8)" in line and f"{VLLM[0]}/{VLLM[1]} (vllm-v1)" in line
    assert f"skipped 1: {NODE[0]}/{NODE[1]} (no engine metrics)" in line


def test_a_selector_still_narrows_the_census_to_the_endpoints_it_names(store: tuple[str, float, float]) -> None:
    url, t0, t1 = store
    done = _cli("census", "--prometheus", url, "--selector", f'{{job="{VLLM[0]}"}}', "--start", str(t0),
                "--end", str(t1), "--json")
    assert done.returncode == 0, done.stderr
    assert [(r["endpoint"]["job"], r["profile"]["name"]) for r in _reports(done.stdout)] == [(VLLM[0], "vllm-v1")]
    assert "no --selector" not in done.stderr


def test_a_window_where_the_store_holds_no_engine_endpoint_is_exit_3_in_one_line(
        store: tuple[str, float, float]) -> None:
    url, t0, _ = store
    done = _cli("census", "--prometheus", url, "--start", str(t0 - 7200), "--end", str(t0 - 3600))
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "no engine endpoint" in lines[0]


def test_fleet_without_a_selector_screens_both_engines_and_says_so(store: tuple[str, float, float]) -> None:
    url, t0, t1 = store
    done = _cli("fleet", "--prometheus", url, "--start", str(t0), "--end", str(t1), "--screen-only", "--json")
    assert done.returncode == 0, done.stderr
    ranked = {(r["job"], r["instance"]) for r in json.loads(done.stdout)["ranking"]}
    assert ranked == {RADIANCE, VLLM}
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("fleet: no --selector")]
    assert "took 2 endpoint(s)" in line and "radiance-1.8: 1" in line and "vllm-v1: 1" in line
