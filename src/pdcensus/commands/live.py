"""`pdcensus record` (direct scrapes into a journal, or `--fpm` per-step records) and `pdcensus collect`.

`record` exits 4 when no scrape succeeded at all (every endpoint down, refused or unknown, said
in one line), 2 on a URL it cannot read as an endpoint. `collect` exits 0 when every requested
channel was collected, 1 when one failed, 4 when the endpoint answered nothing (docs/commands.md).

`record --fpm tcp://HOST:PORT` is the same recorder as `pdcensus fpm record`: it subscribes to
an engine's Forward Pass Metrics publisher and appends every step (the exact step ledger on
engines whose /metrics has no step time), until --duration or Ctrl-C.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app, parse_duration
from pdcensus.errors import SourceUnreachableError, UsageError


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _record_fpm(address: str, out: str, duration: Optional[str], quiet: bool) -> None:
    """Forward Pass Metrics into ``out`` (JSON lines) until ``duration`` or SIGINT/SIGTERM."""
    from pdcensus.sources.fpm import normalize_address, record_fpm

    endpoint = normalize_address(address)
    seconds = parse_duration(duration) if duration is not None else FOREVER_SECONDS
    if seconds <= 0:
        raise UsageError(f"--duration {duration!r} must be above 0")
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    if not quiet:
        until = f"for {duration}" if duration is not None else "until Ctrl-C"
        print(f"recording forward-pass metrics from {endpoint} into {out} {until}", file=sys.stderr)
    try:
        summary = record_fpm(endpoint, out, seconds, stop=stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    typer.echo(f"{summary.stored} records ({summary.heartbeats} idle heartbeats) to {summary.path}; "
               f"{summary.rejected} rejected, {summary.sequence_gaps} missing by sequence")
    if summary.received == 0:
        typer.echo(f"warning: nothing arrived from {endpoint}; is the engine's FPM port enabled?", err=True)


FOREVER_SECONDS = 10 * 365 * 86400.0  # "until Ctrl-C": the recorder needs a finite deadline
DEFAULT_INTERVAL = "15s"
DEFAULT_JOB = "pdcensus-record"


@app.command()
def record(
    urls: Annotated[Optional[list[str]], typer.Argument(help="Endpoint URLs to scrape, e.g. http://127.0.0.1:7770/metrics.")] = None,
    out: Annotated[str, typer.Option("--out", help="Journal file to write (resumed if it exists), e.g. run.pdrec; with --fpm, a JSON-lines file appended to.")] = "",
    fpm: Annotated[Optional[str], typer.Option("--fpm", help="Record Forward Pass Metrics from tcp://HOST:PORT (an engine's FPM publisher, e.g. vLLM --forward-pass-metrics-port) instead of scraping URLs.")] = None,
    interval: Annotated[Optional[str], typer.Option("--interval", help="Scrape interval, e.g. 15s (default 15s; not with --fpm).")] = None,
    duration: Annotated[Optional[str], typer.Option("--duration", help="Stop after this long (default: until Ctrl-C).")] = None,
    job: Annotated[Optional[str], typer.Option("--job", help="The job label every sample gets (default pdcensus-record; not with --fpm).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress line.")] = False,
) -> None:
    """Scrape URLs every interval into a crash-safe journal that `census` reads (finished or not).

    With --fpm, record an engine's Forward Pass Metrics instead (`pdcensus fpm ledger` reads them).
    """
    from pdcensus.sources.recorder import JournalWriter, ScrapeOutcome, parse_target
    from pdcensus.sources.recorder import record as run_record

    if not out:
        raise UsageError("--out is required: the file to record into")
    if fpm is not None:
        if urls:
            raise UsageError(f"give endpoint URLs or --fpm, not both (got {' '.join(urls)!r} and --fpm {fpm!r})")
        if interval is not None:
            raise UsageError(f"--interval {interval!r} does not apply to --fpm: the FPM recorder stores every "
                             "step as the engine publishes it, so there is no scrape interval")
        if job is not None:
            raise UsageError(f"--job {job!r} does not apply to --fpm: a forward-pass record has no job label "
                             "(it is per step, not a Prometheus sample)")
        _record_fpm(fpm, out, duration, quiet)
        return
    if not urls:
        raise UsageError("nothing to record: give endpoint URLs to scrape, or --fpm tcp://HOST:PORT")
    targets = [parse_target(u) for u in urls]
    interval_seconds = parse_duration(interval if interval is not None else DEFAULT_INTERVAL)
    duration_seconds = parse_duration(duration) if duration is not None else None
    tty = sys.stderr.isatty()
    state = {"round": -1, "up": 0, "down": 0}
    answered: set[str] = set()  # instances with at least one scrape up
    last_error: dict[str, str] = {}

    def started(writer: JournalWriter) -> None:
        if writer.resumed:
            dropped = f"; cut a torn tail of {writer.dropped_bytes} bytes" if writer.dropped_bytes else ""
            print(f"resuming {out}: {writer.blocks} scrape(s) kept{dropped}", file=sys.stderr)
        else:
            print(f"recording {len(targets)} endpoint(s) every {interval_seconds:g}s into {out}", file=sys.stderr)

    def progress(o: ScrapeOutcome) -> None:
        state["up" if o.up else "down"] += 1
        if o.up:
            answered.add(o.target.instance)
        else:
            last_error[o.target.instance] = o.error
        if quiet:
            return
        stamp = time.strftime("%H:%M:%S", time.localtime(o.time))
        what = f"up, {o.samples} samples, {o.duration_seconds * 1000:.0f} ms" if o.up else f"DOWN: {o.error}"
        line = (f"[{o.round + 1}] {stamp} {o.target.instance} {what} | file {_human_bytes(o.file_bytes)}"
                f" | scrapes up {state['up']} down {state['down']}")
        if tty:
            print("\r\033[K" + line, end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        return await run_record(
            targets, out, interval_seconds=interval_seconds, duration_seconds=duration_seconds,
            job=job if job is not None else DEFAULT_JOB,
            on_scrape=progress, on_start=started, stop=stop,
        )

    # A file-size limit must come back as EFBIG (a clear error), not kill us with SIGXFSZ.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        rounds = asyncio.run(main())
    finally:
        if tty and not quiet:
            print(file=sys.stderr)
    print(f"recorded {rounds} round(s) into {out}: scrapes up {state['up']}, down {state['down']}", file=sys.stderr)
    silent = [t for t in targets if t.instance not in answered and t.instance in last_error]
    if silent and not answered:
        first = silent[0]
        raise SourceUnreachableError(f"no scrape succeeded: {len(silent)} endpoint(s) never answered, "
                                     f"{state['down']} scrape(s) failed (first: {first.url}: {last_error[first.instance]})")
    for target in silent:
        print(f"warning: {target.url} never answered ({last_error[target.instance]}); the others did",
              file=sys.stderr)


@app.command()
def collect(
    out: Annotated[str, typer.Option("--out", help="Bundle to write, e.g. evidence.tar.gz.")],
    pid: Annotated[Optional[int], typer.Option("--pid", help="The engine's pid (argv from /proc/PID/cmdline).")] = None,
    process_name: Annotated[Optional[str], typer.Option("--process-name", help="Find the engine's pid by name.")] = None,
    url: Annotated[str, typer.Option("--url", help="The endpoint's base URL (/stats, /diagnostics, /metrics).")] = "http://127.0.0.1:7770",
    log_cmd: Annotated[Optional[str], typer.Option("--log-cmd", help="Command printing the engine's log, run without a shell as you, e.g. 'podman logs SVC'.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds for each HTTP item, its redirects and Retry-After waits included.")] = 10.0,
    skip: Annotated[Optional[list[str]], typer.Option("--skip", help="An HTTP item not to ask for (stats, diagnostics or metrics; repeatable), e.g. on an engine that serves no /stats.")] = None,
) -> None:
    """Collect the evidence the runbook reads on the endpoint's host into one .tar.gz bundle.

    Every item asked for is a requested channel. Exit 0: all were collected.

    Exit 1: one failed (the bundle holds the rest; its manifest says why).

    Exit 4: the URL answered nothing (refused, or no answer in time). Exit 2: usage. Exit 3: no bundle written.
    """
    from pdcensus.sources.bundle import HTTP_ITEMS, collect_bundle

    manifest = collect_bundle(out, pid=pid, process_name=process_name, url=url, log_cmd=log_cmd,
                              timeout_seconds=timeout, skip=tuple(skip or ()))
    for name, item in manifest["items"].items():
        if item["status"] == "ok":
            typer.echo(f"  ok      {name:<12} {item['bytes']:>9} bytes  from {item['source']}")
        else:
            typer.echo(f"  FAILED  {name:<12} {item['error']}  ({item['source']})")
    typer.echo(f"wrote {out}")
    failed = [name for name, item in manifest["items"].items() if item["status"] != "ok"]
    http = [item for name, item in manifest["items"].items() if name in HTTP_ITEMS]
    if http and all(item.get("unreachable") for item in http):
        typer.echo(f"error: {manifest['url']} could not be reached ({http[0]['error']}); the bundle holds only "
                   "what did not need it", err=True)
        raise SystemExit(4)  # SystemExit, not typer.Exit: the app runs with standalone_mode=False
    if failed:
        typer.echo(f"error: {len(failed)} requested channel(s) failed: {', '.join(failed)} (see the lines above; "
                   "--skip an HTTP item the engine does not serve)", err=True)
        raise SystemExit(1)
