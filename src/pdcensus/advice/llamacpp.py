"""llama.cpp's own knobs for step-time sharing, with the effect predicted from the census.

Read from llama.cpp's source at tag b11434 (``common/arg.cpp`` for the flags,
``tools/server/server-context.cpp`` for what they do; see ``docs/engines.md``):

- ``-b/--batch-size N`` (env ``LLAMA_ARG_BATCH``, default 2048): the server loop fills each
  ``llama_decode`` call with one token per generating slot and then prompt tokens up to N
  (``update_slots``/``pre_decode``). A generating slot gets its next token only when the whole
  call returns, so beside a long prompt it gets **one token per call of about N tokens**. This
  is the decoder dial: a smaller N is a shorter wait, and a prompt needs more calls (each one
  also carries the decode rows, about one decode-only step more per call).
- ``-ub/--ubatch-size N`` (env ``LLAMA_ARG_UBATCH``, default 512): ``llama_decode`` splits the
  call into micro-batches of N, but sampling still waits for the whole call: **it does not act
  on the decoder's wait**; on a CPU a smaller micro-batch only makes the prompt slower (less
  work per matrix product), and the decoder waits the longer call.
- ``-np/--parallel N`` (env ``LLAMA_ARG_N_PARALLEL``): the slots. Fewer slots queue prompts
  (``requests_deferred``) instead of running them beside decoders: admission, not sharing.

The prediction (:func:`batch_point`): prompt throughput inside a call ``R`` (tokens/s), the
decode-only step ``d`` and ``G`` decoders; a call carrying a full chunk takes
``t(N) = d + (N - G) / R``, so a decoder beside a prompt gets ``1 / t(N)`` tokens/s, and a
prompt of ``P`` tokens takes ``P / R + ceil(P / (N - G)) d``: its TTFT stretch per prompt token is
``(1/R + d/(N - G)) / (1/R + d/(N_now - G))``. ``R`` is the prefill rate of the intervals a chunk
call covered whole (:func:`prompt_rate`), ``d`` the ledger's decode-only step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.advice.predictions import BatchSizePrediction
from pdcensus.census.model import CensusReport
from pdcensus.engines.knob_types import ActsOn, Knob
from pdcensus.engines.llamacpp import KNOBS as LLAMACPP_KNOBS
from pdcensus.engines.llamacpp import RECORD as LLAMACPP

BATCH_VALUES = (2048, 1024, 512, 256, 128, 64)
DEFAULT_BATCH, DEFAULT_UBATCH = (int(str(k.default)) for k in LLAMACPP_KNOBS[:2])


def flag_value(flags: Mapping[str, str], knob: Knob) -> str | None:
    """The knob's value in argv flags, under any of its spellings."""
    return next((flags[s] for s in knob.spellings() if s in flags), None)


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def batch_point(batch: int, now: int, decoders: float, prompt_rate: float, decode_step: float,
                idle: float) -> dict[str, float]:
    """Predicted figures at ``-b batch`` (see the module docstring)."""
    rows = max(decoders, 0.0)
    chunk = max(batch - rows, 1.0)
    call = decode_step + chunk / prompt_rate
    per_stream = 1.0 / call
    per_token_now = 1.0 / prompt_rate + decode_step / max(now - rows, 1.0)
    per_token = 1.0 / prompt_rate + decode_step / chunk
    return {"batch_size": float(batch), "chunk_call_seconds": call,
            "per_stream_tokens_per_second_beside_prompt": per_stream,
            "share_of_idle": per_stream / idle if idle > 0 else math.nan,
            "prompt_ttft_stretch": per_token / per_token_now}


def prompt_rate(report: CensusReport) -> float:
    """Prompt tokens per second inside a chunk call: the median prefill rate of the intervals a chunk
    call covered (nearly) whole (the ledger's chunk time share >= 0.9), scaled by that share."""
    tl, ledger_tl = report.timeline, report.ledger.timeline
    if tl is None or ledger_tl is None or len(ledger_tl.chunk_time_share) != len(tl.prefill_tokens_per_second):
        return math.nan
    share = np.asarray(ledger_tl.chunk_time_share, dtype=float)
    prefill = np.asarray(tl.prefill_tokens_per_second, dtype=float)
    covered = np.isfinite(share) & (share >= 0.9) & np.isfinite(prefill) & (prefill > 0)
    return float(np.median(prefill[covered] / share[covered])) if covered.any() else math.nan


def _inputs(report: CensusReport) -> tuple[float, float, float, float]:
    """(decoders, prompt rate, decode-only step, idle per-stream rate); NaN where missing."""
    tl = report.timeline
    running = np.asarray(tl.running if tl else (), dtype=float)
    running = running[np.isfinite(running) & (running > 0)]
    decoders = float(np.median(running)) if running.size else math.nan
    idle = report.buckets.rows[0].per_stream_tokens_per_second if report.buckets and report.buckets.rows else math.nan
    return decoders, prompt_rate(report), report.ledger.decode_step_seconds, idle


def recommend_batch(report: CensusReport, flags: Mapping[str, str], target_share: float) -> Recommendation:
    """``-b N`` for step-time sharing on llama.cpp, N the largest tried that reaches the target share."""
    knob = LLAMACPP_KNOBS[0]
    now = _int(flag_value(flags, knob), DEFAULT_BATCH)
    rollback = knob.rollback_env_line(str(now))
    decoders, rate, decode_step, idle = _inputs(report)
    if not all(math.isfinite(x) and x > 0 for x in (decoders, rate, decode_step, idle)):
        return Recommendation("step-time-sharing", "-b", "N", knob.env_line("N"), rollback,
                              summary="-b/--batch-size is the dial, but the census lacks a number the prediction "
                                      "needs (decoders, prompt rate, decode-only step, idle per-stream rate)",
                              cost=knob.cost, preconditions=knob.preconditions)
    values = sorted({now, *BATCH_VALUES}, reverse=True)
    rows = [batch_point(b, now, decoders, rate, decode_step, idle) for b in values]
    lower = [r for r in rows if r["batch_size"] < now]  # never the deployed -b again: the next step down
    if not lower:
        from pdcensus.advice.engine_advice import spent

        return spent(ActsOn.STEP_TIME_SHARING, LLAMACPP.name, knob, str(now), f"-b {now} is the smallest value tried")
    reaching = [r for r in lower if r["share_of_idle"] >= target_share]
    chosen = reaching[0] if reaching else lower[-1]
    current = batch_point(now, now, decoders, rate, decode_step, idle)
    n = int(chosen["batch_size"])
    predicted = BatchSizePrediction(
        batch_size=chosen["batch_size"], chunk_call_seconds=chosen["chunk_call_seconds"],
        per_stream_tokens_per_second_beside_prompt=chosen["per_stream_tokens_per_second_beside_prompt"],
        share_of_idle=chosen["share_of_idle"], prompt_ttft_stretch=chosen["prompt_ttft_stretch"],
        batch_size_now=float(now), target_decode_share=target_share,
        per_stream_tokens_per_second_beside_prompt_now=current["per_stream_tokens_per_second_beside_prompt"],
        prompt_tokens_per_second=rate, decode_step_seconds=decode_step, decoders=decoders,
        idle_per_stream_tokens_per_second=idle, ubatch_effect_on_decoders=0.0)
    summary = (f"-b {n}: a decoder beside a long prompt gets one token per call of about {n} tokens = 1 / "
               f"({decode_step:.3f} s + {n - decoders:.0f} / {rate:.0f} tok/s) = "
               f"{chosen['per_stream_tokens_per_second_beside_prompt']:.1f} tok/s per stream, "
               f"{chosen['share_of_idle']:.0%} of the idle {idle:.1f} tok/s (now "
               f"{current['per_stream_tokens_per_second_beside_prompt']:.1f} tok/s at -b {now}); the prompt's "
               f"TTFT stretches x{chosen['prompt_ttft_stretch']:.2f}")
    notes = ["-ub/--ubatch-size does not act on this: llama_decode splits the call into micro-batches, but a "
             "generating slot samples only after the whole call; on a CPU a smaller -ub slows the prompt",
             "rollback: restart with the previous argv, or the env line where the serve script does not pass -b "
             "(a flag given on the command line wins over LLAMA_ARG_BATCH)"]
    ubatch = _int(flag_value(flags, LLAMACPP_KNOBS[1]), DEFAULT_UBATCH)
    if n < ubatch:
        notes.append(f"-b {n} also lowers the micro-batch (n_ubatch = min(-b, -ub) = {n}): on a CPU the prompt rate "
                     "falls with it, which this prediction holds fixed, so the wait per call and the TTFT cost come out "
                     "larger (measured in BENCHMARKS.md, llama.cpp section: 65, 37 and 16 tok/s at 512, 128 and 64)")
    if not reaching:
        notes.append(f"no -b down to {values[-1]} reaches {target_share:.0%} of the idle rate: the share tends "
                     f"to 1 / (decode-only step x idle) = {1 / (decode_step * idle):.0%}")
    counter = "the mean chunk step (prompt_seconds_total per chunk call) must fall in the after window"
    plan = VerificationPlan(argv=knob.argv_check(str(n)), counter=counter, bucket_pair=knob.bucket_pair,
                            command=f"pdcensus verify-arm --before BEFORE --after AFTER --flag batch-size={n} "
                                    "--pid $(pidof llama-server)")
    return Recommendation("step-time-sharing", "-b", str(n), knob.env_line(str(n)), rollback, summary, predicted,
                          cost=knob.cost, preconditions=knob.preconditions, verification=plan,
                          tradeoff=tuple(rows), notes=tuple(notes))
