"""`pdcensus demo [SCENARIO]`: simulate a scenario (default step-time-sharing), census it, print the report, write report.html.

The terminal gets the short view (headline, the evidence that decided it, the advice, how to
verify the arm); ``--full`` prints every section after it, as report.html always does.

The simulator's output directory is written too, so ``pdcensus census DIR`` re-runs the
census on exactly what the demo saw. The demo overwrites only a directory it wrote itself (it
leaves a marker file, :data:`DEMO_MARKER`, in it) or an empty or missing one: a directory
holding anything else (someone's ``out/metrics.om``) is refused with exit 2 unless ``--force``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pdcensus.commands.base import app, parse_duration
from pdcensus.errors import UsageError

DEMO_MARKER = ".pdcensus-demo"
"""The file the demo leaves in its output directory: the one sign it may overwrite that directory."""


def check_demo_out(out: Path, force: bool) -> None:
    """Refuse (UsageError, exit 2) to write into ``out`` unless it is missing, empty, or the demo's own."""
    if not out.exists() and not out.is_symlink():
        return
    if not out.is_dir():
        raise UsageError(f"--out {str(out)!r} exists and is not a directory")
    if force or (out / DEMO_MARKER).is_file() or not any(out.iterdir()):
        return
    raise UsageError(f"{str(out)!r} holds files pdcensus demo did not write (no {DEMO_MARKER} in it); refusing to "
                     "overwrite them: give --out NEW_DIR, or --force to write into it anyway")


@app.command()
def demo(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see `pdcensus scenarios`).")] = "step-time-sharing",
    out: Annotated[Path, typer.Option("--out", help="Directory for the recording, truth and report.html.")] = Path("out"),
    duration: Annotated[str, typer.Option("--duration", help="Simulated time, e.g. 2h.")] = "2h",
    seed: Annotated[int, typer.Option("--seed", help="Simulator seed.")] = 0,
    full: Annotated[bool, typer.Option("--full", help="Every section of the report, not only the short view.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Write into --out even if it holds files the demo did not write.")] = False,
) -> None:
    """Simulate SCENARIO, run the census on it, print the report and write OUT/report.html."""
    from pdcensus.report.safe_console import SafeConsole

    from pdcensus import api
    from pdcensus.report.html import write_html
    from pdcensus.report.terminal import render
    from pdcensus.sim import simulate, write_sim_dir

    check_demo_out(out, force)
    console = SafeConsole()  # label values like ":smile:" stay text
    with console.status(f"simulating {scenario} for {duration} ..."):
        result = simulate(scenario, duration_seconds=parse_duration(duration), seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / DEMO_MARKER).write_text("written by pdcensus demo, which may overwrite this directory\n", encoding="utf-8")
    write_sim_dir(result, out)
    recording = result.recording
    recording.source = str(out)
    with console.status("running the calibrated twin on the advice ..."):
        reports = api.census_all(recording, evidence=out, twin=True)
    for report in reports:
        render(report, console, full=full)
    write_html(reports, out / "report.html", f"pdcensus demo: {scenario}")
    truth = str(result.truth.get("mechanism", "?"))
    found = reports[-1].verdict.mechanism.value if reports else "?"
    agree = "agrees" if found == truth else "DISAGREES"
    console.print(f"simulator ground truth: [bold]{truth}[/bold] (census {agree}); wrote {out}/report.html "
                  f"and the recording ({out}/metrics.om); re-run with: pdcensus census {out}")
