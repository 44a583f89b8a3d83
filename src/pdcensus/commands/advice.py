"""`pdcensus lint`, `pdcensus verify-arm` and `pdcensus knobs`: advice commands.

Each is one library call (``pdcensus.advice``) plus rendering. ``lint`` exits 0 when it
ran, whatever it found, and 1 with ``--strict`` when any finding is an error;
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
    runbook: Annotated[str, typer.Argument(help="Runbook to check (Markdown or shell).")],
    source: Annotated[str, typer.Option("--source", help="Pinned source: core/config.cpp-shaped C++, --help text, "
                                        "or a sim output dir (its config.cpp).")],
    metrics: Annotated[Optional[str], typer.Option("--metrics", help="A scrape or recording of the pinned build: "
                                                   "metric names it does not export are findings.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print {\"findings\": [...]} as JSON.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when any finding is an error.")] = False,
) -> None:
    """Check a runbook's flags, enum values, metric names and PromQL against the pinned build."""
    from pdcensus.advice.lint import lint_file

    report = lint_file(runbook, source, metrics)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for f in report.findings:
            typer.echo(f"{runbook}:{f.line}: {f.severity.value} [{f.rule}] {f.subject}: {f.message}")
        errors = len(report.errors)
        checked = "" if report.metrics_checked else " (metric names not checked: give --metrics)"
        typer.echo(f"{len(report.findings)} finding(s), {errors} error(s) against {report.source}{checked}")
    if strict and report.errors:
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
