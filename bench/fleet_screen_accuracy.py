"""How well the fleet screen's estimate follows the census and the simulator's truth, per mechanism.

The fleet's examined set is chosen from the screen's estimate (:mod:`pdcensus.fleet.screen_model`),
so a screen biased by mechanism leaves a whole mechanism's worst endpoints out of K. This bench
takes the pool of simulated runs (11 scenarios x 3 seeds, ``pdcensus.sim.fleet_vary``), makes a
fleet with each run once, imports it into one real VictoriaMetrics on 127.0.0.1, runs the screen
(the library call behind ``pdcensus fleet --screen-only``), and the census of each run from the
same samples (``census_endpoint`` on the varied recording). It prints, per run: scenario, the
truth's loss per mechanism, the screen's score and its terms, the census's loss per mechanism;
per scenario the screen's bias against the truth and against the census; and the Spearman rank
correlation of the screen's score with the truth's total (all runs, and within each scenario).

Usage::

    .venv/bin/python bench/fleet_screen_accuracy.py --out /tmp/screen_accuracy.json
    .venv/bin/python bench/fleet_screen_accuracy.py --profile vllm --seeds 1   # no step ledger
"""

from __future__ import annotations

import argparse
import json
import pickle
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from pdcensus.census.run import census_endpoint
from pdcensus.errors import CensusError
from pdcensus.fleet.run import census_fleet
from pdcensus.fleet.screen_model import ScreenRow
from pdcensus.sim.fleet_vary import PoolRun, simulate_pool, vary_fleet
from pdcensus.sim.run import EPOCH_SECONDS, simulate
from pdcensus.sources.victoria_local import LocalVictoriaMetrics

SCENARIOS = ("step-time-sharing", "eviction-tail", "preemption-stall", "healthy", "idle", "protected", "mixed",
             "self-made-prefill", "chunking-overhead", "noisy-scrapes", "upgrade")
MECHANISMS = ("step-time-sharing", "eviction", "preemption-stall")
TERMS = ("lag0_loss", "sharing_loss", "tail_loss", "inflation_loss", "residency_loss", "preemption_share")


def ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean of their places)."""
    order = np.argsort(x, kind="mergesort")
    r = np.empty(x.size)
    r[order] = np.arange(x.size, dtype=float)
    for v in np.unique(x):
        tie = x == v
        r[tie] = r[tie].mean()
    return r


def spearman(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a, float), np.asarray(b, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return float("nan")
    rx, ry = ranks(x[ok]), ranks(y[ok])
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def load_pool(cache: Path, seeds: int, hours: float, profile: str) -> list[PoolRun]:
    if cache.exists():
        pool: list[PoolRun] = pickle.loads(cache.read_bytes())
        return pool
    if profile == "radiance":
        pool = simulate_pool(SCENARIOS, seeds=seeds, duration_seconds=hours * 3600)
    else:  # the same runs under another engine's names (the truth is the same; the metric set differs)
        pool = []
        for scenario in SCENARIOS:
            for seed in range(1, seeds + 1):
                result = simulate(scenario, duration_seconds=hours * 3600 + 1800.0, seed=seed, profile=profile)
                pool.append(PoolRun(scenario, seed, result.recording.endpoints[0], dict(result.recording.families),
                                    result.truth))
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(pool))
    return pool


def census_losses(recording: Any, census_cache: Path | None) -> dict[str, dict[str, Any]]:
    """Per instance: the census's loss share per mechanism and the total of the found ones."""
    if census_cache is not None and census_cache.exists():
        cached: dict[str, dict[str, Any]] = json.loads(census_cache.read_text())
        return cached
    out: dict[str, dict[str, Any]] = {}
    for ep in recording.endpoints:
        try:
            report = census_endpoint(ep, recording.families, "fleet")
        except CensusError as exc:
            out[ep.instance] = {"error": str(exc)}
            continue
        ls, v = report.losses, report.verdict
        per = {} if ls is None else {"step-time-sharing": ls.step_time_sharing, "eviction": ls.eviction,
                                     "preemption-stall": ls.preemption_stall}
        found = {f.mechanism.value: f.loss_share for f in v.found}
        out[ep.instance] = {"mechanism": v.mechanism.value, "per": per, "found": found,
                            "total": float(sum(x for x in found.values() if np.isfinite(x)))}
    if census_cache is not None:
        census_cache.write_text(json.dumps(out))
    return out


def fmt(x: Any) -> str:
    return f"{x:6.3f}" if isinstance(x, (int, float)) and np.isfinite(x) else "     -"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=Path, default=None,
                        help="the pool's pickle (default /tmp/fleet-pools/pool-<H>h-<seeds>seeds[-<profile>].pkl): "
                             "read if there, else simulated and written")
    parser.add_argument("--profile", default="radiance", help="the simulator's metric names (radiance, vllm, ...)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--census-cache", type=Path, default=None,
                        help="a JSON file for the census results (they do not depend on the screen): read if there")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    suffix = "" if args.profile == "radiance" else f"-{args.profile}"
    pool_path = args.pool or Path(f"/tmp/fleet-pools/pool-{args.hours:g}h-{args.seeds}seeds{suffix}.pkl")
    pool = load_pool(pool_path, args.seeds, args.hours, args.profile)
    recording, members = vary_fleet(pool, len(pool), duration_seconds=args.hours * 3600, seed=len(pool))
    start, end = EPOCH_SECONDS, EPOCH_SECONDS + args.hours * 3600
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pdcensus-accuracy-") as tmp:
        with LocalVictoriaMetrics(Path(tmp)) as vm:
            vm.import_recording(recording)
            result = census_fleet(vm.url, start=start, end=end, screen_only=True,
                                  selector=f'{{job="{recording.endpoints[0].job}"}}')
    screen_seconds = time.monotonic() - t0
    census = census_losses(recording, args.census_cache)
    rows: dict[str, ScreenRow] = {r.instance: r for r in result.screen}
    table = []
    for m in members:
        r = rows[m.instance]
        truth = {k: float(v) for k, v in (m.truth.get("loss_share") or {}).items()}
        c = census.get(m.instance, {})
        terms = {t: float(getattr(r, t)) for t in TERMS if hasattr(r, t)}
        table.append({"instance": m.instance, "scenario": m.scenario, "seed": m.seed, "truth": truth,
                      "truth_total": sum(truth.values()), "score": r.score, "flags": [f.value for f in r.flags],
                      "terms": terms, "sums": dict(r.sums), "census": c.get("per", {}), "census_found": c.get("found", {}),
                      "census_total": c.get("total", float("nan")), "census_mechanism": c.get("mechanism", "")})
    print(f"screen: {screen_seconds:.1f} s for {len(members)} endpoints (VictoriaMetrics, incl. import)")
    head = ("scenario", "seed", "truth sts/ev/pre", "score", *[t.replace("_loss", "").replace("_share", "")
                                                              for t in TERMS if t in table[0]["terms"]],
            "census sts/ev/pre", "census total")
    print(" | ".join(head))
    for row in table:
        t, c = row["truth"], row["census"]
        print(f"{row['scenario']:18s} {row['seed']} | " + " ".join(fmt(t.get(k, 0.0)) for k in MECHANISMS)
              + f" | {fmt(row['score'])} | " + " ".join(fmt(v) for v in row["terms"].values())
              + " | " + " ".join(fmt(c.get(k)) for k in MECHANISMS) + f" | {fmt(row['census_total'])}"
              + (f"  [{','.join(row['flags'])}]" if row["flags"] else ""))
    print("\nper scenario: mean score - truth total, score - census total; Spearman(score, truth) within")
    per_scenario = {}
    for sc in SCENARIOS:
        mine = [r for r in table if r["scenario"] == sc]
        if not mine:
            continue
        vs_truth = float(np.nanmean([r["score"] - r["truth_total"] for r in mine]))
        vs_census = float(np.nanmean([r["score"] - r["census_total"] for r in mine]))
        rho = spearman([r["score"] for r in mine], [r["truth_total"] for r in mine])
        per_scenario[sc] = {"bias_vs_truth": vs_truth, "bias_vs_census": vs_census, "spearman_within": rho}
        print(f"{sc:18s} bias vs truth {vs_truth:+.3f}  vs census {vs_census:+.3f}  spearman within {rho:+.2f}")
    rho_all = spearman([r["score"] for r in table], [r["truth_total"] for r in table])
    rho_census = spearman([r["score"] for r in table], [r["census_total"] for r in table])
    mae = float(np.nanmean([abs(r["score"] - r["truth_total"]) for r in table]))
    print(f"\nSpearman(score, truth total) over all {len(table)} runs: {rho_all:+.3f}; "
          f"Spearman(score, census total): {rho_census:+.3f}; mean |score - truth| {mae:.3f}")
    if args.out is not None:
        args.out.write_text(json.dumps({"runs": table, "per_scenario": per_scenario, "spearman_truth": rho_all,
                                        "spearman_census": rho_census, "mean_abs_error_truth": mae}, indent=1,
                                       default=lambda x: None))


if __name__ == "__main__":
    main()
