"""`pdcensus fleet --prometheus URL`: discover, screen in the store, examine the worst; ranked by lost decode share."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from pdcensus.report.safe_console import escape_controls
from pdcensus.commands import remote
from pdcensus.commands.base import app, parse_duration

if TYPE_CHECKING:
    from pdcensus.fleet import FleetResult


class _StageProgress:
    """Progress per stage on stderr: one line per stage step (every tenth of the screen's queries)."""

    def __init__(self) -> None:
        self.last: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int, note: str) -> None:
        if stage == "screen":
            tenth = done * 10 // max(total, 1)
            if done not in (1, total) and self.last.get(stage) == tenth:
                return
            self.last[stage] = tenth
        suffix = f" {note}" if note else ""
        print(escape_controls(f"{stage}: [{done}/{total}]{suffix}"), file=sys.stderr, flush=True)


def _taken(result: FleetResult) -> str:
    """Which endpoints the fleet took without a selector: how many, of which profile, and which jobs."""
    by_profile: dict[str, int] = {}
    for e in result.discovered:
        by_profile[e.profile or "no profile"] = by_profile.get(e.profile or "no profile", 0) + 1
    jobs = sorted({e.job for e in result.discovered})
    return (f"took {len(result.discovered)} endpoint(s) with engine metrics the store holds ("
            + ", ".join(f"{name}: {n}" for name, n in sorted(by_profile.items()))
            + f") in job(s) {', '.join(jobs)}")


def _fmt(value: float, pattern: str) -> str:
    return format(value, pattern) if value == value else "-"


def _table(result: FleetResult) -> None:
    from rich.markup import escape
    from rich.table import Table

    from pdcensus.report.safe_console import SafeConsole, literal

    from pdcensus.fleet.rank import EXAMINED

    examined = len(result.examined)
    under = result.selector or "no selector"
    table = Table(title=f"fleet: {len(result.ranking)} endpoint(s) under {escape(under)}, {examined} examined "
                        f"({result.wall_seconds:.1f} s); ranked by lost decode share, ≈ = tie")
    for column, justify in (("rank", "right"), ("job", "left"), ("instance", "left"), ("census", "left"),
                            ("principal", "left"), ("lost share [interval]", "right"), ("screen", "right"),
                            ("flags / error", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in result.ranking:
        if row.group == EXAMINED:
            loss = f"{100 * row.loss_share:.1f} % [{_fmt(100 * row.loss_interval[0], '.1f')}, " \
                   f"{_fmt(100 * row.loss_interval[1], '.1f')}]"
        else:
            loss = "-"
        principal = f"{row.principal} ({row.severity})" if row.principal else ""
        screen = f"{100 * row.screen_score:.1f} %" if row.screen_score == row.screen_score else "-"
        table.add_row(f"{row.rank}{'≈' if row.tied_with_previous else ''}", literal(row.job), literal(row.instance),
                      literal(row.mechanism), literal(principal), loss, screen,
                      literal(row.error or ", ".join(row.flags)),  # values as Text: no markup parsed in them
                      style="red" if row.error else None)
    SafeConsole().print(table)


@app.command("fleet")
@remote.with_connection_options
def fleet_command(
    prometheus: Annotated[str, typer.Option("--prometheus", help="Base URL of a Prometheus-compatible API (Prometheus, Thanos, Mimir, VictoriaMetrics).")],
    selector: Annotated[str, typer.Option(
        "--selector", help="Label matchers for the endpoints, e.g. '{job=\"vllm\"}' (default: every endpoint with "
                           "radiance, vLLM or SGLang metrics; stderr says how many of each were taken).")] = "",
    start: Annotated[Optional[str], typer.Option("--start", help="Window start (Unix seconds or RFC 3339; default --end minus --window).")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Window end (Unix seconds or RFC 3339; default now).")] = None,
    window: remote.WindowOpt = "2h",
    examine: Annotated[int, typer.Option("--examine", help="Besides every flagged endpoint, census from raw samples the K others the screen ranks worst.")] = 20,
    step: Annotated[str, typer.Option("--step", help="The screen's query step: the scrape interval (at most 30s); 'auto' reads it from the store (the median over endpoints).")] = "auto",
    stride: Annotated[Optional[str], typer.Option("--stride", help="Sum every n-th scrape in the screen (default: every one, = --step); a long window over many endpoints costs the store 1/n.")] = None,
    max_points: Annotated[int, typer.Option("--max-points", help="Query steps per screen query; a longer window is screened in chunks.")] = 11000,
    recorded: Annotated[bool, typer.Option("--recorded", help="Screen from the series that `pdcensus promql --rules --window 1m` records instead of raw expressions.")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Queries (screen) and batches (examine) in flight at once.")] = 4,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Endpoints pulled together when examined (for a window over 2 h, fewer: at most this many endpoint x 2 h per pull).")] = 25,
    screen_only: Annotated[bool, typer.Option("--screen-only", help="Stop after the screen: examine nothing, rank by the screen's estimate.")] = False,
    state: Annotated[Optional[Path], typer.Option("--state", help="Write each finished stage to this JSON file.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Start from --state FILE where the last run stopped.")] = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Write the fleet page here; the examined endpoints' reports go beside it in NAME-reports/.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object: ranking, screen rows and the examined census objects.")] = False,
    connection: remote.ConnectionOptions = remote.ConnectionOptions(),
) -> None:
    """Screen every endpoint under --selector in the store, census the worst, and rank by lost decode share.

    Exit 0 when every endpoint was screened (whatever was found); 3 when the store answered nothing
    for some endpoint (each is listed with its reason); 4 when the store cannot be reached.
    """
    from pdcensus.errors import UsageError
    from pdcensus.fleet import ScreenOptions, census_fleet

    t0, t1 = remote.window(start, end, window)
    measure_step = step == "auto"
    step_seconds = 15.0 if measure_step else parse_duration(step)
    if not 0 < step_seconds <= 30:
        raise UsageError(f"--step must be 'auto' or positive and at most 30s (the runbook's bucket step), got {step!r}")
    reports_dir = html.with_name(html.stem + "-reports") if html is not None else None
    if reports_dir is not None:
        reports_dir.mkdir(parents=True, exist_ok=True)
    stride_seconds = parse_duration(stride) if stride is not None else None
    if stride_seconds is not None and not measure_step and (stride_seconds < step_seconds or stride_seconds % step_seconds):
        raise UsageError(f"--stride must be a whole multiple of --step ({step}), got {stride!r}")
    options = ScreenOptions(step_seconds=step_seconds, max_points=max_points, concurrency=concurrency,
                            recorded=recorded, stride_seconds=stride_seconds, measure_step=measure_step)
    with connection.overall_deadline():
        result = census_fleet(prometheus, selector=selector, start=t0, end=t1, examine=examine,
                              concurrency=concurrency, batch_size=batch_size, auth=connection.auth(),
                              timeout=connection.timeout_seconds, screen_options=options, state_path=state,
                              resume=resume, html_dir=reports_dir, progress=_StageProgress(),
                              screen_only=screen_only)
    if not selector.strip():
        print(escape_controls(f"fleet: no --selector: {_taken(result)}"), file=sys.stderr)
    for warning in result.warnings:
        print(escape_controls(f"warning: {warning}"), file=sys.stderr)
    for outcome in result.examined:
        for warning in outcome.warnings:
            print(escape_controls(f"warning: {outcome.instance}: {warning}"), file=sys.stderr)
    if html is not None and reports_dir is not None:
        from pdcensus.fleet.page import write_fleet_page

        write_fleet_page(result, html, reports_href=reports_dir.name)
        print(escape_controls(f"wrote {html}"), file=sys.stderr)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), allow_nan=False))
    else:
        _table(result)
    unscreened = [r for r in result.screen if r.error is not None]
    if unscreened:
        print(escape_controls(f"error: {len(unscreened)} endpoint(s) not screened: "
                              + "; ".join(f"{r.instance}: {r.error}" for r in unscreened[:5])), file=sys.stderr)
        raise typer.Exit(3)
