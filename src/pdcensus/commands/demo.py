"""`pdcensus demo [SCENARIO]`: simulate a scenario (default step-time-sharing), census it, print the report, write report.html.

The terminal gets the short view (headline, the evidence that decided it, the advice, how to
verify the arm); ``--full`` prints every section after it, as report.html always does.

The simulator's output directory is written too, so ``pdcensus census DIR`` re-runs the
census on exactly what the demo saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pdcensus.commands.base import app, parse_duration


@app.command()
def demo(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see `pdcensus scenarios`).")] = "step-time-sharing",
    out: Annotated[Path, typer.Option("--out", help="Directory for the recording, truth and report.html.")] = Path("out"),
    duration: Annotated[str, typer.Option("--duration", help="Simulated time, e.g. 2h.")] = "2h",
    seed: Annotated[int, typer.Option("--seed", help="Simulator seed.")] = 0,
    full: Annotated[bool, typer.Option("--full", help="Every section of the report, not only the short view.")] = False,
) -> None:
    """Simulate SCENARIO, run the census on it, print the report and write OUT/report.html."""
    from rich.console import Console

    from pdcensus import api
    from pdcensus.report.html import write_html
    from pdcensus.report.terminal import render
    from pdcensus.sim import simulate, write_sim_dir

    console = Console(emoji=False)  # label values like ":smile:" stay text
    with console.status(f"simulating {scenario} for {duration} ..."):
        result = simulate(scenario, duration_seconds=parse_duration(duration), seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    write_sim_dir(result, out)
    recording = result.recording
    recording.source = str(out)
    reports = api.census_all(recording, evidence=out)
    for report in reports:
        render(report, console, full=full)
    write_html(reports, out / "report.html", f"pdcensus demo: {scenario}")
    truth = str(result.truth.get("mechanism", "?"))
    found = reports[-1].verdict.mechanism.value if reports else "?"
    agree = "agrees" if found == truth else "DISAGREES"
    console.print(f"simulator ground truth: [bold]{truth}[/bold] (census {agree}); wrote {out}/report.html "
                  f"and the recording ({out}/metrics.om); re-run with: pdcensus census {out}")
