"""What every command shares: the Typer ``app``, the root options and the argument parsers.

``pdcensus.cli`` (the entry point) and each ``pdcensus.commands.*`` module import this module,
and nothing here imports them back: the command line is a tree, not a circle.

A command imports the library layers it drives (census, simulator, reports, PromQL) when it
runs, not at the top of its module: the shell with every command registered loads in about
0.4 s, against 1.3-1.5 s with every layer loaded (``python -c "import ..."`` on the 2-core
development machine), so ``--help``, ``--version`` and a usage error answer at once. Small
modules (errors, the duration grammar, the typed options) are imported at the top.
"""

from __future__ import annotations

from datetime import datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from pdcensus.errors import UsageError
from pdcensus.series.durations import parse_api_duration_seconds

app = typer.Typer(
    name="pdcensus",
    help=(
        "Decode/prefill interference census for LLM serving endpoints: which mechanism makes "
        "decode collapse while another session prefills (step-time sharing, eviction with a "
        "lagged tail, a preemption stall, or nothing), how sure we are, and which knob acts on it."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEBUG = {"on": False}


def package_version() -> str:
    try:
        return version("pdcensus")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"pdcensus {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
    show_version: Annotated[bool, typer.Option("--version", help="Print the version and exit.",
                                               callback=_print_version, is_eager=True)] = False,
) -> None:
    DEBUG["on"] = debug


def parse_duration(text: str) -> float:
    """A duration option -> seconds: plain seconds (``90``) or Prometheus's grammar (``15s``, ``1h30m``, ``2d``)."""
    try:
        return parse_api_duration_seconds(text.strip())
    except ValueError:
        raise UsageError(f"bad duration {text!r}; use e.g. 15s, 90m, 1h30m, 2d or plain seconds "
                         "(Prometheus's grammar: units y w d h m s ms, largest first, no fractions)") from None


def parse_time(text: str) -> float:
    """RFC 3339 or Unix seconds -> Unix seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(f"bad time {text!r}; use Unix seconds or RFC 3339") from None


def parse_window(start: str | None, end: str | None) -> tuple[float | None, float | None]:
    """``--start``/``--end`` -> Unix seconds (None where not given); one that ends before it starts is exit 2.

    Every command that takes a window reads it here, so a window that ends at or before its
    start is the same usage error on a file and on ``--prometheus``.
    """
    start_s = parse_time(start) if start else None
    end_s = parse_time(end) if end else None
    check_window(start_s, end_s)
    return start_s, end_s


def check_window(start: float | None, end: float | None) -> None:
    """UsageError unless the window ends after it starts (either end may be open)."""
    if start is not None and end is not None and not end > start:
        raise UsageError(f"the window must end after it starts: --start {start:.3f} is not before --end {end:.3f}")


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``--set FLAG=VALUE`` pairs -> {'--flag': 'value'}."""
    out: dict[str, str] = {}
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"--set wants FLAG=VALUE, got {item!r}")
        flag, value = item.split("=", 1)
        flag = flag.strip()
        if not flag.startswith("--"):
            flag = "--" + flag
        out[flag] = value.strip()
    return out
