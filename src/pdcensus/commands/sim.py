"""`pdcensus sim` (simulate a scenario into a directory) and `pdcensus scenarios` (list them)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app, parse_duration, parse_sets
from pdcensus.engines import find

LONG_RUN_SECONDS = 6 * 3600.0


@app.command("sim")
def sim_command(
    scenario: Annotated[str, typer.Argument(help="Scenario name (see `pdcensus scenarios`).")],
    out: Annotated[str, typer.Option("--out", help="Directory to write metrics.om, truth.json, ... into.")],
    duration: Annotated[str, typer.Option("--duration", help="Virtual time to simulate, e.g. 2h, 90m, 1d.")] = "2h",
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same bytes).")] = 0,
    scrape_interval: Annotated[str, typer.Option("--scrape-interval", help="Scrape interval, e.g. 15s.")] = "15s",
    sets: Annotated[Optional[list[str]], typer.Option("--set", help="Engine flag override FLAG=VALUE (repeatable), in the --profile engine's own spelling (vllm: --max-num-batched-tokens, --max-num-seqs; sglang: --chunked-prefill-size, --max-running-requests; tgi: --max-batch-prefill-tokens or MAX_BATCH_PREFILL_TOKENS).")] = None,
    profile: Annotated[str, typer.Option("--profile", help="Metric set: radiance, vllm (plain vLLM V1 names), sglang or tgi (each engine's own names).")] = "radiance",
) -> None:
    """Simulate SCENARIO in virtual time and write the recording, ground truth and evidence to --out."""
    from pdcensus.sim.output import write_sim_dir
    from pdcensus.sim.run import simulate_scenario
    from pdcensus.sim.scenarios import get_scenario

    duration_seconds = parse_duration(duration)
    interval_seconds = parse_duration(scrape_interval)
    overrides = parse_sets(sets)
    spec = get_scenario(scenario)
    spoken = find(profile)
    if (spoken is None or not spoken.simulated) and overrides:  # the engine's own spelling (pdcensus.sim.engine_flags)
        from pdcensus.sim.engine_flags import apply

        spec, overrides = apply(spec, profile, overrides), {}
    if duration_seconds >= LONG_RUN_SECONDS:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn(f"sim {scenario}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                      TimeElapsedColumn(), transient=True) as bar:
            task = bar.add_task("sim", total=1.0)
            result = simulate_scenario(spec, duration_seconds=duration_seconds, seed=seed,
                                       scrape_interval_seconds=interval_seconds, overrides=overrides,
                                       profile=profile, progress=lambda done: bar.update(task, completed=done))
    else:
        result = simulate_scenario(spec, duration_seconds=duration_seconds, seed=seed,
                                   scrape_interval_seconds=interval_seconds, overrides=overrides, profile=profile)
    path = write_sim_dir(result, out)
    truth = result.truth
    typer.echo(f"{scenario}: truth {truth['mechanism']} (dominant: {', '.join(truth['mechanisms']) or '-'}); "
               f"wrote {path}/")


@app.command("scenarios")
def scenarios_command() -> None:
    """List the simulator's scenarios: name, then a one-line description."""
    from pdcensus.sim.scenarios import list_scenarios

    width = max(len(name) for name, _ in list_scenarios())
    for name, description in list_scenarios():
        typer.echo(f"{name:<{width}}  {description}")
