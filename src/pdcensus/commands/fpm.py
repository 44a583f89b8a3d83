"""`pdcensus fpm record` and `pdcensus fpm ledger`: Forward Pass Metrics, the exact step ledger.

``record`` subscribes to an engine's FPM ZMQ PUB port (vLLM ``--forward-pass-metrics-port``,
Dynamo ``DYN_FORWARDPASS_METRIC_PORT``, SGLang's publisher) and appends per-step records;
``ledger`` prints the ledger of a recording. One library call each, plus rendering.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from pdcensus.commands.base import app, parse_duration
from pdcensus.errors import UsageError

fpm_app = typer.Typer(help="Forward Pass Metrics (per-step records over ZMQ): record them, read the ledger.",
                      no_args_is_help=True)
app.add_typer(fpm_app, name="fpm")


def _ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def _pct(share: float) -> str:
    return "n/a" if math.isnan(share) else f"{share * 100:.1f} %"


def _finite(value: object) -> object:
    """JSON has no NaN or infinity: an unavailable number is null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


@fpm_app.command("record")
def record(
    address: Annotated[str, typer.Argument(help="tcp://HOST:PORT, HOST:PORT or PORT of the FPM publisher.")],
    out: Annotated[Path, typer.Option("--out", help="JSON-lines file to append to.")],
    duration: Annotated[str, typer.Option("--duration", help="How long to record, e.g. 30m.")] = "10m",
) -> None:
    """Subscribe to an engine's FPM publisher and append every step to a file."""
    from pdcensus.sources.fpm import record_fpm

    seconds = parse_duration(duration)
    if seconds <= 0:
        raise UsageError(f"--duration {duration!r} must be above 0")
    summary = record_fpm(address, out, seconds)
    typer.echo(
        f"{summary.stored} records ({summary.heartbeats} idle heartbeats) to {summary.path}; "
        f"{summary.rejected} rejected, {summary.sequence_gaps} missing by sequence"
    )
    if summary.received == 0:
        typer.echo(f"warning: nothing arrived from {address} in {duration}; is the FPM port enabled?",
                   err=True)


@fpm_app.command("ledger")
def ledger(
    path: Annotated[Path, typer.Argument(help="A recording written by `pdcensus fpm record`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The exact step ledger of an FPM recording: decode-only vs chunk steps, buckets, lag."""
    from pdcensus.census.fpm_ledger import bucket_steps_by_prefill, decode_steps_by_time_since_chunk, fpm_ledger
    from pdcensus.sources.fpm import load_fpm

    records = load_fpm(path)
    overall, per_worker = fpm_ledger(records)
    buckets = bucket_steps_by_prefill(records)
    lags = decode_steps_by_time_since_chunk(records)
    if as_json:
        doc = {
            "schema": "pdcensus/fpm-ledger/v1",
            "ledger": asdict(overall),
            "workers": [asdict(w) for w in per_worker],
            "prefill_buckets": [asdict(b) for b in buckets],
            "lag_buckets": [asdict(b) for b in lags],
        }
        typer.echo(json.dumps(_finite(doc), indent=2))
        return
    typer.echo(f"steps {overall.steps} ({overall.chunk_steps} chunk, {overall.decode_steps} decode-only), "
               f"{overall.heartbeats} idle heartbeats, {overall.sequence_gaps} missing by sequence")
    typer.echo(f"mean decode-only step {_ms(overall.decode_step_mean_seconds)}, "
               f"mean chunk step {_ms(overall.chunk_step_mean_seconds)}")
    typer.echo(f"chunk steps: {_pct(overall.chunk_share_of_steps)} of steps, "
               f"{_pct(overall.chunk_share_of_step_seconds)} of step time")
    typer.echo("prefill tokens in step -> steps, mean step, per-stream tokens/s:")
    for b in buckets:
        span = "decode-only" if b.high_tokens == 0 else f"[{b.low_tokens}, {b.high_tokens:g})"
        rate = "n/a" if math.isnan(b.per_stream_tokens_per_second) else f"{b.per_stream_tokens_per_second:.1f}"
        typer.echo(f"  {span:>16}  {b.steps:>8}  {_ms(b.mean_step_seconds):>10}  {rate:>8}")
    typer.echo("decode-only steps by time since the last chunk step -> steps, mean step:")
    for lag in lags:
        typer.echo(f"  [{lag.low_seconds:g} s, {lag.high_seconds:g} s)  {lag.steps:>8}  {_ms(lag.mean_step_seconds):>10}")
