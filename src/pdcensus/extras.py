"""The optional extras, checked before a command that needs one starts.

The census, the simulator's files and the reports need only the core dependencies. Two
features pull in more, kept out of the core so that a notebook importing pdcensus does not
install a web server: ``pdcensus serve`` (the live endpoint: starlette, uvicorn, httptools,
uvloop, and pyzmq for its Forward Pass Metrics publisher) and the FPM recorder
(``pdcensus fpm record``, ``pdcensus record --fpm``: pyzmq). Without the extra such a command
ends with one ``error:`` line naming it, not an ImportError traceback.
"""

from __future__ import annotations

import importlib.util
import sys

from pdcensus.errors import MissingExtraError

SERVE_MODULES = ("starlette", "uvicorn", "httptools", "zmq") + (() if sys.platform == "win32" else ("uvloop",))
FPM_MODULES = ("zmq",)


def require_extra(what: str, extra: str, modules: tuple[str, ...]) -> None:
    """Raise :class:`MissingExtraError` for the first of ``modules`` that cannot be imported."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(what, extra, module)
