"""`pdcensus promql` and `pdcensus grafana`: the census quantities for a user's own Prometheus/Grafana."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app, parse_duration
from pdcensus.errors import UsageError
from pdcensus.series.profiles import PROFILES, get_profile

_PROFILE_HELP = "Metric profile, one of: " + ", ".join(PROFILES) + "."


def _interval_seconds(text: str) -> float:
    seconds = parse_duration(text)
    if seconds <= 0 or seconds > 30:
        raise UsageError(f"--scrape-interval {text!r} must be above 0 and at most 30s (the census step limit)")
    return seconds


@app.command()
def promql(
    profile: Annotated[str, typer.Option("--profile", help=_PROFILE_HELP)] = "radiance-1.8",
    selector: Annotated[str, typer.Option("--selector", help="Label matchers added to every series, e.g. '{job=\"radiance\"}'.")] = "",
    window: Annotated[Optional[str], typer.Option("--window", help="Range window: $__rate_interval (default), or a duration such as 1m (default 4 x scrape interval with --rules).")] = None,
    scrape_interval: Annotated[str, typer.Option("--scrape-interval", help="The endpoint's scrape interval (rule evaluation interval with --rules).")] = "15s",
    rules: Annotated[bool, typer.Option("--rules", help="Print a Prometheus recording-rules file (YAML) instead.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the queries as a JSON list.")] = False,
) -> None:
    """Print the PromQL for each census quantity (phase ratio, per-stream rate, TTFT, preemptions)."""
    from pdcensus.queries.promql_export import census_queries, prometheus_duration, render_promql, render_rules

    prof = get_profile(profile)
    interval = _interval_seconds(scrape_interval)
    if window is None:
        window = prometheus_duration(4 * interval) if rules else "$__rate_interval"
    queries = census_queries(prof, selector=selector, window=window)
    if rules:
        typer.echo(render_rules(prof, queries, interval_seconds=interval), nl=False)
    elif as_json:
        typer.echo(json.dumps([
            {"key": q.key, "title": q.title, "expr": q.expr, "unit": q.unit, "avoids": q.avoids,
             "record": q.record_name()} for q in queries
        ], indent=2))
    else:
        typer.echo(render_promql(prof, queries), nl=False)


@app.command()
def grafana(
    profile: Annotated[str, typer.Option("--profile", help=_PROFILE_HELP)] = "radiance-1.8",
    scrape_interval: Annotated[str, typer.Option("--scrape-interval", help="The endpoint's scrape interval (each panel's Min interval).")] = "15s",
    title: Annotated[Optional[str], typer.Option("--title", help="Dashboard title.")] = None,
) -> None:
    """Print a Grafana dashboard (JSON) of the census quantities: pdcensus grafana > dashboard.json."""
    from pdcensus.queries.grafana import build_dashboard

    dashboard = build_dashboard(get_profile(profile), scrape_interval_seconds=_interval_seconds(scrape_interval),
                                title=title)
    typer.echo(json.dumps(dashboard, indent=2))
