"""The command line: a thin typer shell over the library (one library call + rendering each).

Exit status: 0 the command ran (whatever the census found), 2 usage, 3 unreadable or
unusable data (one line ``error: ...``), 4 a source could not be reached. ``--debug``
shows the traceback instead of the one-line error. A window whose end is not after its start
is a usage error on every command; ``record`` exits 4 when no scrape succeeded. Gates add
their own: ``lint`` 1 on an error finding; ``verify-arm`` 1 not engaged, 5 engaged but off the
prediction, 3 inconclusive; ``collect`` 1 when a requested channel failed (docs/commands.md).

The ``app`` and the shared parsers live in :mod:`pdcensus.commands.base`; this module
imports every command module (which registers its commands on ``app``) and maps errors to
exit codes. Nothing imports this module back.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.exceptions import Abort, Exit, TyperException

from pdcensus.commands import advice, census, demo, explain, export, fleet, fpm, live, query, serve, sim, whatif  # noqa: F401
from pdcensus.commands.base import DEBUG, app
from pdcensus.report.safe_console import escape_controls
from pdcensus.errors import CensusError

__all__ = ["app", "click_group", "main"]


def click_group() -> TyperGroup:
    """The command group typer builds from ``app``, with plain switches shown without a type."""
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    _blank_switch_types(group)
    return group


def _blank_switch_types(command: TyperCommand | TyperGroup) -> None:
    help_option = command.get_help_option(typer.Context(command))  # built once, then cached on the command
    for param in [*command.params, help_option]:
        if isinstance(param, TyperOption) and param.is_bool_flag:
            param.metavar = ""  # typer would print "<bool>" beside --json, --strict, --help, ...
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            assert isinstance(sub, (TyperCommand, TyperGroup))
            _blank_switch_types(sub)


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: map CensusError and click usage errors to exit codes."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        code = click_group().main(args=args, standalone_mode=False, prog_name="pdcensus")
        if isinstance(code, int) and code != 0:
            raise SystemExit(code)
    except CensusError as exc:
        if DEBUG["on"] or "--debug" in args:
            raise
        print(escape_controls(f"error: {exc}"), file=sys.stderr)
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
            print(escape_controls(f"error: {exc.format_message()}"), file=sys.stderr)
        raise SystemExit(2) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # a bug: still one line, the traceback behind --debug
        if DEBUG["on"] or "--debug" in args:
            raise
        print(escape_controls(f"error: internal error: {type(exc).__name__}: {exc} "
                              "(run with --debug for the traceback)"), file=sys.stderr)
        raise SystemExit(1) from None
