"""The what-if in the terminal: calibration first (its error on the recording), then the prediction.

A view of :class:`~pdcensus.whatif.model.WhatIfResult` only; every number comes from it.
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

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
    "busy_itl_p99_seconds": "ITL p99, prefill running (s)",
}


SHORT = {
    "per_stream_idle_tokens_per_second": "per-stream decode idle",
    "per_stream_busy_tokens_per_second": "busy",
    "decode_tokens_per_second": "decode throughput",
    "busy_vs_idle": "busy/idle",
    "prefill_tokens_per_second": "prefill throughput",
    "running_mean": "running",
    "waiting_mean": "waiting",
    "ttft_p50_seconds": "TTFT p50",
    "ttft_p90_seconds": "TTFT p90",
    "ttft_p99_seconds": "TTFT p99",
    "itl_p50_seconds": "ITL p50",
    "itl_p99_seconds": "ITL p99",
    "busy_ttft_p50_seconds": "busy TTFT p50",
    "busy_ttft_p90_seconds": "busy TTFT p90",
    "busy_itl_p99_seconds": "busy ITL p99",
}


def _num(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def render(result: WhatIfResult, console: Console) -> None:
    """Calibration, its error, then the prediction (or why there is none)."""
    c = result.calibration
    console.print(f"[bold]what-if[/bold] {result.source}: {c.engine} ({c.profile}), window {c.window_seconds:.0f} s, "
                  f"scrape {c.scrape_interval_seconds:g} s; twin over {result.seeds} seed(s)")
    k = c.costs
    console.print(f"step costs: decode-only {k.decode_step_seconds * 1000:.3g} ms (base {k.base_seconds * 1000:.3g} ms "
                  f"+ {k.per_row_seconds * 1e6:.3g} us/row), prefill {k.per_prefill_token_seconds * 1e6:.3g} us/token"
                  + (f", micro-batch {k.ubatch_tokens} tokens at {k.ubatch_seconds * 1000:.3g} ms/pass"
                     if k.ubatch_tokens else ""))
    console.print(f"  from {k.basis}")
    t = c.traffic
    console.print(f"traffic: {t.request_rate_per_second:.3g} req/s ({t.request_basis}), short prompts "
                  f"~{t.short_prompt_tokens:.0f} tok, long ~{t.long_prompt_tokens:.0f} tok, outputs "
                  f"~{t.mean_output_tokens:.0f} tok" + (f", {t.standing_decoders} standing decoder(s)"
                                                        if t.standing_decoders else ""))
    console.print("twin flags: " + " ".join(f"{f} {v}" for f, v in c.flags.items()))
    for note in c.notes:
        console.print(f"  note: {note}")
    console.print(f"calibration error on the recording (the twin without the change, median of {result.seeds} "
                  f"seed(s); the starred ones must be within {result.bound:.0%}):")
    errors = result.calibration_error
    starred = [f"{SHORT[k]} {errors[k]:+.0%} *" for k in BOUNDED if k in errors]
    others = [f"{SHORT[k]} {v:+.0%}" for k, v in errors.items() if k not in BOUNDED]
    console.print("  " + ", ".join(starred))
    if others:
        console.print("  " + ", ".join(others))
    if result.refused:
        console.print(f"[bold]no prediction[/bold]: {result.refused}")
        return
    for warning in result.warnings:
        console.print(f"[bold]warning[/bold]: {warning}")
    change = ", ".join(f"{s.spelling}={s.value}" for s in result.settings)
    pred = Table(title=f"predicted with {change} (median over seeds, \\[range])")
    for col in ("figure", "observed", "predicted", "change"):
        pred.add_column(col, justify="left" if col == "figure" else "right")
    for f in result.figures:
        if not math.isfinite(f.predicted.median):
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
