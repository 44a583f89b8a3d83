"""`pdcensus census SOURCE`: the census of a recording, as a terminal report, JSON or HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from pdcensus.cli import app, parse_time


@app.command()
def census(
    source: Annotated[str, typer.Argument(help="Recording file (OpenMetrics/Prometheus text/Parquet) or sim output dir.")],
    instance: Annotated[Optional[str], typer.Option("--instance", help="Endpoint instance (default: every engine endpoint).")] = None,
    start: Annotated[Optional[str], typer.Option("--start", help="Window start (Unix seconds or RFC 3339).")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Window end (Unix seconds or RFC 3339).")] = None,
    segment: Annotated[Optional[int], typer.Option("--segment", help="Shape to analyse, 1-based (default: the latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (schema pdcensus/census/v1).")] = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write a plain HTML report to this path.")] = None,
) -> None:
    """Which mechanism makes decode collapse while another session prefills, and how sure."""
    from pdcensus.census.model import reports_to_dict
    from pdcensus.census.run import CensusOptions, census_recording
    from pdcensus.sources.load import load_source

    options = CensusOptions(instance=instance, start=parse_time(start) if start else None,
                            end=parse_time(end) if end else None, segment=segment)
    reports = census_recording(load_source(source), options)
    if html is not None:
        from pdcensus.report.html_basic import render_html

        html.write_text(render_html(reports), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(reports_to_dict(reports), allow_nan=False))
        return
    from rich.console import Console

    from pdcensus.report.terminal import render

    console = Console()
    for report in reports:
        render(report, console)
