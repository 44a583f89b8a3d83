"""`pdcensus whatif`: the simulator calibrated to a recording, asked what a knob would change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app
from pdcensus.errors import DataError, UsageError


def _argv(source: str, cmdline: str | None) -> list[str]:
    """argv from --cmdline (NUL- or space-separated, like /proc/PID/cmdline), else SOURCE/cmdline."""
    path = Path(cmdline) if cmdline else Path(source) / "cmdline"
    if not path.is_file():
        if cmdline:
            raise DataError(f"--cmdline {cmdline!r}: no such file")
        return []
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    return [a for a in (text.split("\0") if "\0" in text else text.split()) if a]


@app.command("whatif")
def whatif_command(
    source: Annotated[str, typer.Argument(help="Recording file or sim output dir to calibrate the simulator on.")],
    sets: Annotated[Optional[list[str]], typer.Option(
        "--set", help="KNOB=VALUE in the engine's own spelling (vLLM --max-num-seqs, --max-num-batched-tokens; "
                      "llama.cpp -np, -b, -ub; radiance's flags), or load=FACTOR. Repeatable.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON (schema pdcensus/whatif/v1).")] = False,
    cmdline: Annotated[Optional[str], typer.Option(
        "--cmdline", help="The engine's argv (a /proc/PID/cmdline copy); default SOURCE/cmdline when present.")] = None,
    instance: Annotated[Optional[str], typer.Option("--instance", help="Endpoint instance (when the recording has several).")] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Twin runs per arm (the intervals are their range).")] = 4,
    max_error: Annotated[float, typer.Option(
        "--max-calibration-error", help="Refuse to predict when the twin misses the recording's per-stream "
                                        "decode (idle or busy) or decode throughput by more than this share.")] = 0.25,
    mean_prompt_tokens: Annotated[Optional[float], typer.Option(
        "--mean-prompt-tokens", help="Mean prompt size, needed only where the recording counts no requests "
                                     "(llama.cpp).")] = None,
) -> None:
    """Calibrate the simulator to SOURCE, report its error there, then predict the change (or refuse)."""
    from pdcensus.sources.load import load_source
    from pdcensus.whatif import what_if

    if not sets:
        raise UsageError("give at least one --set KNOB=VALUE")
    if not 0.0 < max_error:
        raise UsageError(f"--max-calibration-error must be positive, got {max_error}")
    recording = load_source(source)
    result = what_if(recording, sets, argv=_argv(source, cmdline), instance=instance, seeds=seeds, bound=max_error,
                     mean_prompt_tokens=mean_prompt_tokens)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), allow_nan=False))
    else:
        from pdcensus.report.safe_console import SafeConsole

        from pdcensus.whatif.render import render

        render(result, SafeConsole())
    if result.refused:
        raise DataError(result.refused)
