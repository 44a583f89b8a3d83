"""`pdcensus census`: the census of a recording or a Prometheus, as a terminal report, JSON, HTML or Markdown."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from pdcensus.report.safe_console import escape_controls
from pdcensus.commands import remote
from pdcensus.commands.base import app, parse_window
from pdcensus.errors import UsageError

if TYPE_CHECKING:
    from pdcensus.advice.endpoint_report import EndpointReport


@app.command()
@remote.with_connection_options
def census(
    source: Annotated[Optional[str], typer.Argument(
        help="Recording file (OpenMetrics/Prometheus text/Parquet/.pdrec) or sim output dir; omit with --prometheus."
    )] = None,
    instance: Annotated[Optional[str], typer.Option("--instance", help="Endpoint instance (default: every engine endpoint).")] = None,
    start: Annotated[Optional[str], typer.Option("--start", help="Window start (Unix seconds or RFC 3339).")] = None,
    end: Annotated[Optional[str], typer.Option("--end", help="Window end (Unix seconds or RFC 3339).")] = None,
    segment: Annotated[Optional[int], typer.Option("--segment", help="Shape to analyse, 1-based (default: the latest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (schema pdcensus/census/v2).")] = False,
    full: Annotated[bool, typer.Option("--full", help="Every section of the terminal report, not only the short "
                                                     "view (headline, evidence, advice, verify).")] = False,
    html: Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained HTML report (plots inline).")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Also write a Markdown report, plots as SVG files beside it.")] = None,
    evidence: Annotated[Optional[str], typer.Option(
        "--evidence", help="Side channels for the advice: a bundle from `pdcensus collect` or a sim output dir "
                           "(default: the SOURCE dir when it has cmdline/boot.log/stats.json).")] = None,
    target_decode_share: Annotated[float, typer.Option(
        "--target-decode-share", help="Share of the idle per-stream decode rate to keep during prefill "
                                      "(picks N for --prefill-interleave).")] = 0.5,
    client_records: Annotated[Optional[str], typer.Option(
        "--client-records", help="A benchmark's per-request records (InferenceX harness CSV[.gz], GuideLLM or vLLM "
                                 "benchmark_serving result JSON): TTFT and TPOT by the census's prefill buckets.")] = None,
    cmdline: Annotated[Optional[str], typer.Option(
        "--cmdline", help="The engine's deployed argv for the advice: a saved /proc/PID/cmdline (NUL-separated), a "
                          "one-line text file, or a sim dir holding `cmdline` (wins over --evidence's argv).")] = None,
    pid: Annotated[Optional[int], typer.Option("--pid", help="Read the deployed argv from /proc/PID/cmdline.")] = None,
    twin: Annotated[bool, typer.Option(
        "--twin/--no-twin", help="Run the calibrated twin (`pdcensus whatif`, 2 seeds) on each recommendation that "
                                 "is not minor: its prediction leads where it calibrates on the recording, the closed "
                                 "form's arithmetic beside it, the one to trust named (a few seconds per knob; "
                                 "--no-twin: the closed form alone).")] = True,
    prometheus: remote.PrometheusOpt = None,
    selector: Annotated[Optional[str], typer.Option(
        "--selector", help="Label matchers for the endpoints, e.g. '{job=\"vllm\"}' (default: every endpoint with "
                           "a known engine's metrics; stderr says which were taken).")] = None,
    window: remote.WindowOpt = "6h",
    connection: remote.ConnectionOptions = remote.ConnectionOptions(),
) -> None:
    """Which mechanism makes decode collapse while another session prefills, how sure, and which knob acts on it.

    Exit 0: the census ran (also when some endpoints of several could not be censused: each is one
    line `endpoint I: not censused: REASON`, and an entry with `"error"` in --json). Exit 2: usage. Exit 3: the data cannot be used, or an --html/--markdown
    file cannot be written (the report is printed first; the file is written whole or not at all).
    Exit 4: the --prometheus server cannot be reached within --timeout/--deadline.
    """
    from pdcensus import api
    from pdcensus.census.model import reports_to_dict

    if not 0.0 < target_decode_share < 1.0:
        raise UsageError(f"--target-decode-share must be between 0 and 1 (exclusive), got {target_decode_share}")
    if cmdline is not None and pid is not None:
        raise UsageError("give --cmdline PATH or --pid PID, not both")
    argv = None
    if cmdline is not None or pid is not None:
        from pdcensus.advice.evidence import read_argv

        argv = read_argv(cmdline, pid)
    if selector is not None and not prometheus:
        raise UsageError("--selector goes with --prometheus URL (a recording is chosen from with --instance)")
    if prometheus:
        if source is not None:
            raise UsageError("give a SOURCE or --prometheus URL, not both")
        if client_records is not None:
            raise UsageError("--client-records goes with a recording SOURCE (its clock is aligned to the recording's)")
        t0, t1 = remote.window(start, end, window)
        with connection.overall_deadline():
            if selector is None:
                found = api.discover_prometheus(prometheus, start=t0, end=t1, auth=connection.auth(),
                                                timeout_seconds=connection.timeout_seconds)
                print(escape_controls(f"census: no --selector: {found.describe()}"), file=sys.stderr)
                selector = found.selector()
            reports = api.census_prometheus(prometheus, selector=selector, start=t0, end=t1, instance=instance,
                                            segment=segment, auth=connection.auth(),
                                            timeout_seconds=connection.timeout_seconds, evidence=evidence,
                                            target_decode_share=target_decode_share, argv=argv, twin=twin,
                                            progress=_say)
    elif source is None:
        raise UsageError("give a recording (file or sim output dir) or --prometheus URL")
    else:
        t0_file, t1_file = parse_window(start, end)
        reports = api.census_all(source, instance=instance, start=t0_file, end=t1_file, segment=segment,
                                 evidence=evidence if evidence is not None else api.AUTO,
                                 target_decode_share=target_decode_share, client_records=client_records,
                                 argv=argv, twin=twin, progress=_say)
    for warning in reports[0].source_warnings if reports else ():
        print(escape_controls(f"warning: {warning}"), file=sys.stderr)
    if as_json:
        typer.echo(json.dumps(reports_to_dict(reports), allow_nan=False))
    else:
        from pdcensus.report.safe_console import SafeConsole

        from pdcensus.report.terminal import render

        console = SafeConsole()  # label values like ":smile:" stay text
        for report in reports:
            render(report, console, full=full)
        for failure in reports[0].failed_endpoints if reports else ():
            # one line each: the good endpoints' reports stand, the run exits 0
            console.print(f"endpoint {failure.instance}: not censused: {failure.reason}", markup=False,
                          highlight=False, soft_wrap=True)
    _write_files(reports, html, markdown, say=not as_json)


def _say(line: str) -> None:
    """Progress of long work, on stderr (stdout stays the report or the JSON)."""
    print(escape_controls(f"census: {line}"), file=sys.stderr)


def _write_files(reports: list[EndpointReport], html: Path | None, markdown: Path | None, say: bool) -> None:
    """Write --html and --markdown after the report is printed: one that fails is one line, exit 3."""
    from pdcensus.errors import ReportWriteError

    failed: list[ReportWriteError] = []
    for path, kind in ((html, "html"), (markdown, "markdown")):
        if path is None:
            continue
        try:
            if kind == "html":
                from pdcensus.report.html import write_html

                write_html(reports, path)
            else:
                from pdcensus.report.markdown import write_markdown

                write_markdown(reports, path)
        except ReportWriteError as exc:
            failed.append(exc)
            continue
        if say:
            print(f"wrote {path}")
    if len(failed) > 1:
        print(escape_controls(f"error: {failed[0]}"), file=sys.stderr)
    if failed:
        raise failed[-1]
