"""`pdcensus lint`, `pdcensus verify-arm` and `pdcensus knobs`: advice commands.

Each is one library call (``pdcensus.advice``, ``pdcensus.lint``) plus rendering. ``lint``
exits 1 when any finding is an error (0 with ``--warn-only``), 2 on a usage error;
``verify-arm`` gates: 0 engaged and within the prediction, 1 not engaged, 5 engaged but off
the prediction or with a cost nobody predicted, 3 inconclusive (``pdcensus.verify.arm_args``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app
from pdcensus.errors import UsageError
from pdcensus.verify.arm_args import ARM_EXIT_CODES, DEFAULT_TOLERANCE, parse_flag


@app.command()
def lint(
    paths: Annotated[list[str], typer.Argument(help="Files and directories to check: runbooks (Markdown), serve "
                                               "scripts, Kubernetes/Helm/compose YAML, Dockerfiles, systemd "
                                               "units, rules files, Grafana dashboards.")],
    source: Annotated[Optional[str], typer.Option("--source", envvar="PDCENSUS_SOURCE",
                                                  help="Pinned source: core/config.cpp-shaped C++ or --help text, "
                                                  "a directory holding core/config.cpp (or a sim output dir), a git "
                                                  "repository (with --ref), or a source tarball. Optional: without "
                                                  "it only vLLM commands are checked (against the shipped vLLM "
                                                  "0.32.0 flags data).")] = None,
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
    flag: Annotated[str, typer.Option("--flag", help="The knob as the advice prints it: \"--x N\", --x=N, or "
                                      "--x N (also x=N).")],
    flag_value: Annotated[Optional[list[str]], typer.Argument(
        help="The knob's value when written as --flag --x N.", show_default=False)] = None,
    cmdline: Annotated[Optional[str], typer.Option("--cmdline", help="Saved NUL-separated argv, or a sim dir "
                                                   "holding `cmdline` (default: the --after dir's, if any).")] = None,
    pid: Annotated[Optional[int], typer.Option("--pid", help="Read argv from /proc/PID/cmdline.")] = None,
    instance: Annotated[Optional[str], typer.Option("--instance", help="Endpoint instance to verify.")] = None,
    tolerance: Annotated[float, typer.Option(
        "--tolerance", help="Relative tolerance around each prediction, and the rise any bucket's TTFT or ITL may "
                            "show where nothing predicted one (each on its family-wise interval: within only where "
                            "the whole interval lies inside the band).")] = DEFAULT_TOLERANCE,
    whatif: Annotated[Optional[str], typer.Option(
        "--whatif", help="A `pdcensus whatif BEFORE --set FLAG=VALUE --json` file for this arm: the gate allows "
                         "each bucket's TTFT/ITL the ratio it predicted (the high end over seeds) and holds the busy "
                         "per-stream decode to its prediction.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Prove an arm engaged (the flag in argv, the counter it moves, the bucket pair), then gate on the prediction.

    Exit 0: ENGAGED and within the prediction. Exit 1: NOT-ENGAGED.

    Exit 5: ENGAGED, but off the prediction beyond --tolerance, or a bucket's TTFT/ITL rose unpredicted.

    Exit 3: INCONCLUSIVE (the data cannot decide; a comparison that cannot tell) or unreadable data. Exit 2: usage.
    """
    from pdcensus.advice.evidence import read_argv
    from pdcensus.verify.arm import verify_arm
    from pdcensus.sources.load import load_source

    name, value = parse_flag(flag, flag_value or [])
    if cmdline is not None and pid is not None:
        raise UsageError("give --cmdline PATH or --pid PID, not both")
    if not 0 < tolerance < 10:
        raise UsageError(f"--tolerance is a share above 0 (0.25 = 25 %), got {tolerance!r}")
    argv = None
    if cmdline is not None or pid is not None:
        argv = read_argv(cmdline, pid)
    elif Path(after, "cmdline").is_file():
        argv = read_argv(Path(after, "cmdline"))
    verdict = verify_arm(load_source(before), load_source(after), name, value, argv, instance,
                         tolerance=tolerance, whatif=whatif)
    if as_json:
        typer.echo(json.dumps(verdict.to_dict(), indent=2))
    else:
        from pdcensus.report.safe_console import SafeConsole

        from pdcensus.report.terminal_advice import render_arm

        render_arm(verdict, SafeConsole(highlight=False))
    code = ARM_EXIT_CODES[verdict.outcome]
    if code:
        raise SystemExit(code)  # the app runs with standalone_mode=False (see lint)


@app.command()
def knobs(
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON.")] = False,
    engine: Annotated[str, typer.Option("--engine", help="radiance, vllm, sglang, tgi or llamacpp: that engine's "
                                        "catalogue, read from its source at a pinned version.")] = "radiance",
) -> None:
    """The knob catalogue per engine: what each knob acts on, its cost, preconditions and rollback."""
    from pdcensus.engines import Advice, record

    rules = record(engine)
    catalogue = rules.catalogue
    runbook = rules.advice is Advice.RUNBOOK  # the runbook's table: its knobs alone, no pin line
    if as_json:
        typer.echo(json.dumps([k.to_dict() for k in catalogue.knobs] if runbook else catalogue.to_dict(), indent=2))
        return
    if not runbook:
        typer.echo(f"{catalogue.name} ({catalogue.pin}); env: {catalogue.env_rule}")
    for k in catalogue.knobs:
        spelled = " / ".join(k.spellings())
        typer.echo(f"{spelled} {k.argument} — {k.role} (acts on: {', '.join(a.value for a in k.acts_on) or 'not advised'})")
        typer.echo(f"    {k.semantics}")
        typer.echo(f"    cost: {k.cost}")
        for pre in k.preconditions:
            typer.echo(f"    needs: {pre}")
        for inter in k.interactions:
            typer.echo(f"    with: {inter}")
        arm = f"{k.env_var}=VALUE / {k.rollback_env_line()}" if k.env_var else f"{k.flag} VALUE / {k.rollback}"
        typer.echo(f"    arm/rollback: {arm}; counter: {k.counter or 'none'}")
    for gap in catalogue.gaps:
        typer.echo(f"(no knob) for {gap.acts_on.value}: {gap.why}; structural fix: {gap.structural_fix}")
