"""`pdcensus query --prometheus`: raw samples pulled from a real Prometheus, evaluated by us,
agree with that Prometheus's own answer (2.x rules: the Debian package is 2.42)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from pdcensus.series.model import Family, MetricType, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.sources.openmetrics_writer import write_openmetrics

pytestmark = pytest.mark.integration

T0 = 1_793_491_200.0  # 2026-11-01T00:00:00Z


def _recording(path: Path) -> None:
    b = RecordingBuilder("remote")
    b.add_family(Family("req_total", MetricType.COUNTER, "requests"))
    for inst, rate in (("a:1", 2.0), ("b:2", 5.0)):
        labels = normalize_labels({"job": "radiance", "instance": inst})
        value = 0.0
        for i in range(240):
            t = T0 + 15 * i
            b.add(SeriesKey("up", labels), t, 1.0)
            value = 3.0 if i == 120 else value + rate * 15  # a counter reset half-way
            b.add(SeriesKey("req_total", labels), t, value)
    write_openmetrics(b.build(), path)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=120)


def test_query_through_prometheus_matches_its_own_answer(
    tmp_path: Path, prometheus_server: Callable[[Path], str]
) -> None:
    om = tmp_path / "r.om"
    _recording(om)
    url = prometheus_server(om)
    expr = "sum by (instance) (rate(req_total[5m]))"
    start, end = T0 + 600, T0 + 3000
    ours = _cli("query", "--prometheus", url, expr, "--start", str(start), "--end", str(end), "--step", "60s",
                "--semantics", "2")
    assert ours.returncode == 0, ours.stderr
    theirs = httpx.get(f"{url}/api/v1/query_range",
                       params={"query": expr, "start": start, "end": end, "step": "60"}).json()
    got = {r["metric"]["instance"]: r["values"] for r in json.loads(ours.stdout)["data"]["result"]}
    want = {r["metric"]["instance"]: r["values"] for r in theirs["data"]["result"]}
    assert got.keys() == want.keys() == {"a:1", "b:2"}
    for inst in want:
        assert [t for t, _ in got[inst]] == [t for t, _ in want[inst]]
        for (_, g), (_, w) in zip(got[inst], want[inst]):
            assert math.isclose(float(g), float(w), rel_tol=1e-9), (inst, g, w)


def test_query_against_an_unreachable_server_exits_4_with_one_line() -> None:
    proc = _cli("query", "--prometheus", "http://127.0.0.1:9", "up", "--time", str(T0), "--timeout", "2s")
    assert proc.returncode == 4
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:")


def test_census_through_prometheus_gives_the_simulators_verdict(
    tmp_path: Path, prometheus_server: Callable[[Path], str]
) -> None:
    from pdcensus.sim import simulate, write_sim_dir

    result = simulate("step-time-sharing", duration_seconds=2 * 3600, seed=3)
    out = write_sim_dir(result, tmp_path / "sim")
    url = prometheus_server(Path(out) / "metrics.om")
    t0 = float(result.recording.endpoints[0].timestamps[0])
    t1 = float(result.recording.endpoints[0].timestamps[-1])
    proc = _cli("census", "--prometheus", url, "--selector", '{job="radiance"}', "--start", str(t0),
                "--end", str(t1), "--json", "--evidence", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"]["mechanism"] == result.truth["mechanism"] == "step-time-sharing"
    assert report["profile"]["name"] == "radiance-1.8"
    assert report["ledger"]["available"] is True
    # the advice cites the side channels it read, and names the decoder dial
    assert report["side_evidence"]["argv"].startswith("radiance")
    assert any(a["knob"] == "--prefill-interleave" for a in report["advice"])
