"""Options shared by the commands that read a Prometheus-compatible server.

``--prometheus URL`` with ``--selector``, the window, and auth given only as the NAME of an
environment variable or the PATH of a file (a secret on the command line would land in
shell history and ``/proc/PID/cmdline``).
"""

from __future__ import annotations

import time as _time
from pathlib import Path
from typing import Annotated, Optional

import typer

from pdcensus.cli import parse_duration, parse_time
from pdcensus.series.model import Recording

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
BearerEnvOpt = Annotated[
    Optional[str], typer.Option("--bearer-token-env", help="NAME of an environment variable holding a bearer token.")
]
BearerFileOpt = Annotated[
    Optional[Path], typer.Option("--bearer-token-file", help="File holding a bearer token.")
]
BasicUserOpt = Annotated[Optional[str], typer.Option("--basic-user", help="Basic-auth user name.")]
BasicPasswordEnvOpt = Annotated[
    Optional[str], typer.Option("--basic-password-env", help="NAME of an environment variable holding the password.")
]
BasicPasswordFileOpt = Annotated[
    Optional[Path], typer.Option("--basic-password-file", help="File holding the basic-auth password.")
]
CaFileOpt = Annotated[Optional[Path], typer.Option("--ca-file", help="CA bundle to verify the server's TLS certificate.")]
InsecureOpt = Annotated[
    bool, typer.Option("--insecure-skip-verify", help="Do not verify the server's TLS certificate.")
]
TimeoutOpt = Annotated[str, typer.Option("--timeout", help="Per-request timeout, e.g. 30s.")]


def auth_config(
    bearer_token_env: str | None = None,
    bearer_token_file: Path | None = None,
    basic_user: str | None = None,
    basic_password_env: str | None = None,
    basic_password_file: Path | None = None,
    ca_file: Path | None = None,
    insecure_skip_verify: bool = False,
) -> object:
    """The AuthConfig for these options (names and paths only; the secret is read later)."""
    from pdcensus.sources.prometheus_http import AuthConfig

    return AuthConfig(
        bearer_token_env=bearer_token_env,
        bearer_token_file=bearer_token_file,
        basic_user=basic_user,
        basic_password_env=basic_password_env,
        basic_password_file=basic_password_file,
        ca_file=ca_file,
        insecure_skip_verify=insecure_skip_verify,
    )


def window(start: str | None, end: str | None, default_window: str) -> tuple[float, float]:
    """``(start, end)`` in Unix seconds: end defaults to now, start to end - window."""
    end_s = parse_time(end) if end else _time.time()
    start_s = parse_time(start) if start else end_s - parse_duration(default_window)
    return start_s, end_s


def fetch(
    url: str, selector: str, start: float, end: float, auth: object, timeout: str,
    names: set[str] | None = None,
) -> tuple[Recording, list[str]]:
    """Raw samples of ``names`` (default: what the census reads) under ``selector``."""
    from pdcensus.series.profiles import census_sample_names
    from pdcensus.sources.prometheus import fetch_recording

    return fetch_recording(
        url, selector=selector, start=start, end=end, names=names if names is not None else census_sample_names(),
        auth=auth, timeout=parse_duration(timeout),
    )
