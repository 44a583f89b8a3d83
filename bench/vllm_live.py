"""vLLM, a real engine: each scenario's client truth beside the census's verdict, depth, loss and confidence.

Runs vLLM's OpenAI server (the CPU build, a dummy 512-hidden Llama with no weights, token-id
prompts; see ``pdcensus.engine.vllm_server``) on 127.0.0.1 with a real Prometheus scraping it every
second, one fresh server per scenario, each from a real cause:

- ``sharing-default``: 3 decoders (32-token prompts, 300 tokens each) and 3,000-token prompts back
  to back in two phases, at vLLM's default step budget (2,048 tokens on a CPU API server,
  ``vllm/engine/arg_utils.py`` at v0.32.0, ``_get_default_max_num_batched_tokens``);
- ``sharing-small`` / ``sharing-large``: the same at ``--max-num-batched-tokens 512`` / ``8192``;
- ``preemption``: a KV cache too small (``--num-gpu-blocks-override 24 --max-model-len 2048``),
  10 streams of 200-token prompts and 900 output tokens, no long prompts;
- ``prefix``: the sharing load, but each long prompt is a turn of one of 4 chat sessions re-sending
  a 2,500-token shared prefix and its own history (prefix-cache hits);
- ``none``: the decoders and 32-token prompts only;
- ``short-burst``: 2 long decoders (2,000 tokens each) beside 100-token prompts that decode 4
  tokens each, 5 s apart: a prefill far shorter than a 5-15 s scrape (``bench/downsample.py``
  reads the run at those); ``holdout-short-burst`` is shaped unlike it (3 decoders of 1,200 tokens,
  150-token prompts 6 s apart, ``--max-num-seqs 8``) and was recorded after the ``long-gaps`` rule;
- ``holdout-busy`` (``--seconds 150``): 3 decoders of 1,500 tokens beside 120-token prompts 0.4 s
  after each answer from 8 s to 142 s: a prompt in nearly every 1 s scrape, so too few spans are
  free of prefill to time a decode-only step (the long gaps' dose-response reads it); recorded
  after that rule was written.

The knob runs (``--scenario knobs`` or one name) are a baseline's load on a server started with
one flag changed: ``budget-512``/``-1024``/``-8192`` beside
``sharing-default``; ``lpt-256``/``-512``/``-1024`` beside it too; ``blocks-48``/``-64``/``-96`` (the KV
cache) and ``seqs-2``/``-4``/``-7`` beside ``preemption``.
``--set=--FLAG=VALUE`` (repeatable) starts every chosen run with that flag changed too, in a folder
named for it (``preemption+num-gpu-blocks-override-40``): the advice's own value, whatever it is.
``bench/vllm_live_table.py`` censuses every finished run again with today's code.

Every file of a run stays in ``--out/<scenario>/`` (``metrics.om`` censuses offline with
``pdcensus census``); ``summary.json`` collects the rows::

    .venv/bin/python bench/vllm_live.py --scenario sharing-default --out /tmp/vllm-live --seconds 240
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pdcensus.engine.vllm_experiment import VllmLive, VllmRun
from pdcensus.engine.vllm_load import VllmPlan

BASE_ARGS = ("--max-model-len", "8192")
SCENARIOS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "sharing-default": (BASE_ARGS, {}),
    "sharing-small": (BASE_ARGS + ("--max-num-batched-tokens", "512"), {}),
    "sharing-large": (BASE_ARGS + ("--max-num-batched-tokens", "8192"), {}),
    "preemption": (("--num-gpu-blocks-override", "24", "--max-model-len", "2048"),
                   {"decoders": 10, "decoder_prompt_tokens": 200, "max_tokens": 900, "phases": ()}),
    "prefix": (BASE_ARGS, {"shared_prefix_tokens": 2500, "sessions": 4, "turn_tokens": 128}),
    "none": (BASE_ARGS, {"prompt_tokens": 32}),
    # prompts whose prefill is far shorter than a 5-15 s scrape (bench/downsample.py reads the run at those)
    "short-burst": (BASE_ARGS, {"decoders": 2, "max_tokens": 2000, "prompt_tokens": 100, "prompt_max_tokens": 4,
                                "prompt_gap_seconds": 5.0, "seed": 13}),
    # held out: shapes no threshold was read from (more decoders, spaced mid-size prompts that decode on,
    # a smaller budget and cache beside a higher batch cap)
    "holdout-sharing": (BASE_ARGS + ("--max-num-seqs", "16"),
                        {"decoders": 5, "decoder_prompt_tokens": 64, "max_tokens": 400, "prompt_tokens": 1500,
                         "prompt_max_tokens": 16, "prompt_gap_seconds": 1.5, "seed": 11}),
    "holdout-short-burst": (BASE_ARGS + ("--max-num-seqs", "8"),
                            {"decoders": 3, "decoder_prompt_tokens": 64, "max_tokens": 1200, "prompt_tokens": 150,
                             "prompt_max_tokens": 2, "prompt_gap_seconds": 6.0, "seed": 14}),
    # held out from the dose-response reading of the long gaps: a prompt pending through nearly every scrape
    # (one phase from 8 s to 8 s before the end of a 150 s run), so almost no span is free of prefill
    "holdout-busy": (BASE_ARGS + ("--max-num-seqs", "8"),
                     {"decoders": 3, "decoder_prompt_tokens": 64, "max_tokens": 1500, "prompt_tokens": 120,
                      "prompt_max_tokens": 2, "prompt_gap_seconds": 0.4, "phases": ((8.0, 142.0),), "seed": 15}),
    # held out from the neighbours' decode-only step and the ramp rule (recorded after both were written): a small
    # step budget splits each prompt into several chunk steps beside long decoders whose contexts grow all run
    "holdout-chunked": (BASE_ARGS + ("--max-num-batched-tokens", "256"),
                        {"decoders": 4, "decoder_prompt_tokens": 48, "max_tokens": 2000, "prompt_tokens": 700,
                         "prompt_max_tokens": 3, "prompt_gap_seconds": 3.0, "seed": 16}),
    # ... and a long-prefill threshold that caps each step's share of a long prompt, beside two decoders
    "holdout-threshold": (BASE_ARGS + ("--long-prefill-token-threshold", "128", "--max-num-seqs", "6"),
                          {"decoders": 2, "decoder_prompt_tokens": 96, "max_tokens": 1000, "prompt_tokens": 1000,
                           "prompt_max_tokens": 8, "prompt_gap_seconds": 2.0, "seed": 17}),
    # ... and prompts through the whole run at 1 s scrapes (2 s quiet at each end), so that fewer than 10 spans are
    # free of prefill and the long gaps are read by dose on a live recording, not a thinned one
    "holdout-saturated": (BASE_ARGS + ("--max-num-seqs", "8"),
                          {"decoders": 3, "decoder_prompt_tokens": 80, "max_tokens": 1500, "prompt_tokens": 200,
                           "prompt_max_tokens": 2, "prompt_gap_seconds": 0.2, "phases": ((2.0, 148.0),),
                           "seed": 18}),
    # held out (recorded after every rule above was written): a wide batch of short-prompt decoders beside long
    # prompts under a mid budget, and a cache too small for the decoders while long prompts also arrive
    "holdout-wide": (BASE_ARGS + ("--max-num-batched-tokens", "1024"),
                     {"decoders": 8, "decoder_prompt_tokens": 32, "max_tokens": 600, "prompt_tokens": 2500,
                      "prompt_max_tokens": 24, "prompt_gap_seconds": 3.0, "seed": 19}),
    "holdout-mixed": (("--num-gpu-blocks-override", "40", "--max-model-len", "4096"),
                      {"decoders": 6, "decoder_prompt_tokens": 300, "max_tokens": 600, "prompt_tokens": 1200,
                       "prompt_max_tokens": 4, "prompt_gap_seconds": 4.0, "seed": 20}),
    # ... and a batch bound the decoders fill, so each long prompt waits for a slot before it prefills
    "holdout-seqs": (BASE_ARGS + ("--max-num-seqs", "4"),
                     {"decoders": 4, "decoder_prompt_tokens": 64, "max_tokens": 500, "prompt_tokens": 2000,
                      "prompt_max_tokens": 8, "prompt_gap_seconds": 2.0, "seed": 21}),
    # ... and a long-prefill threshold far under a large budget: a long prompt is cut into the threshold's chunks
    # while the decoders run (recorded after the twin's step-end stats and the acting client truth were written)
    "holdout-lpt": (BASE_ARGS + ("--max-num-batched-tokens", "4096", "--long-prefill-token-threshold", "512"),
                    {"decoders": 5, "decoder_prompt_tokens": 40, "max_tokens": 500, "prompt_tokens": 2200,
                     "prompt_max_tokens": 8, "prompt_gap_seconds": 2.5, "seed": 22}),
    "holdout-preemption": (("--num-gpu-blocks-override", "20", "--max-model-len", "2048",
                            "--max-num-batched-tokens", "1024"),
                           {"decoders": 8, "decoder_prompt_tokens": 400, "max_tokens": 700, "phases": (), "seed": 12}),
}


def plan_for(scenario: str, seconds: float) -> VllmPlan:
    """Quiet, prompts, quiet, prompts, quiet: each prompt phase a third of the run."""
    third = seconds / 3.0
    q = (seconds - 2 * third) / 3.0
    plan = VllmPlan(scenario=scenario, phases=((q, q + third), (2 * q + third, 2 * q + 2 * third)),
                    duration_seconds=seconds)
    return replace(plan, **SCENARIOS[scenario][1])


def _finite(x: float | None) -> float:
    return float(x) if x is not None and math.isfinite(x) else math.nan


def row(run: VllmRun) -> dict[str, Any]:
    """The client truth beside the census, one flat dict."""
    t, s, r = run.truth, run.stalls, run.report
    v = r.verdict
    lag0 = next((e.value for e in v.evidence if e.rule == "lag0-effect"), None)
    rows = r.buckets.rows if r.buckets is not None else ()
    busy = [b.per_stream_vs_idle for b in rows[1:] if b.per_stream_samples > 0 and math.isfinite(b.per_stream_vs_idle)]
    losses = r.losses
    ttft = sorted(t.prompt_ttft_seconds)
    return {
        "scenario": run.plan.scenario, "argv": " ".join(run.server_argv[3:]),
        "truth_per_stream_outside": t.outside.per_stream_tokens_per_second,
        "truth_per_stream_during": t.during.per_stream_tokens_per_second, "truth_depth_ratio": t.ratio,
        "truth_lost_share": t.decode_time_lost_share, "truth_gap_p50_during": t.during.gap_p50_seconds,
        "truth_gap_p99_during": t.during.gap_p99_seconds, "truth_gap_p50_outside": t.outside.gap_p50_seconds,
        "truth_stalls": s.count, "truth_stalled_share": s.stalled_share, "truth_longest_stall": s.longest_seconds,
        "prompts": t.prompts, "prompt_ttft_median": ttft[len(ttft) // 2] if ttft else math.nan,
        "errors": t.errors,
        "census_mechanism": v.mechanism.value, "census_confidence": v.confidence,
        "census_found": [f"{f.mechanism.value} ({f.severity.value})" for f in v.found],
        "census_lag0_effect": _finite(lag0), "census_depth_min_bucket": min(busy) if busy else math.nan,
        "census_sharing_share": losses.step_time_sharing if losses else math.nan,
        "census_preemption_share": losses.preemption_stall if losses else math.nan,
        "census_eviction_share": losses.eviction if losses else math.nan,
        "census_preemptions": r.preemption.total,
        "census_decode_step": r.ledger.decode_step_seconds, "census_chunk_step": r.ledger.chunk_step_seconds,
    }


# the knob table: each knob at three values or more, each run on a fresh server beside its baseline
# (sharing-default for the step budget and the long-prefill threshold, preemption for KV headroom)
KNOB_RUNS: dict[str, tuple[str, tuple[str, ...]]] = {
    "budget-512": ("sharing-default", ("--max-num-batched-tokens", "512")),
    "budget-1024": ("sharing-default", ("--max-num-batched-tokens", "1024")),
    "budget-8192": ("sharing-default", ("--max-num-batched-tokens", "8192")),
    "lpt-256": ("sharing-default", ("--long-prefill-token-threshold", "256")),
    "lpt-512": ("sharing-default", ("--long-prefill-token-threshold", "512")),
    "lpt-1024": ("sharing-default", ("--long-prefill-token-threshold", "1024")),
    "blocks-48": ("preemption", ("--num-gpu-blocks-override", "48")),
    "blocks-64": ("preemption", ("--num-gpu-blocks-override", "64")),
    "blocks-96": ("preemption", ("--num-gpu-blocks-override", "96")),
    "seqs-2": ("preemption", ("--max-num-seqs", "2")),
    "seqs-4": ("preemption", ("--max-num-seqs", "4")),
    "seqs-7": ("preemption", ("--max-num-seqs", "7")),
    # the advice's own value on the holdout load (its census advises one halving of the CPU build's 2,048)
    "holdout-budget-1024": ("holdout-sharing", ("--max-num-batched-tokens", "1024")),
}


def with_flags(args: tuple[str, ...], flags: tuple[str, ...]) -> tuple[str, ...]:
    """``args`` with each ``--flag value`` pair of ``flags`` set (replaced where present, else appended)."""
    out = list(args)
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return tuple(out)


def set_flags(sets: list[str]) -> tuple[str, ...]:
    """``--set`` values (``--flag=value``) as ``--flag value`` pairs."""
    pairs: list[str] = []
    for item in sets:
        flag, sep, value = item.partition("=")
        if not (sep and flag.startswith("--") and value):
            raise SystemExit(f"--set takes --FLAG=VALUE, got {item!r}")
        pairs += [flag, value]
    return tuple(pairs)


def run_name(name: str, extra: tuple[str, ...]) -> str:
    return name + "".join(f"+{f.lstrip('-')}-{v}" for f, v in zip(extra[::2], extra[1::2], strict=True))


def run_scenario(name: str, out: Path, seconds: float, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    base, flags = KNOB_RUNS.get(name, (name, ()))
    args = with_flags(with_flags(SCENARIOS[base][0], flags), extra)
    name = run_name(name, extra)
    folder = out / name
    (folder / "DONE").unlink(missing_ok=True)
    began = time.monotonic()
    with VllmLive(folder, args) as live:
        started = time.monotonic() - began
        result = live.run(folder, replace(plan_for(base, seconds), scenario=name))
    line = row(result) | {"startup_seconds": started, "wall_seconds": time.monotonic() - began}
    (folder / "row.json").write_text(json.dumps(line, indent=2, allow_nan=True) + "\n")
    (folder / "DONE").write_text(f"{name} finished; files: census.json truth.json metrics.om requests.jsonl\n")
    return line


def print_rows(rows: list[dict[str, Any]]) -> None:
    print("| scenario | truth depth (during/outside) | truth lost share | stalls >2 s (share) | "
          "census verdict (conf) | census depth: lag-0 / worst bucket | census loss: sharing / preemption |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scenario']} | {r['truth_depth_ratio']:.3f} ({r['truth_per_stream_during']:.2f} / "
              f"{r['truth_per_stream_outside']:.1f} tok/s) | {r['truth_lost_share']:.3f} | {r['truth_stalls']} "
              f"({r['truth_stalled_share']:.3f}) | {r['census_mechanism']} ({r['census_confidence']:.2f}) "
              f"{', '.join(r['census_found'])} | {r['census_lag0_effect']:.3f} / {r['census_depth_min_bucket']:.3f} | "
              f"{r['census_sharing_share']:.3f} / {r['census_preemption_share']:.3f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=["all", "knobs", *SCENARIOS, *KNOB_RUNS],
                        help="a scenario or knob run (repeatable); 'all': every scenario, 'knobs': every knob run")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=240.0)
    parser.add_argument("--set", action="append", default=[], metavar="--FLAG=VALUE",
                        help="start every chosen run with this flag changed too (repeatable)")
    opts = parser.parse_args()
    extra = set_flags(opts.set)
    chosen = opts.scenario or ["all"]
    names = [n for c in chosen for n in (list(SCENARIOS) if c == "all" else list(KNOB_RUNS) if c == "knobs" else [c])]
    rows = []
    for name in names:
        rows.append(run_scenario(name, opts.out, opts.seconds, extra))
        print_rows(rows[-1:])
    summary = opts.out / "summary.json"
    previous = json.loads(summary.read_text()) if summary.exists() else {}
    previous.update({r["scenario"]: r for r in rows})
    summary.write_text(json.dumps(previous, indent=2, allow_nan=True) + "\n")
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
