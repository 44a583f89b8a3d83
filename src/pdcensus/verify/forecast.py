"""``verify-arm --whatif FILE``: the twin's prediction for the arm, as the gate reads it.

``pdcensus whatif BEFORE --set FLAG=VALUE --json > FILE`` calibrates the engine's twin on the
before recording and predicts each figure as observed x (twin after / twin before), over seeds.
With ``--whatif FILE`` the gate (:mod:`pdcensus.verify.gate`) allows each bucket's TTFT and ITL
quantile the rise whatif predicted for it, at the high end of its range over seeds (one-sided; a
predicted fall allows no rise: whatif's pooled busy figure stands for every busy bucket, and on
live vLLM, ``--long-prefill-token-threshold`` 512 -> 128, it predicted the busy ITL p99 x0.43
where the top bucket's fell x0.40 and a middle one's rose x1.99, within its le buckets' reach), and
holds the busy bucket's per-stream decode two-sided around whatif's ratio. Where the advice
itself predicted a quantity (the busy rate and TTFT of ``--prefill-interleave``), its prediction
stays; a figure whatif withheld, or could not
read on the recording, keeps the default: no rise allowed.

Without it, an arm whose cost the advice does not model reads as a cost nobody predicted:
on live vLLM 0.32 (``bench/vllm_live.py --scenario holdout-lpt`` against the same with
``--long-prefill-token-threshold 2048``) the busy ITL p99 rose x3.92 and verify-arm exited 5,
while ``whatif`` calibrated on the before run had predicted x3.83.

A whatif that refused to predict (its twin did not reproduce the recording) gives no ratios: the
verdict names the refusal and the gate allows no rise, as without the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdcensus.engines.knob_types import Knob
from pdcensus.errors import UsageError
from pdcensus.verify.model import LATENCIES

SCHEMA = "pdcensus/whatif/v1"
# the gate's quantity names (model.LATENCIES) and the whatif figure that predicts each, per side of the pair
LATENCY_FIGURES: dict[tuple[str, bool], str] = {
    (f"{name} p{round(q * 100)}", busy): f"{'busy' if busy else 'idle'}_{name.lower()}_p{round(q * 100)}_seconds"
    for _, name, qs in LATENCIES for q in qs for busy in (False, True)
}
BUSY_RATE_FIGURE = "per_stream_busy_tokens_per_second"


@dataclass(frozen=True)
class Forecast:
    """The ratios one whatif file predicts, keyed as the gate names its comparisons."""

    source: str  # the file
    calibrated_on: str  # the recording whatif calibrated on (its ``source``)
    refused: str | None
    latency: dict[tuple[str, bool], tuple[float, str]] = field(default_factory=dict)
    busy_rate: tuple[float, str] | None = None

    def latency_ratio(self, quantity: str, busy: bool) -> tuple[float, str] | None:
        """(allowed ratio, basis) for a bucket's quantity (``"ITL p99"``, busy bucket or not), or None."""
        return self.latency.get((quantity, busy))

    def note(self) -> str:
        """One line for the verdict's reason: what the file gave the gate."""
        if self.refused is not None:
            return (f"whatif {self.source} refused to predict ({self.refused}): the gate allowed no rise, as "
                    "without it")
        return (f"whatif {self.source} (calibrated on {self.calibrated_on}) predicted {len(self.latency)} bucket "
                f"latencies{' and the busy per-stream decode' if self.busy_rate else ''}")


def _norm(flag: str) -> str:
    return "--" + flag.lstrip("-").replace("_", "-")


def _value(v: object) -> str:
    s = str(v).strip()
    try:
        f = float(s)
    except ValueError:
        return s
    return str(int(f)) if f.is_integer() else repr(f)


def _ratio(figure: dict[str, Any], high: bool) -> float | None:
    """whatif's predicted over observed (the high end of the seeds' range where ``high``), or None."""
    observed, predicted = figure.get("observed"), figure.get("predicted") or {}
    point = predicted.get("high" if high else "median")
    if not isinstance(observed, (int, float)) or not isinstance(point, (int, float)):
        return None
    r = point / observed if observed > 0 else math.nan
    return r if math.isfinite(r) and r > 0 else None


def read_forecast(path: str | Path, knob: Knob, value: str | None) -> Forecast:
    """The gate's ratios from a ``pdcensus whatif --json`` file made for this arm (UsageError otherwise)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"--whatif {path}: cannot read it ({e.strerror or e})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"--whatif {path}: not JSON ({e}); write it with pdcensus whatif ... --json > FILE") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(f"--whatif {path}: not a whatif result (schema {SCHEMA!r} expected); write it with "
                         "pdcensus whatif BEFORE --set FLAG=VALUE --json > FILE")
    change = (data.get("change") or {}).get("set") or {}
    spellings = {_norm(s) for s in knob.spellings()}
    set_here = {_norm(k): v for k, v in change.items()}
    mine = [v for k, v in set_here.items() if k in spellings]
    if not mine or len(set_here) != 1:
        wrote = ", ".join(f"{k}={v}" for k, v in change.items()) or "nothing"
        raise UsageError(f"--whatif {path} predicts {wrote}; the arm is {knob.flag}={value or ''}: run whatif with "
                         f"--set {knob.flag}={value or 'VALUE'} alone")
    if value is not None and _value(mine[0]) != _value(value):
        raise UsageError(f"--whatif {path} predicts {knob.flag}={mine[0]}; the arm deployed {knob.flag}={value}")
    source, refused = str(data.get("source", "?")), data.get("refused")
    if refused is not None:
        return Forecast(str(path), source, str(refused))
    seeds = data.get("seeds", "?")
    figures = {f.get("name"): f for f in data.get("figures", []) if isinstance(f, dict)}
    latency: dict[tuple[str, bool], tuple[float, str]] = {}
    for key, name in LATENCY_FIGURES.items():
        f = figures.get(name)
        if f is None or str(f.get("basis", "")).startswith("withheld"):
            continue
        r = _ratio(f, high=True)
        if r is not None:  # a predicted fall allows no rise: the gate asks for no benefit in every bucket
            latency[key] = (max(r, 1.0), f"whatif {p.name}: {name} x{r:.2f}, the high end over {seeds} seed(s)"
                            + ("" if r >= 1.0 else ": a fall, so no rise allowed"))
    busy_rate = None
    f = figures.get(BUSY_RATE_FIGURE)
    if f is not None and not str(f.get("basis", "")).startswith("withheld"):
        r = _ratio(f, high=False)
        if r is not None:
            busy_rate = (r, f"whatif {p.name}: {BUSY_RATE_FIGURE} x{r:.2f}, the median over {seeds} seed(s)")
    return Forecast(str(path), source, None, latency, busy_rate)
