"""`pdcensus query`: evaluate PromQL over a recording, answer as Prometheus's HTTP API does."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from pdcensus.commands import remote
from pdcensus.commands.base import app, parse_duration, parse_time
from pdcensus.errors import UsageError


@app.command()
@remote.with_connection_options
def query(
    source: Annotated[str, typer.Argument(
        help="Recording file (OpenMetrics/Prometheus text/Parquet/.pdrec) or sim output dir; with --prometheus, "
             "give only EXPR.")],
    expr: Annotated[Optional[str], typer.Argument(
        help="PromQL expression (our exact subset; others are refused by name).")] = None,
    time: Annotated[Optional[str], typer.Option("--time", help="Instant query time (Unix seconds or RFC 3339).")] = None,
    start: Annotated[Optional[str], typer.Option("--start", help="Range query start.")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Range query end.")] = None,
    step: Annotated[Optional[str], typer.Option("--step", help="Range query step, e.g. 15s.")] = None,
    semantics: Annotated[int, typer.Option("--semantics", help="3 = Prometheus 3.x rules (default), 2 = 2.x rules.")] = 3,
    lookback: Annotated[str, typer.Option("--lookback", help="Lookback of instant selectors, e.g. 5m.")] = "5m",
    as_json: Annotated[bool, typer.Option("--json", help="Print the Prometheus HTTP API JSON (the default output).")] = True,
    prometheus: remote.PrometheusOpt = None,
    selector: remote.SelectorOpt = "",
    connection: remote.ConnectionOptions = remote.ConnectionOptions(),
) -> None:
    """Evaluate EXPR over SOURCE and print what Prometheus's HTTP API would return.

    With --prometheus URL, the raw samples EXPR reads are pulled from that server (only the
    names it selects, over the window it looks at) and evaluated here, with our exact rules.
    """
    from pdcensus.series.promql import instant_query, range_query, storage_from_recording, to_api_json
    from pdcensus.series.promql.functions import SUPPORTED_FUNCTIONS
    from pdcensus.series.promql.plan import footprint
    from pdcensus.sources.load import load_source

    if semantics not in (2, 3):
        raise UsageError(f"--semantics must be 2 or 3, got {semantics}")
    if time is not None and (start or end or step):
        raise UsageError("give either --time T, or --start S --end E --step STEP, not both")
    if time is None and not (start and end and step):
        raise UsageError("give --time T for an instant query, or --start S --end E --step STEP")
    lookback_seconds = parse_duration(lookback)
    if prometheus:
        if expr is not None:
            raise UsageError("with --prometheus give only EXPR, not a SOURCE too")
        expr = source
    elif expr is None:
        raise UsageError("give SOURCE and EXPR (or --prometheus URL and EXPR)")
    t_first = parse_time(time) if time is not None else parse_time(start or "0")
    t_last = parse_time(time) if time is not None else parse_time(end or "0")
    if prometheus:
        need = footprint(expr, SUPPORTED_FUNCTIONS)
        if need.names is None and not selector:
            raise UsageError("EXPR has a selector without a metric name: give --selector to bound the pull")
        pull_start = t_first - need.lookback_ms / 1000 - lookback_seconds
        recording, warnings = remote.fetch(
            prometheus, selector, pull_start, t_last, connection,
            names=set(need.names) if need.names is not None else None,
        )
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
    else:
        recording = load_source(source)
    storage = storage_from_recording(recording)
    if time is not None:
        result = instant_query(storage, expr, t_first, semantics=semantics, lookback_seconds=lookback_seconds)
    else:
        assert step
        result = range_query(storage, expr, t_first, t_last, parse_duration(step),
                             semantics=semantics, lookback_seconds=lookback_seconds)
    typer.echo(json.dumps(to_api_json(result)))
