"""The command line: a thin typer shell over the library (one library call + rendering each).

Exit status: 0 the command ran (whatever the census found), 2 usage, 3 unreadable or
unusable data (one line ``error: ...``), 4 a source could not be reached. ``--debug``
shows the traceback instead of the one-line error.
"""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from typer.exceptions import Abort, Exit, TyperException

from pdcensus.errors import CensusError

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

_DEBUG = {"on": False}


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")] = False,
) -> None:
    _DEBUG["on"] = debug


def parse_duration(text: str) -> float:
    """'2h', '15s', '90m', '1d', '1h30m' or plain seconds -> seconds."""
    from pdcensus.errors import UsageError

    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    total, num, i = 0.0, "", 0
    matched = False
    while i < len(s):
        ch = s[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        unit = "ms" if s[i:i + 2] == "ms" else ch
        if not num or unit not in units:
            raise UsageError(f"bad duration {text!r}; use e.g. 15s, 90m, 2h, 1d")
        total += float(num) * units[unit]
        num, matched = "", True
        i += len(unit)
    if num or not matched:
        raise UsageError(f"bad duration {text!r}; use e.g. 15s, 90m, 2h, 1d")
    return total


def parse_time(text: str) -> float:
    """RFC 3339 or Unix seconds -> Unix seconds."""
    from datetime import datetime

    from pdcensus.errors import UsageError

    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise UsageError(f"bad time {text!r}; use Unix seconds or RFC 3339") from None


def parse_sets(items: list[str] | None) -> dict[str, str]:
    """``--set FLAG=VALUE`` pairs -> {'--flag': 'value'}."""
    from pdcensus.errors import UsageError

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


# Commands live in pdcensus.commands.* to keep this file thin; importing registers them.
def _register() -> None:
    from pdcensus import commands  # noqa: F401


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: map CensusError and click usage errors to exit codes."""
    _register()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = app(args=args, standalone_mode=False, prog_name="pdcensus")
        if isinstance(code, int) and code != 0:
            raise SystemExit(code)
    except CensusError as exc:
        if _DEBUG["on"] or "--debug" in args:
            raise
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except Abort:
        print("error: aborted", file=sys.stderr)
        raise SystemExit(130) from None
    except TyperException as exc:
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            print(f"error: {exc.format_message()}", file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # a bug: still one line, the traceback behind --debug
        if _DEBUG["on"] or "--debug" in args:
            raise
        print(f"error: internal error: {type(exc).__name__}: {exc} (run with --debug for the traceback)",
              file=sys.stderr)
        raise SystemExit(1) from None

