"""`pdcensus query`: evaluate PromQL over a recording, answer as Prometheus's HTTP API does."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from pdcensus.cli import app, parse_duration, parse_time


@app.command()
def query(
    source: Annotated[str, typer.Argument(help="Recording file (OpenMetrics/Prometheus text/Parquet) or sim output dir.")],
    expr: Annotated[str, typer.Argument(help="PromQL expression (our exact subset; others are refused by name).")],
    time: Annotated[Optional[str], typer.Option("--time", help="Instant query time (Unix seconds or RFC 3339).")] = None,
    start: Annotated[Optional[str], typer.Option("--start", help="Range query start.")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Range query end.")] = None,
    step: Annotated[Optional[str], typer.Option("--step", help="Range query step, e.g. 15s.")] = None,
    semantics: Annotated[int, typer.Option("--semantics", help="3 = Prometheus 3.x rules (default), 2 = 2.x rules.")] = 3,
    lookback: Annotated[str, typer.Option("--lookback", help="Lookback of instant selectors, e.g. 5m.")] = "5m",
    as_json: Annotated[bool, typer.Option("--json", help="Print the Prometheus HTTP API JSON (the default output).")] = True,
) -> None:
    """Evaluate EXPR over SOURCE and print what Prometheus's HTTP API would return."""
    from pdcensus.errors import UsageError
    from pdcensus.series.promql import instant_query, range_query, storage_from_recording, to_api_json
    from pdcensus.sources.load import load_source

    if semantics not in (2, 3):
        raise UsageError(f"--semantics must be 2 or 3, got {semantics}")
    if time is not None and (start or end or step):
        raise UsageError("give either --time T, or --start S --end E --step STEP, not both")
    if time is None and not (start and end and step):
        raise UsageError("give --time T for an instant query, or --start S --end E --step STEP")
    lookback_seconds = parse_duration(lookback)
    storage = storage_from_recording(load_source(source))
    if time is not None:
        result = instant_query(storage, expr, parse_time(time), semantics=semantics,
                               lookback_seconds=lookback_seconds)
    else:
        assert start and end and step
        result = range_query(storage, expr, parse_time(start), parse_time(end), parse_duration(step),
                             semantics=semantics, lookback_seconds=lookback_seconds)
    typer.echo(json.dumps(to_api_json(result)))
