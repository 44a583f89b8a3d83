"""The fleet at scale: N endpoints x H hours in a real Prometheus and a real VictoriaMetrics, screened and examined.

For each size ``NxH`` (endpoints x hours): a varied fleet (:mod:`pdcensus.sim.fleet_vary`: a pool
of simulated runs of H hours plus a 30-minute margin, ``--pool-seeds`` per scenario; each endpoint
is one run with its own label, a time shift within the margin and gauge noise, its ground truth
kept; one pool per window length, so that a window is most of its run and the run's truth holds)
goes into each store: Prometheus 2.42 by an OpenMetrics file backfilled with ``promtool``,
VictoriaMetrics by ``/api/v1/import/prometheus``. Then ``pdcensus fleet --examine K --json`` runs
as a child process against the store; the bench reads its JSON (wall time, queries and bytes per
stage), its peak resident memory (``ru_maxrss`` of the CLI process, reported by a small wrapper)
and the store's own peak (``VmHWM``). Recall: the true top 10 are the endpoints with the 10
largest simulator truth losses (ties at the 10th value all count as top); recall is the share of
the 10 found among the examined endpoints (a near-tie variant counts every endpoint within
``NEAR_TIE`` of the 10th largest truth as top; the loss-weighted one asks what share of the true top
10's loss the examined set's 10 worst carry) (and, apart, among the screen's own top K without the
flagged ones, and in the final ranking's top 10). With several sizes, the screen's wall time is
fitted as ``a * endpoints^b * hours^c`` (least squares in logs) and ``b``, ``c`` printed.

Usage::

    .venv/bin/python bench/fleet.py --sizes 50x1,100x1,50x2 --pool-seeds 2
    .venv/bin/python bench/fleet.py --sizes 1000x2 --pool-seeds 4
    .venv/bin/python bench/fleet.py --sizes 1000x24 --pool-seeds 1 --screen-series-only
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pdcensus.series.model import Endpoint, Recording
from pdcensus.sim.fleet_recording import FleetMember
from pdcensus.sim.fleet_vary import simulate_pool, vary_fleet
from pdcensus.sim.run import EPOCH_SECONDS
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.prometheus_local import LocalPrometheus
from pdcensus.sources.victoria_local import LocalVictoriaMetrics

NEAR_TIE = 0.01  # one point of decoders' time: the near-tie recall's tolerance on the run-level truth
SCENARIOS = ("step-time-sharing", "eviction-tail", "preemption-stall", "healthy", "idle", "protected", "mixed",
             "self-made-prefill", "chunking-overhead", "noisy-scrapes", "upgrade")


def peak_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def run_fleet(url: str, start: float, end: float, examine: int, stride: str | None, screen_only: bool = False
              ) -> tuple[dict[str, Any], float, int]:
    """The CLI as a child: its JSON, wall seconds and peak RSS (KiB)."""
    argv = [sys.executable, "-m", "pdcensus", "fleet", "--prometheus", url, "--start", str(start), "--end", str(end),
            "--examine", str(examine), "--json", "--timeout", "600s"] + (["--stride", stride] if stride else []) + (
        ["--screen-only"] if screen_only else [])
    # A small wrapper starts the CLI and reports its peak RSS: a child forked from this (large) process
    # would count the pages it shared with us before exec in its high-water mark.
    wrapper = ("import resource, subprocess, sys\n"
               "code = subprocess.run(sys.argv[1:]).returncode\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
               "sys.exit(code)\n")
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.run([sys.executable, "-c", wrapper, *argv], stdout=out, stderr=err, check=False)
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if child.returncode not in (0, 3):
        raise SystemExit(f"fleet exited {child.returncode}: {errors[-2000:]}")
    return json.loads(text), wall, int(errors.strip().splitlines()[-1])


def recall(body: dict[str, Any], members: list[FleetMember], k: int) -> dict[str, Any]:
    loss = {m.instance: float(sum((m.truth.get("loss_share") or {}).values())) for m in members}
    tenth = sorted(loss.values(), reverse=True)[min(9, len(loss) - 1)]
    top = {i for i, v in loss.items() if v >= tenth}
    examined = {r["instance"] for r in body["ranking"] if r["examined"]}
    scored = sorted((r for r in body["screen"] if r["score"] is not None), key=lambda r: -r["score"])
    screen_top = {r["instance"] for r in scored[:k]}
    ranked_top = {r["instance"] for r in body["ranking"][:10]}
    # Endpoints made from one run share its truth, and runs of one scenario differ little: the loss-weighted
    # recall asks how much of the true top 10's loss the examined set's 10 worst (by truth) carry.
    best_examined = sorted((loss[i] for i in examined), reverse=True)[:10]
    best_all = sorted(loss.values(), reverse=True)[:10]
    weighted = sum(best_examined) / sum(best_all) if sum(best_all) > 0 else 1.0
    scenario = {m.instance: m.scenario for m in members}
    missed = sorted({scenario[i] for i in top - examined})
    # Near-ties: runs of one scenario differ by tenths of a point of run-level truth, far inside what any
    # census resolves; this variant counts as top every endpoint within NEAR_TIE of the 10th largest truth.
    near = {i for i, v in loss.items() if v >= tenth - NEAR_TIE}
    return {"true_top": len(top), "true_top_scenarios": sorted({scenario[i] for i in top}),
            "missed_scenarios": missed, "examined": len(examined),
            "recall_examined": min(10, len(top & examined)) / 10, "loss_weighted_recall": round(weighted, 3),
            "near_top": len(near), "recall_near_tie": min(10, len(near & examined)) / 10,
            "examined_scenarios": {sc: sum(scenario[i] == sc for i in examined) for sc in sorted(set(scenario.values()))},
            "recall_screen_top_k": min(10, len(top & screen_top)) / 10,
            "recall_final_top10": min(10, len(top & ranked_top)) / 10}


def measure(engine: str, url: str, server_pid: int, members: list[FleetMember], hours: float, examine: int,
            stride: str | None, screen_only: bool = False) -> dict[str, Any]:
    body, wall, rss = run_fleet(url, EPOCH_SECONDS, EPOCH_SECONDS + hours * 3600, examine, stride, screen_only)
    stages = body["stages"]
    return {"engine": engine, "stride": stride or "15s", "screen_only": screen_only, "wall_seconds": round(wall, 2),
            "stages": stages,
            "queries": sum(s["requests"] for s in stages.values()),
            "bytes": sum(s["bytes_received"] for s in stages.values()),
            "fleet_peak_rss_mib": round(rss / 1024, 1), "store_peak_rss_mib": round(peak_kib(server_pid) / 1024, 1),
            "not_screened": sum(1 for r in body["screen"] if r["error"]),
            "flagged": sum(1 for r in body["screen"] if r["flags"]), **recall(body, members, examine)}


def screen_series_only(recording: Recording) -> Recording:
    """The same fleet without histogram series (buckets, counts, sums): what the screen reads, and little else."""
    endpoints = []
    for e in recording.endpoints:
        keep = [i for i, k in enumerate(e.keys) if not k.name.endswith(("_bucket", "_count", "_sum"))]
        endpoints.append(Endpoint(e.job, e.instance, e.timestamps, [e.keys[i] for i in keep], e.values[:, keep],
                                  e.present[:, keep]))
    return Recording(families=recording.families, endpoints=endpoints, source=recording.source)


def one_size(pool: list[Any], instances: int, hours: float, engines: list[str], examine: int, work: Path,
             slim: bool = False, strides: tuple[str | None, ...] = (None,), screen_only: bool = False
             ) -> list[dict[str, Any]]:
    t0 = time.monotonic()
    recording, members = vary_fleet(pool, instances, duration_seconds=hours * 3600, seed=instances)
    if slim:
        recording = screen_series_only(recording)
    samples = int(sum(int(e.present.sum()) for e in recording.endpoints))
    base = {"instances": instances, "hours": hours, "samples": samples, "screen_series_only": slim,
            "vary_seconds": round(time.monotonic() - t0, 1)}
    out = []
    for engine in engines:
        where = work / f"{engine}-{instances}x{hours:g}"
        rows = [dict(base) for _ in strides]
        if engine == "prometheus":
            t0 = time.monotonic()
            om = where / "fleet.om"
            where.mkdir(parents=True)
            write_openmetrics(recording, om)
            load = time.monotonic() - t0
            prom = LocalPrometheus.backfilled(om, where / "prometheus")
            om.unlink()
            with prom:
                assert prom.process is not None
                for row, stride in zip(rows, strides):
                    row["load_seconds"] = round(load + prom.backfill_seconds, 1)
                    row.update(measure(engine, prom.url, prom.process.pid, members, hours, examine, stride, screen_only))
                    print(json.dumps(row), flush=True)
        else:
            with LocalVictoriaMetrics(where) as vm:
                vm.import_recording(recording)
                assert vm.process is not None
                for row, stride in zip(rows, strides):
                    row["load_seconds"] = round(vm.import_seconds, 1)
                    row.update(measure(engine, vm.url, vm.process.pid, members, hours, examine, stride, screen_only))
                    print(json.dumps(row), flush=True)
        shutil.rmtree(where, ignore_errors=True)
        out += rows
    return out


def fit(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """screen seconds ~ a * endpoints^b * hours^c per engine (least squares in logs)."""
    out = {}
    for engine in sorted({r["engine"] for r in rows}):
        mine = [r for r in rows if r["engine"] == engine and r["stride"] == rows[0]["stride"]]
        if len({r["instances"] for r in mine}) < 2 and len({r["hours"] for r in mine}) < 2:
            continue
        design = np.array([[1.0, np.log(r["instances"]), np.log(r["hours"])] for r in mine])
        y = np.log([r["stages"]["screen"]["seconds"] for r in mine])
        cols = [0] + [j for j, key in ((1, "instances"), (2, "hours")) if len({r[key] for r in mine}) > 1]
        coef, *_ = np.linalg.lstsq(design[:, cols], y, rcond=None)
        names = ["log_a"] + [("endpoints_exponent", "hours_exponent")[j - 1] for j in cols[1:]]
        out[engine] = {n: round(float(c), 2) for n, c in zip(names, coef)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50x1,100x1", help="comma-separated ENDPOINTSxHOURS")
    parser.add_argument("--engines", default="prometheus,victoria-metrics")
    parser.add_argument("--examine", type=int, default=20)
    parser.add_argument("--pool-seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None, help="also write every row and the fit as JSON here")
    parser.add_argument("--screen-series-only", action="store_true",
                        help="store no histogram series (the screen reads none; the census then has no TTFT/ITL)")
    parser.add_argument("--screen-only", action="store_true", help="pass --screen-only: examine nothing")
    parser.add_argument("--stride", default=None,
                        help="the screen's --stride (default: every scrape); comma-separated: each against the same store")
    parser.add_argument("--pool-cache", type=Path, default=None,
                        help="a directory for the pools (one pickle per window length): read if there, else written")
    args = parser.parse_args()
    sizes = [(int(n), float(h)) for n, h in (s.split("x") for s in args.sizes.split(","))]
    t0 = time.monotonic()
    pools: dict[float, list[Any]] = {}
    for hours in sorted({h for _, h in sizes}):
        cache = args.pool_cache / f"pool-{hours:g}h-{args.pool_seeds}seeds.pkl" if args.pool_cache else None
        t0 = time.monotonic()
        if cache is not None and cache.exists():
            pools[hours] = pickle.loads(cache.read_bytes())
        else:
            pools[hours] = simulate_pool(SCENARIOS, seeds=args.pool_seeds, duration_seconds=hours * 3600)
            if cache is not None:
                cache.write_bytes(pickle.dumps(pools[hours]))
        print(json.dumps({"pool_hours": hours, "pool_runs": len(pools[hours]),
                          "pool_seconds": round(time.monotonic() - t0, 1)}), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pdcensus-fleet-") as tmp:
        for instances, hours in sizes:
            rows += one_size(pools[hours], instances, hours, args.engines.split(","), args.examine, Path(tmp),
                             slim=args.screen_series_only, screen_only=args.screen_only,
                             strides=tuple(args.stride.split(",")) if args.stride else (None,))
    fitted = fit(rows)
    print(json.dumps({"fit_screen_seconds": fitted}), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps({"rows": rows, "fit": fitted}, indent=1))


if __name__ == "__main__":
    main()
