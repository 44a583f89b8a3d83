"""Options shared by the commands that read a Prometheus-compatible server, declared once.

``--prometheus URL`` with ``--selector`` and the window are typed aliases each command puts in
its signature (their defaults differ per command). The nine connection options (auth given
only as the NAME of an environment variable or the PATH of a file: a secret on the command
line would land in shell history and ``/proc/PID/cmdline``; the TLS choices; the per-request and overall deadlines) are
one typed object, :class:`ConnectionOptions`: a command declares a ``connection:
ConnectionOptions`` parameter and :func:`with_connection_options` puts the nine options in
its place, so ``census``, ``query`` and ``fleet`` share one declaration and receive one value
that yields the :class:`~pdcensus.sources.prometheus_http.AuthConfig`.
"""

from __future__ import annotations

import functools
import inspect
import time as _time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from pdcensus.commands.base import check_window, parse_duration, parse_window

if TYPE_CHECKING:  # the HTTP client (httpx) loads only when a command reaches a server
    from pdcensus.series.model import Recording
    from pdcensus.sources.prometheus_http import AuthConfig

PrometheusOpt = Annotated[
    Optional[str],
    typer.Option("--prometheus", help="Base URL of a Prometheus-compatible API (Prometheus, Thanos, Mimir, "
                 "VictoriaMetrics), e.g. http://127.0.0.1:9090."),
]
SelectorOpt = Annotated[
    str, typer.Option("--selector", help="Label matchers for the endpoints, e.g. '{job=\"radiance\"}'.")
]
WindowOpt = Annotated[
    str, typer.Option("--window", help="With --prometheus and no --start: how far back from --end (default now).")
]


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach the server: where the credentials are (never the secrets), TLS, the timeout."""

    bearer_token_env: Annotated[Optional[str], typer.Option(
        "--bearer-token-env", help="NAME of an environment variable holding a bearer token.")] = None
    bearer_token_file: Annotated[Optional[Path], typer.Option(
        "--bearer-token-file", help="File holding a bearer token.")] = None
    basic_user: Annotated[Optional[str], typer.Option("--basic-user", help="Basic-auth user name.")] = None
    basic_password_env: Annotated[Optional[str], typer.Option(
        "--basic-password-env", help="NAME of an environment variable holding the password.")] = None
    basic_password_file: Annotated[Optional[Path], typer.Option(
        "--basic-password-file", help="File holding the basic-auth password.")] = None
    ca_file: Annotated[Optional[Path], typer.Option(
        "--ca-file", help="CA bundle to verify the server's TLS certificate.")] = None
    insecure_skip_verify: Annotated[bool, typer.Option(
        "--insecure-skip-verify", help="Do not verify the server's TLS certificate.")] = False
    timeout: Annotated[str, typer.Option("--timeout", help=(
        "Deadline for each request as a whole (connect, headers, the whole body, its retries), e.g. 30s; "
        "a server that trickles its answer is cut off here."))] = "30s"
    deadline: Annotated[str, typer.Option("--deadline", help=(
        "Deadline for all the requests of the command together, e.g. 5m (0: none). Past it the "
        "command stops with exit 4."))] = "0"

    def auth(self) -> AuthConfig:
        """The AuthConfig for these options (names and paths only; the secret is read later)."""
        from pdcensus.sources.prometheus_http import AuthConfig

        return AuthConfig(
            bearer_token_env=self.bearer_token_env, bearer_token_file=self.bearer_token_file,
            basic_user=self.basic_user, basic_password_env=self.basic_password_env,
            basic_password_file=self.basic_password_file, ca_file=self.ca_file,
            insecure_skip_verify=self.insecure_skip_verify,
        )

    @property
    def timeout_seconds(self) -> float:
        return parse_duration(self.timeout)

    def overall_deadline(self) -> AbstractContextManager[None]:
        """A context inside which every request stops once ``--deadline`` has passed."""
        from pdcensus.sources.limits import overall_deadline

        return overall_deadline(None if self.deadline.strip() in ("", "0") else parse_duration(self.deadline))


def _connection_parameters() -> list[inspect.Parameter]:
    hints = inspect.get_annotations(ConnectionOptions, eval_str=True)
    return [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
            for f in fields(ConnectionOptions)]


_CONNECTION_PARAMETERS = _connection_parameters()


def with_connection_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command``'s ``connection: ConnectionOptions`` parameter to typer as the nine options it is built from."""
    signature = inspect.signature(command, eval_str=True)
    if "connection" not in signature.parameters:
        raise TypeError(f"{command.__name__} has no 'connection' parameter")
    kept = [p for p in signature.parameters.values() if p.name != "connection"]
    names = [p.name for p in _CONNECTION_PARAMETERS]

    @functools.wraps(command)
    def wrapper(**kwargs: object) -> None:
        connection = ConnectionOptions(**{name: kwargs.pop(name) for name in names})  # type: ignore[arg-type]
        command(connection=connection, **kwargs)

    parameters = kept + _CONNECTION_PARAMETERS
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return wrapper


def window(start: str | None, end: str | None, default_window: str) -> tuple[float, float]:
    """``(start, end)`` in Unix seconds: end defaults to now, start to end - window."""
    start_given, end_given = parse_window(start, end)
    end_s = end_given if end_given is not None else _time.time()
    start_s = start_given if start_given is not None else end_s - parse_duration(default_window)
    check_window(start_s, end_s)  # a --start after now, or a --window of 0
    return start_s, end_s


def fetch(
    url: str, selector: str, start: float, end: float, connection: ConnectionOptions,
    names: set[str] | None = None,
) -> tuple[Recording, list[str]]:
    """Raw samples of ``names`` (default: what the census reads) under ``selector``."""
    from pdcensus.series.profiles import census_sample_names
    from pdcensus.sources.prometheus import fetch_recording

    with connection.overall_deadline():
        return fetch_recording(
            url, selector=selector, start=start, end=end, names=names if names is not None else census_sample_names(),
            auth=connection.auth(), timeout=connection.timeout_seconds,
        )
