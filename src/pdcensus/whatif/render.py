"""The what-if in the terminal: calibration first (its error on the recording), then the prediction.

A view of :class:`~pdcensus.whatif.model.WhatIfResult` only; every number comes from it.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from pdcensus.engines import record
from pdcensus.whatif.vllm_knobs import vllm_spelling
from pdcensus.whatif.measure import GATE_FIGURES
from pdcensus.whatif.model import BOUNDED, WhatIfResult

LABELS = {
    "per_stream_idle_tokens_per_second": "per-stream decode, prefill idle (tok/s)",
    "per_stream_busy_tokens_per_second": "per-stream decode, prefill running (tok/s)",
    "busy_vs_idle": "busy / idle per-stream",
    "decode_tokens_per_second": "decode throughput (tok/s)",
    "prefill_tokens_per_second": "prefill throughput (tok/s)",
    "running_mean": "running (mean)",
    "waiting_mean": "waiting (mean)",
    "ttft_p50_seconds": "TTFT p50 (s)",
    "ttft_p90_seconds": "TTFT p90 (s)",
    "ttft_p99_seconds": "TTFT p99 (s)",
    "itl_p50_seconds": "ITL p50 (s)",
    "itl_p99_seconds": "ITL p99 (s)",
    "busy_ttft_p50_seconds": "TTFT p50, prefill running (s)",
    "busy_ttft_p90_seconds": "TTFT p90, prefill running (s)",
    "busy_itl_p50_seconds": "ITL p50, prefill running (s)",
    "busy_itl_p99_seconds": "ITL p99, prefill running (s)",
    "felt_busy_tokens_per_second": "decoders' pace, prefill running (ITL, tok/s)",
    "felt_idle_tokens_per_second": "decoders' pace, prefill idle (ITL, tok/s)",
    "stalled_share": "decoders' waiting in gaps >= 2.5 s (share)",
}




# the calibration error, a few figures a line so that a 100-column terminal does not wrap them
ERROR_LINES: tuple[tuple[tuple[str, str], ...], ...] = (
    (("per_stream_idle_tokens_per_second", "per-stream idle"), ("per_stream_busy_tokens_per_second", "busy"),
     ("decode_tokens_per_second", "decode throughput")),
    (("busy_vs_idle", "busy/idle"), ("prefill_tokens_per_second", "prefill throughput"), ("running_mean", "running"),
     ("waiting_mean", "waiting")),
    (("ttft_p50_seconds", "TTFT p50"), ("ttft_p90_seconds", "p90"), ("ttft_p99_seconds", "p99"),
     ("itl_p50_seconds", "ITL p50"), ("itl_p99_seconds", "p99")),
    (("busy_ttft_p50_seconds", "while prefill runs: TTFT p50"), ("busy_ttft_p90_seconds", "p90"),
     ("busy_itl_p50_seconds", "ITL p50"), ("busy_itl_p99_seconds", "p99")),
    (("felt_busy_tokens_per_second", "decoders' pace (ITL) while prefill runs"),
     ("felt_idle_tokens_per_second", "idle"), ("stalled_share", "waiting in gaps >= 2.5 s")),
)


def _time(seconds: float) -> str:
    """Seconds in the unit that reads best: s, ms or us."""
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def render(result: WhatIfResult, console: Console) -> None:
    """Calibration, its error, then the prediction (or why there is none)."""
    c = result.calibration
    console.print(f"[bold]what-if[/bold] {result.source}: {c.profile}, {c.window_seconds:.0f} s at "
                  f"{c.scrape_interval_seconds:g} s scrapes; twin over {result.seeds} seed(s)")
    k = c.costs
    prefill_from = k.basis.split("prefill: ")[-1].split(":")[0]
    console.print(f"step costs: decode-only {_time(k.decode_step_seconds)} = {_time(k.base_seconds)} "
                  f"+ {_time(k.per_row_seconds)}/row; prefill {_time(k.per_prefill_token_seconds)}/token "
                  f"({prefill_from})" + (f"; {k.ubatch_tokens}-token micro-batch pass {_time(k.ubatch_seconds)}"
                                         if k.ubatch_tokens else ""))
    t = c.traffic
    console.print(f"traffic: {t.request_rate_per_second:.3g} req/s ({t.request_basis}); prompts ~"
                  f"{t.short_prompt_tokens:,.0f} tok" + (f", long ~{t.long_prompt_tokens:,.0f} tok"
                                                        if t.long_prompt_tokens else "")
                  + f"; outputs ~{t.mean_output_tokens:,.0f} tok"
                  + (f"; {t.standing_decoders} standing decoder(s)" if t.standing_decoders else ""))
    if record(c.engine).twin_maps_every_flag:  # the twin's own flags are another engine's: vLLM's spelling only, the rest said
        shown, left = vllm_spelling(c.flags, c.flag_sources)
        console.print("twin flags (vLLM's spelling): " + " ".join(f"{f} {v}" for f, v in shown))
        for note in left:
            console.print(f"  twin: {note}")
    else:
        console.print("twin flags: " + " ".join(f"{f} {v}" for f, v in c.flags.items()))
    for note in c.notes:
        console.print(f"  note: {note}")
    console.print(f"calibration error, twin without the change vs the recording (* gating: beyond "
                  f"{result.bound:.0%}, no prediction):")
    errors = result.calibration_error
    for group in ERROR_LINES:
        items = [f"{label} {errors[k]:+.0%}" + (" *" if k in BOUNDED else "") for k, label in group if k in errors]
        if items:
            console.print("  " + ", ".join(items))
    if result.refused:
        console.print(f"[bold]no prediction[/bold]: {result.refused}")
        return
    for warning in result.warnings:
        console.print(f"[bold]warning[/bold]: {warning}")
    for why in result.remarks:
        console.print(f"why: {why}")
    change = ", ".join(f"{s.spelling}={s.value}" for s in result.settings)
    pred = Table(title=f"predicted with {change} (median over seeds, \\[range])")
    for col in ("figure", "observed", "predicted", "change"):
        pred.add_column(col, justify="left" if col == "figure" else "right")
    for f in result.figures:
        if f.name in GATE_FIGURES:  # verify-arm --whatif reads them from --json
            continue
        if not math.isfinite(f.predicted.median):
            if f.withheld and math.isfinite(f.observed):
                pred.add_row(LABELS.get(f.name, f.name), _num(f.observed), "withheld", "-")
            continue
        twin_only = not math.isfinite(f.observed)  # the recording has no such figure: the twin's own value
        pred.add_row(LABELS.get(f.name, f.name), "(none)" if twin_only else _num(f.observed),
                     f"{_num(f.predicted.median)} [{_num(f.predicted.low)}, {_num(f.predicted.high)}]",
                     ("twin " if twin_only else "") + (f"x{f.change:.2f}" if math.isfinite(f.change) else "-"))
    console.print(pred)
    buckets = Table(title="per-stream decode by prefill bucket (the recording's edges)")
    for col in ("bucket", "observed", "twin before", "twin after"):
        buckets.add_column(col, justify="left" if col == "bucket" else "right")
    for b in result.buckets:
        buckets.add_row(b.bucket, _num(b.observed_per_stream_tokens_per_second), _num(b.twin_before_per_stream.median),
                        f"{_num(b.twin_after_per_stream.median)} [{_num(b.twin_after_per_stream.low)}, "
                        f"{_num(b.twin_after_per_stream.high)}]")
    console.print(buckets)
