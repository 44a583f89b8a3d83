"""The fleet screen on real vLLM recordings: each run one endpoint, in a real Prometheus and a real VictoriaMetrics.

The runs in ``../shared/realdata/vllm-inferencex`` (vLLM 0.19.1 / DeepSeek-R1 and vLLM 0.15.0 /
Llama-3.3-70B under benchmark load, ``/metrics`` polled once a second) were recorded on different
days and for 6-71 minutes each. To make them one fleet, each run gets its own ``instance`` label
(``<model>-<run>:8888``, job ``vllm``; the DeepSeek runs all said ``b200-dgxc-slurm:8888``) and
is **shifted in time so that its last poll lands on a common window end** ``END``; each run keeps
its own spacing (the poller's 1.01 s median and its real stalls). Ends are aligned, not starts, as a
fleet looks when a user asks "the last hour until now": every endpoint is present up to the
window's end, so Prometheus's 5-minute lookback never carries a finished run's last sample on past
its end inside the window. The window is ``[END - longest run - 1 s, END]``: it covers every run
whole, and the shorter runs start inside it.

Each store gets the same samples (Prometheus 2.42 backfilled with ``promtool`` from one
OpenMetrics file, VictoriaMetrics 1.79.5 through ``/api/v1/import/prometheus``), and the real CLI
runs against each: ``pdcensus fleet --json --step 1s --examine K`` (K = the number of runs, so
every endpoint is examined). The reference is ``pdcensus census FILE --json`` on each original
file. Printed per endpoint: the screen's score and flags on each store, the examined census's
verdict and total lost share on each store, the file's; then, per store, whether the store's census
is the file's, the engines' largest screen-score differences, the census's top 1/3/5 found in the
screen's own top 1/3/5, and the Spearman rank correlation of the screen's score against the file
census's loss (over all runs and within each model)::

    python bench/fleet_real_vllm.py [--root ../shared/realdata/vllm-inferencex] [--runs N] [--step 1s] [--markdown]

The test ``tests/fleet/test_fleet_real_vllm.py`` imports :func:`real_fleet` and :func:`file_census`
from here.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdcensus.series.model import Endpoint, Recording
from pdcensus.sim.fleet_recording import relabel
from pdcensus.sources.load import load_source

ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "vllm-inferencex"
END = 1_777_000_000.0  # the common window end (2026-04-24 03:06:40 UTC, after every run; a store refuses future samples)
JOB = "vllm"
STEP = "1s"  # the poll interval: the screen's inner windows (tail, lags, idle threshold) step by it


@dataclass(frozen=True)
class Member:
    """One run of the fleet: its file, its instance label and the shift applied to its clock."""

    path: Path
    instance: str
    shift_seconds: float
    first: float  # shifted first and last poll
    last: float


def run_files(root: Path = ROOT) -> list[Path]:
    return sorted(root.glob("*/*.om.gz"))


def instance_of(path: Path) -> str:
    """``deepseek-tp4_bs24_offloadon_s_4:8888`` for ``deepseek-r1-vllm0.19/tp4_bs24_offloadon_s_4.om.gz``."""
    return f"{path.parent.name.split('-')[0]}-{path.name.removesuffix('.om.gz')}:8888"


def _shifted(endpoint: Endpoint, shift: float) -> Endpoint:
    return Endpoint(endpoint.job, endpoint.instance, endpoint.timestamps + shift, list(endpoint.keys),
                    endpoint.values, endpoint.present)


def real_fleet(paths: list[Path], end: float = END) -> tuple[Recording, list[Member], float, float]:
    """The runs as one fleet ending at ``end`` (see the module): recording, members, window start and end."""
    endpoints, members, families = [], [], {}
    for path in paths:
        rec = load_source(path)
        if len(rec.endpoints) != 1:
            raise ValueError(f"{path}: expected one endpoint, found {len(rec.endpoints)}")
        ep = rec.endpoints[0]
        shift = round(end - float(ep.timestamps[-1]), 3)  # whole milliseconds: the stores keep ms
        moved = relabel(_shifted(ep, shift), instance_of(path), job=JOB)
        endpoints.append(moved)
        families.update(rec.families)
        members.append(Member(path, moved.instance, shift, float(moved.timestamps[0]), float(moved.timestamps[-1])))
    start = math.floor(min(m.first for m in members)) - 1.0
    return Recording(families=families, endpoints=endpoints, source="real vLLM fleet"), members, start, end


def file_census(path: Path) -> dict[str, Any]:
    """``pdcensus census FILE --json`` on the original file (the real CLI, its own clock)."""
    done = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(path), "--json"],
                          capture_output=True, text=True, timeout=600, check=True)
    body: dict[str, Any] = json.loads(done.stdout)
    return body


def total_loss(verdict: dict[str, Any]) -> float:
    """The census's total lost decode share: the sum over found mechanisms (as the fleet ranks)."""
    return float(sum(f["loss_share"] for f in verdict["found"] if f["loss_share"] is not None))


def fleet_cli(url: str, start: float, end: float, examine: int, *, extra: tuple[str, ...] = (),
              step: str = STEP) -> tuple[int, dict[str, Any], str]:
    """``pdcensus fleet --json`` against ``url``: exit status, the JSON and stderr."""
    argv = [sys.executable, "-m", "pdcensus", "fleet", "--prometheus", url, "--selector", f'{{job="{JOB}"}}',
            "--start", f"{start:.3f}", "--end", f"{end:.3f}", "--step", step, "--examine", str(examine),
            "--json", *extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties) of the finite pairs."""
    import numpy as np

    pairs = [(x, y) for x, y in zip(xs, ys) if math.isfinite(x) and math.isfinite(y)]
    if len(pairs) < 3:
        return math.nan

    def ranks(values: list[float]) -> np.ndarray:
        v = np.asarray(values)
        order = np.argsort(v, kind="stable")
        r = np.empty(len(v))
        r[order] = np.arange(1, len(v) + 1)
        for value in np.unique(v):  # ties share their mean rank
            r[v == value] = r[v == value].mean()
        return r

    a, b = ranks([p[0] for p in pairs]), ranks([p[1] for p in pairs])
    if a.std() == 0 or b.std() == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _stores(recording: Recording, om: Path, work: Path) -> tuple[dict[str, str], list[Any], dict[str, float]]:
    from pdcensus.sources.openmetrics_writer import write_openmetrics
    from pdcensus.sources.prometheus_local import LocalPrometheus
    from pdcensus.sources.victoria_local import LocalVictoriaMetrics

    load: dict[str, float] = {}
    t0 = time.monotonic()
    write_openmetrics(recording, om)
    prom = LocalPrometheus.backfilled(om, work / "prometheus").start()
    load["prometheus"] = time.monotonic() - t0
    vm = LocalVictoriaMetrics(work / "vm").start()
    vm.import_recording(recording)
    load["victoria-metrics"] = vm.import_seconds
    return {"prometheus": prom.url, "victoria-metrics": vm.url}, [prom, vm], load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--runs", type=int, default=0, help="only the first N runs (0: all)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--step", default=STEP, help="the screen's --step (default 1s, the poll interval)")
    args = parser.parse_args()
    paths = run_files(args.root)
    if args.runs:
        paths = paths[:args.runs]
    recording, members, start, end = real_fleet(paths)
    files = {m.instance: file_census(m.path) for m in members}
    results: dict[str, dict[str, Any]] = {}
    wall: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        urls, servers, load = _stores(recording, Path(tmp) / "fleet.om", Path(tmp))
        try:
            for engine, url in urls.items():
                t0 = time.monotonic()
                rc, body, err = fleet_cli(url, start, end, len(members), step=args.step)
                wall[engine] = time.monotonic() - t0
                if not body:
                    raise SystemExit(f"{engine}: pdcensus fleet exited {rc}: {err[-2000:]}")
                results[engine] = body
                print(f"{engine}: exit {rc}, load {load[engine]:.1f} s, fleet {wall[engine]:.1f} s, "
                      f"stages {body['stages']}", file=sys.stderr)
        finally:
            for server in servers:
                server.stop()
    _print(members, files, results, start, end, markdown=args.markdown, step=args.step)


def _print(members: list[Member], files: dict[str, dict[str, Any]], results: dict[str, dict[str, Any]],
           start: float, end: float, *, markdown: bool, step: str = STEP) -> None:
    engines = list(results)
    screen = {e: {r["instance"]: r for r in results[e]["screen"]} for e in engines}
    ranked = {e: {r["instance"]: r for r in results[e]["ranking"]} for e in engines}
    head = ["run", "polls window s", "file: verdict", "file: lost"]
    for e in engines:
        short = "prom" if e == "prometheus" else "vm"
        head += [f"{short}: screen", f"{short}: flags", f"{short}: census", f"{short}: lost", f"{short}: rank"]
    rows = []
    for m in members:
        v = files[m.instance]["verdict"]
        row = [m.instance.removesuffix(":8888"), f"{m.last - m.first:.0f}",
               f"{v['mechanism']} {v['confidence']:.2f}", f"{total_loss(v):.3f}"]
        for e in engines:
            s, r = screen[e].get(m.instance, {}), ranked[e].get(m.instance, {})
            score = s.get("score")
            row += ["-" if score is None else f"{score:.3f}", ",".join(s.get("flags", [])) or "-",
                    str(r.get("mechanism", "-")), "-" if r.get("loss_share") is None else f"{r['loss_share']:.3f}",
                    str(r.get("rank", "-"))]
        rows.append(row)
    sep = " | " if markdown else "  "
    print(("| " if markdown else "") + sep.join(head) + (" |" if markdown else ""))
    if markdown:
        print("|" + "---|" * len(head))
    for row in rows:
        print(("| " if markdown else "") + sep.join(row) + (" |" if markdown else ""))
    loss = [total_loss(files[m.instance]["verdict"]) for m in members]
    for e in engines:
        store = {r["endpoint"]["instance"]: r["verdict"] for r in results[e]["endpoints"]}
        same = sum(store[i]["mechanism"] == files[i]["verdict"]["mechanism"] for i in store)
        gap = max((abs(total_loss(store[i]) - total_loss(files[i]["verdict"])) for i in store), default=math.nan)
        print(f"{e}: store census = file census (verdict) on {same} of {len(members)} runs "
              f"({len(store)} examined); largest loss difference {gap:.4f}")
    if len(engines) == 2:
        a, b = (screen[e] for e in engines)
        diffs = {i: abs(a[i]["score"] - b[i]["score"]) for i in a
                 if a[i].get("score") is not None and b[i].get("score") is not None}
        worst = sorted(diffs.items(), key=lambda kv: -kv[1])[:4]
        print("screen score, |prometheus - victoria-metrics|: largest " +
              ", ".join(f"{k.removesuffix(':8888')} {v:.4f}" for k, v in worst))
    print(f"\nwindow {start:.0f}-{end:.0f} ({end - start:.0f} s), {len(members)} runs, step {step}")
    for e in engines:
        score = [screen[e][m.instance]["score"] if screen[e][m.instance]["score"] is not None else math.nan
                 for m in members]
        rho = spearman(score, loss)
        n = sum(1 for x in score if math.isfinite(x))
        models = sorted({m.path.parent.name for m in members})
        within = {name: spearman([x for x, m in zip(score, members) if m.path.parent.name == name],
                                 [y for y, m in zip(loss, members) if m.path.parent.name == name]) for name in models}
        by_loss = sorted(range(len(members)), key=lambda i: -loss[i])
        by_score = sorted(range(len(members)), key=lambda i: -(score[i] if math.isfinite(score[i]) else -1.0))
        found = [len(set(by_loss[:k]) & set(by_score[:k])) for k in (1, 3, 5)]
        print(f"{e}: the census's top 1 / 3 / 5 in the screen's own top 1 / 3 / 5 (flags aside): "
              + " / ".join(str(x) for x in found))
        print(f"{e}: Spearman within each model: " + ", ".join(f"{k} {v:.2f}" for k, v in within.items()))
        print(f"{e}: Spearman(screen score, file census loss) = {rho:.2f} over {n} scored runs; "
              f"queries {results[e]['stages']['screen']['requests']}, screen {results[e]['stages']['screen']['seconds']} s, "
              f"examine {results[e]['stages']['examine']['seconds']} s")


if __name__ == "__main__":
    main()
