"""`pdcensus lint`, `pdcensus verify-arm` and `pdcensus knobs`: advice commands.

Each is one library call (``pdcensus.advice``, ``pdcensus.lint``) plus rendering. ``lint``
exits 1 when any finding is an error (0 with ``--warn-only``), 2 on a usage error;
``verify-arm`` exits 0 whatever the verdict (the verdict is the output).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app
from pdcensus.errors import UsageError


@app.command()
def lint(
    paths: Annotated[list[str], typer.Argument(help="Files and directories to check: runbooks (Markdown), serve "
                                               "scripts, Kubernetes/Helm/compose YAML, Dockerfiles, systemd "
                                               "units, rules files, Grafana dashboards.")],
    source: Annotated[str, typer.Option("--source", envvar="PDCENSUS_SOURCE",
                                        help="Pinned source: core/config.cpp-shaped C++ or --help text, "
                                        "a directory holding core/config.cpp (or a sim output dir), a git "
                                        "repository (with --ref), or a source tarball.")],
    ref: Annotated[Optional[str], typer.Option("--ref", envvar="PDCENSUS_REF", help="Git tag or commit of --source "
                                               "to read core/config.cpp from (git show REF:core/config.cpp).")] = None,
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="A scrape or recording of the pinned build: "
                                                   "metric names it does not export are findings.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    sarif: Annotated[bool, typer.Option("--sarif", help="Print the findings as a SARIF 2.1.0 log.")] = False,
    warn_only: Annotated[bool, typer.Option("--warn-only", help="Exit 0 even when a finding is an error.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when a finding is an error: the default now, "
                                         "kept for old scripts.")] = False,
) -> None:
    """Check what an arm deploys (flags, enum values, validator bounds, metric names, PromQL) against the pin.

    Exit 1 when a finding is an error, 0 otherwise (--warn-only: always 0); 2 for usage errors.
    """
    from pdcensus.errors import UsageError
    from pdcensus.lint.files import lint_paths
    from pdcensus.lint.output import render_json, render_sarif, render_text, summary

    if as_json and sarif:
        raise UsageError("give --json or --sarif, not both")
    report = lint_paths(paths, source, ref, metrics)
    if sarif:
        typer.echo(json.dumps(render_sarif(report), indent=2))
    elif as_json:
        typer.echo(render_json(report))
    else:
        for line in render_text(report):
            typer.echo(line)
        typer.echo(summary(report), err=True)
    if report.errors and not warn_only:
        # SystemExit, not typer.Exit: the app runs with standalone_mode=False, where click
        # returns an Exit's code instead of exiting with it.
        raise SystemExit(1)


@app.command("verify-arm")
def verify_arm_command(
    before: Annotated[str, typer.Option("--before", help="Recording (file or sim dir) from before the arm.")],
    after: Annotated[str, typer.Option("--after", help="Recording (file or sim dir) from after the arm.")],
    flag: Annotated[str, typer.Option("--flag", help="The knob, FLAG or FLAG=VALUE, e.g. --prefill-interleave=2.")],
    cmdline: Annotated[Optional[str], typer.Option("--cmdline", help="Saved NUL-separated argv, or a sim dir "
                                                   "holding `cmdline` (default: the --after dir's, if any).")] = None,
    pid: Annotated[Optional[int], typer.Option("--pid", help="Read argv from /proc/PID/cmdline.")] = None,
    instance: Annotated[Optional[str], typer.Option("--instance", help="Endpoint instance to verify.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Prove an arm engaged: the flag in argv, then the counter it moves, then the bucket pair."""
    from pdcensus.advice.evidence import read_argv
    from pdcensus.advice.verify import verify_arm
    from pdcensus.sources.load import load_source

    name, _, value = flag.lstrip("-").partition("=")
    if not name:
        raise UsageError(f"--flag wants FLAG or FLAG=VALUE, got {flag!r}")
    if cmdline is not None and pid is not None:
        raise UsageError("give --cmdline PATH or --pid PID, not both")
    argv = None
    if cmdline is not None or pid is not None:
        argv = read_argv(cmdline, pid)
    elif Path(after, "cmdline").is_file():
        argv = read_argv(Path(after, "cmdline"))
    verdict = verify_arm(load_source(before), load_source(after), "--" + name, value or None, argv, instance)
    if as_json:
        typer.echo(json.dumps(verdict.to_dict(), indent=2))
        return
    want = f"{verdict.flag} {verdict.value}" if verdict.value is not None else verdict.flag
    typer.echo(f"arm {want}: {verdict.outcome.value.upper()} — {verdict.reason}")
    for step in verdict.steps:
        typer.echo(f"  {step.name:<12} {step.status.value:<8} {step.detail}")
    if verdict.predicted:
        p, o = verdict.predicted, verdict.observed
        typer.echo(f"  predicted    busy per-stream {p['busy_per_stream_tokens_per_second']:.1f} tok/s, "
                   f"TTFT x{p['ttft_stretch']:.2f} (from the before ledger: chunk step "
                   f"{p['chunk_step_seconds']:.3f} s, decode-only step {p['decode_step_seconds']:.4f} s)")
        replayed = p.get("ttft_p90_ratio_replay")
        typer.echo(f"  predicted    busy TTFT p90 x{replayed:.2f} (replay of the before window's prefill trace)"
                   if replayed is not None and math.isfinite(replayed)
                   else "  predicted    busy TTFT p90: no replay (see --json)")
        typer.echo(f"  observed     busy per-stream {o['busy_per_stream_tokens_per_second']:.1f} tok/s "
                   f"({o['prediction_error']:+.0%} vs predicted), TTFT p90 x{o['ttft_p90_ratio']:.2f}")


@app.command()
def knobs(
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON.")] = False,
) -> None:
    """The knob catalogue: what each knob acts on, its cost, preconditions and rollback env line."""
    from pdcensus.advice.knobs import CATALOGUE

    if as_json:
        typer.echo(json.dumps([k.to_dict() for k in CATALOGUE.values()], indent=2))
        return
    for k in CATALOGUE.values():
        typer.echo(f"{k.flag} {k.argument} — {k.role} (acts on: {', '.join(a.value for a in k.acts_on)})")
        typer.echo(f"    {k.semantics}")
        typer.echo(f"    cost: {k.cost}")
        for pre in k.preconditions:
            typer.echo(f"    needs: {pre}")
        for inter in k.interactions:
            typer.echo(f"    with: {inter}")
        typer.echo(f"    arm/rollback: {k.env_var}=VALUE / {k.rollback_env_line()}; "
                   f"counter: {k.counter or 'none'}")
