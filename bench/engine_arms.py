"""Each engine's advice deployed as printed in the simulator: engaged or not, and what it moved.

For each engine profile (radiance, vLLM, SGLang, TGI names) and mechanism scenario, the census
of one run gives the advice in that engine's spelling; the printed deploy line is fed back to
``pdcensus sim --set`` (same scenario, same seed); ``verify-arm`` judges the arm and the after
run's census gives the loss the arm acts on: the lost share of decoders' time, the stall (ITL
p99 while prefill runs as a ratio to idle; TGI: the mean chunk step), preemptions, or the
replayed share of prompt tokens. The tests assert the same (``tests/advice/test_engine_arms.py``);
this prints the figures for BENCHMARKS.md.

Usage: ``.venv/bin/python bench/engine_arms.py [--seed 3] [--duration 1h]`` (eviction runs twice as long)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from pdcensus import api
from pdcensus.advice.evidence import read_argv
from pdcensus.census.model import CensusReport
from pdcensus.cli import main
from pdcensus.commands.base import parse_duration
from pdcensus.sim.engine_flags import apply
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import simulate_scenario
from pdcensus.sim.scenarios import get_scenario
from pdcensus.sources.load import load_source
from pdcensus.verify.arm import verify_arm

SCENARIOS = {"step-time-sharing": "step-time-sharing", "eviction-tail": "eviction",
             "preemption-stall": "preemption-stall", "preemption-stall@0.5": "preemption-stall",
             "self-made-prefill": "self-made-prefill"}


HALF = "preemption-stall@0.5"  # the scenario at half its load: below capacity, so the KV arm is the advice


def _sim(out: Path, scenario: str, profile: str, seed: str, duration: str, sets: list[str]) -> Path:
    if scenario == HALF:  # the same path as `sim --set`: engine spelling through pdcensus.sim.engine_flags
        base = get_scenario("preemption-stall")
        spec = replace(base, segments=tuple(replace(s, workload=s.workload.scaled(0.5)) for s in base.segments))
        flags = dict(item.split("=", 1) for item in sets)
        spec, flags = (spec, flags) if profile == "radiance" else (apply(spec, profile, flags), {})
        return write_sim_dir(simulate_scenario(spec, duration_seconds=parse_duration(duration), seed=int(seed),
                                               profile=profile, overrides=flags), out)
    args = ["sim", scenario, "--out", str(out), "--duration", duration, "--seed", seed, "--profile", profile]
    for item in sets:
        args += ["--set", item]
    with contextlib.redirect_stdout(io.StringIO()):
        main(args)
    return out


def _loss(report: CensusReport, mechanism: str, engine: str) -> tuple[str, float]:
    found = next((f for f in report.verdict.found if f.mechanism.value == mechanism), None)
    if mechanism == "preemption-stall":
        return "preemptions", float(report.preemption.total)
    if mechanism == "step-time-sharing" and engine != "radiance":
        if engine == "tgi":
            return "mean chunk step s", report.ledger.chunk_step_seconds
        return "ITL p99 / idle", found.itl_p99_ratio if found is not None else 1.0
    return "lost share", found.loss_share if found is not None and found.loss_share is not None else 0.0


def run(seed: str, duration: str) -> list[dict[str, Any]]:
    rows = []
    cases = [(p, s) for p in ("radiance", "vllm", "sglang", "tgi") for s in list(SCENARIOS)[:4]]
    with tempfile.TemporaryDirectory() as tmp:
        for profile, scenario in cases + [("radiance", "self-made-prefill")]:
            dur = "2h" if scenario == "eviction-tail" else duration
            base = Path(tmp) / f"{profile}-{scenario}"
            report = api.census(_sim(base, scenario, profile, seed, dur, []))
            advice: list[dict[str, Any]] = [r.to_dict() for r in report.advice]
            recs = [r for r in advice if r["mechanism"] == SCENARIOS[scenario] and r["value"] not in ("", "N")]
            if not recs:
                rows.append({"profile": profile, "scenario": scenario, "line": "(no arm: " + (
                    f"{advice[0]['knob']} {advice[0]['value']}, {advice[0]['mechanism']}" if advice
                    else f"verdict {report.verdict.mechanism.value}") + ")", "outcome": "-", "metric": "-", "before": float("nan"), "after": float("nan"),
                             "predicted": None})
                continue
            rec = recs[0]
            deploy = rec["deploy"]
            after_dir = _sim(base.with_name(base.name + "-after"), scenario, profile, seed, dur,
                             [f"{f}={v}" for f, v in deploy["flags"]] + list(deploy["env_only"]))
            verdict = verify_arm(load_source(base), load_source(after_dir), deploy["flags"][0][0], rec["value"],
                                 argv=read_argv(after_dir))
            engine = profile
            if SCENARIOS[scenario] == "self-made-prefill":
                n = verdict.step("counter").numbers  # type: ignore[union-attr]
                metric, before, after = "replayed share", n["replay_share_before"], n["replay_share_after"]
            else:
                metric, before = _loss(report, rec["mechanism"], engine)
                after = _loss(api.census(after_dir), rec["mechanism"], engine)[1]
            key = {"ITL p99 / idle": "itl_p99_ratio_while_prefill",
                   "mean chunk step s": "chunk_step_seconds_predicted"}.get(metric, "")
            rows.append({"profile": profile, "scenario": scenario, "line": rec["env_line"],
                         "outcome": verdict.outcome.value, "metric": metric, "before": before, "after": after,
                         "predicted": rec["predicted"].get(key) if key else None})
    return rows


def main_cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", default="3")
    parser.add_argument("--duration", default="1h")
    ns = parser.parse_args()
    print("| profile | scenario | deploy line (as printed) | verify-arm | loss it acts on | before | after | predicted |")
    print("|---|---|---|---|---|---|---|---|")
    for r in run(ns.seed, ns.duration):
        print(f"| {r['profile']} | {r['scenario']} | `{r['line']}` | {r['outcome']} | {r['metric']} | "
              f"{r['before']:.3g} | {r['after']:.3g} | {'-' if r['predicted'] is None else format(r['predicted'], '.3g')} |")


if __name__ == "__main__":
    main_cli()
