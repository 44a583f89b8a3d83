"""`pdcensus fleet --prometheus URL`: the census of every endpoint behind a selector, ranked worst first."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from pdcensus.commands import remote
from pdcensus.commands.base import app

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from pdcensus.fleet import FleetResult


@dataclass
class _Progress:
    """How far the fleet census is: a bar on a terminal, one line per endpoint otherwise."""

    total: int = 0
    done: int = 0
    bar: Progress | None = None
    task: TaskID | None = None


def _fmt(value: float | None, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def _table(result: FleetResult) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"fleet census: {len(result.endpoints)} endpoint(s) under {result.selector} "
                        f"({result.wall_seconds:.1f} s, {result.concurrency} at a time)")
    for column, justify in (("rank", "right"), ("job", "left"), ("instance", "left"), ("mechanism", "left"),
                            ("confidence", "right"), ("busy/idle per stream", "right"), ("note", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in result.ranking:
        note = row.error or ""
        table.add_row(str(row.rank), row.job, row.instance, row.mechanism, _fmt(row.confidence, ".2f"),
                      _fmt(row.per_stream_vs_idle, ".2f"), note, style="red" if row.error else None)
    Console(emoji=False).print(table)


@app.command("fleet")
@remote.with_connection_options
def fleet_command(
    prometheus: Annotated[str, typer.Option("--prometheus", help="Base URL of a Prometheus-compatible API, e.g. http://127.0.0.1:9090.")],
    selector: remote.SelectorOpt = '{job="radiance"}',
    start: Annotated[Optional[str], typer.Option("--start", help="Window start (Unix seconds or RFC 3339; default --end minus --window).")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Window end (Unix seconds or RFC 3339; default now).")] = None,
    window: remote.WindowOpt = "2h",
    concurrency: Annotated[int, typer.Option("--concurrency", help="Batches of endpoints pulled and censused at once.")] = 4,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Endpoints pulled together in one batch (1 = one at a time).")] = 25,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: endpoints (one census object each) and ranking.")] = False,
    connection: remote.ConnectionOptions = remote.ConnectionOptions(),
) -> None:
    """Census every engine endpoint under --selector concurrently and rank them, worst collapse first."""
    from pdcensus.fleet import FleetEndpoint, census_fleet

    t0, t1 = remote.window(start, end, window)
    progress = _Progress()
    tty = sys.stderr.isatty()

    def discovered(n: int) -> None:
        progress.total = n
        if tty:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            bar = Progress(TextColumn("census"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           console=Console(stderr=True), transient=True)
            bar.start()
            progress.bar, progress.task = bar, bar.add_task("census", total=n)
        else:
            print(f"censusing {n} endpoint(s), {concurrency} at a time", file=sys.stderr, flush=True)

    def finished(e: FleetEndpoint) -> None:
        progress.done += 1
        if progress.bar is not None and progress.task is not None:
            progress.bar.advance(progress.task)
        else:
            what = e.report.verdict.mechanism.value if e.report is not None else f"error: {e.error}"
            print(f"[{progress.done}/{progress.total}] {e.instance} {what} ({e.seconds:.1f} s)",
                  file=sys.stderr, flush=True)

    try:
        result = census_fleet(prometheus, selector=selector, start=t0, end=t1, concurrency=concurrency,
                              auth=connection.auth(), timeout=connection.timeout_seconds, batch_size=batch_size,
                              on_discovered=discovered, on_endpoint=finished)
    finally:
        if progress.bar is not None:
            progress.bar.stop()
    for e in result.endpoints:
        for warning in e.warnings:
            print(f"warning: {e.instance}: {warning}", file=sys.stderr)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), allow_nan=False))
        return
    _table(result)
