"""`pdcensus serve SCENARIO`: the engine model as a live endpoint (metrics, side channels, OpenAI API)."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app, parse_sets
from pdcensus.extras import SERVE_MODULES, require_extra


@app.command("serve")
def serve_command(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see `pdcensus scenarios`); its last engine process is served.")],
    port: Annotated[int, typer.Option("--port", help="Port to listen on; 0 picks a free one (printed).")] = 7770,
    host: Annotated[str, typer.Option("--host", help="Address to bind (keep 127.0.0.1 unless you mean to expose it).")] = "127.0.0.1",
    speed: Annotated[float, typer.Option("--speed", help="Engine seconds per wall second (15 = a minute of engine time in 4 s).")] = 1.0,
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="Engine flag override FLAG=VALUE (repeatable).")] = None,
    no_background: Annotated[bool, typer.Option("--no-background", help="Serve only real clients, without the scenario's own traffic.")] = False,
    seed: Annotated[int, typer.Option("--seed", help="Random seed of the background traffic.")] = 0,
    profile: Annotated[str, typer.Option("--profile", help="Metric set: radiance, vllm (plain vLLM V1 names), sglang or tgi (those engines' own names).")] = "radiance",
    drain_seconds: Annotated[float, typer.Option("--drain-seconds", help="On SIGTERM, how long streams in flight may finish before they are cut.")] = 5.0,
    quiet: Annotated[bool, typer.Option("--quiet", help="Do not print the boot ledger.")] = False,
) -> None:
    """Serve SCENARIO live: /metrics, /stats, /diagnostics and OpenAI-compatible /v1 (stop with SIGTERM)."""
    require_extra("pdcensus serve", "serve", SERVE_MODULES)
    from pdcensus.sim.server import ServeOptions, serve  # here: the serve extra is optional
    from pdcensus.sim.server_clock import LiveEngine

    options = ServeOptions(scenario=scenario, host=host, port=port, speed=speed, background=not no_background,
                           seed=seed, overrides=parse_sets(sets), profile=profile, drain_seconds=drain_seconds)

    def ready(live: LiveEngine, url: str) -> None:
        if not quiet:
            sys.stderr.write(live.boot_log())
            sys.stderr.flush()
        traffic = "its own traffic plus real clients" if options.background else "real clients only"
        typer.echo(f"serving on {url} ({scenario}, speed {speed:g}x, {traffic})")
        sys.stdout.flush()

    live = serve(options, ready)
    typer.echo(f"stopped: {live.served} client request(s) served, {live.cancelled} cut at shutdown", err=True)
