"""The typed what-if result and its JSON (schema ``pdcensus/whatif/v1``).

The terminal and JSON views both read :class:`WhatIfResult`; only :meth:`WhatIfResult.to_dict`
turns it into plain data (NaN becomes ``null``). Keys, in the order a reader needs them:
``calibration`` (engine, step costs, traffic, flags and where each came from, notes),
``calibration_error`` (per figure, the twin without the change against the recording, before
any prediction), ``bound`` and ``refused`` (a reason, or null), then ``change``, ``figures``
(observed, twin before, twin after, predicted, each a median with its range over seeds) and
``buckets`` (on the recording's own prefill edges).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdcensus.census.model import plain
from pdcensus.engines import record

if TYPE_CHECKING:
    from pdcensus.whatif.calibrate import Calibration
    from pdcensus.whatif.knobs import KnobSetting

SCHEMA = "pdcensus/whatif/v1"
# the figures whose calibration error decides whether the twin may predict
BOUNDED: tuple[str, ...] = ("per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second",
                            "decode_tokens_per_second")


WITHHELD = "withheld"  # the first word of a figure's basis where it is not predicted


@dataclass(frozen=True)
class Spread:
    """A median over seeds and the range ``[low, high]`` around it."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class FigurePrediction:
    name: str
    observed: float
    twin_before: Spread
    twin_after: Spread
    predicted: Spread
    basis: str

    @property
    def withheld(self) -> bool:
        """Not predicted, for the reason in ``basis`` (:func:`pdcensus.whatif.run.withhold_batch_figures`)."""
        return self.basis.startswith(WITHHELD)

    @property
    def change(self) -> float:
        """Predicted over observed (or twin after over before where the recording lacks the figure)."""
        ref = self.observed if math.isfinite(self.observed) else self.twin_before.median
        return self.predicted.median / ref if ref and math.isfinite(ref) else math.nan


@dataclass(frozen=True)
class BucketPrediction:
    bucket: str
    observed_per_stream_tokens_per_second: float
    twin_before_per_stream: Spread
    twin_after_per_stream: Spread
    observed_ttft_p90_seconds: float
    twin_before_ttft_p90: Spread
    twin_after_ttft_p90: Spread
    observed_itl_p99_seconds: float
    twin_after_itl_p99: Spread
    twin_before_samples: Spread
    twin_after_samples: Spread


def engine_flags(c: Calibration, flags: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The twin's flags (``flags``: a change's, else the calibration's) in the engine's own spelling, and the
    twin's settings with no such spelling as notes (vLLM's for a vLLM twin; the simulator's otherwise)."""
    flags = dict(c.flags if flags is None else flags)
    if not record(c.engine).twin_maps_every_flag:
        return flags, []
    from pdcensus.whatif.vllm_knobs import vllm_spelling

    shown, left = vllm_spelling(flags, c.flag_sources)
    return dict(shown), left


@dataclass(frozen=True)
class WhatIfResult:
    source: str
    calibration: Calibration
    settings: tuple[KnobSetting, ...]
    sim_flags: dict[str, str]
    ubatch_tokens: int | None
    load: float
    seeds: int
    bound: float
    calibration_error: dict[str, float]
    refused: str | None
    figures: tuple[FigurePrediction, ...]
    buckets: tuple[BucketPrediction, ...]
    warnings: tuple[str, ...] = ()
    remarks: tuple[str, ...] = ()  # why a figure moves as it does (a chunk change under a per-token prefill cost)

    def figure(self, name: str) -> FigurePrediction | None:
        return next((f for f in self.figures if f.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        c = self.calibration
        costs = c.costs
        traffic = c.traffic
        # a twin whose own flags are another engine's shows the engine's spelling only (the rest in twin_notes)
        flags, twin_notes = engine_flags(c)
        return {
            "schema": SCHEMA,
            "source": self.source,
            "calibration": {
                "engine": c.engine, "profile": c.profile, "twin_profile": c.sim_profile,
                "window_seconds": c.window_seconds, "scrape_interval_seconds": c.scrape_interval_seconds,
                "step_costs": plain(costs),
                "traffic": {
                    "request_basis": traffic.request_basis,
                    "requests_per_second": traffic.request_rate_per_second,
                    "prompt_tokens": traffic.prompt_tokens_total,
                    "short_prompt_tokens": traffic.short_prompt_tokens,
                    "long_prompt_tokens": traffic.long_prompt_tokens,
                    "mean_output_tokens": traffic.mean_output_tokens,
                    "standing_decoders": traffic.standing_decoders,
                    "blocks": len(traffic.block_starts),
                },
                "flags": flags, "flag_sources": {f: v for f, v in c.flag_sources.items() if f in flags},
                "twin_notes": twin_notes,
                "argv_knobs": {k.value: v for k, v in c.argv_knobs.items()},
                "observed": plain(c.observed.values),
                "notes": list(c.notes),
            },
            "calibration_error": plain(self.calibration_error),
            "bound": self.bound,
            "bounded_figures": list(BOUNDED),
            "refused": self.refused,
            "warnings": list(self.warnings),
            "remarks": list(self.remarks),
            "change": {
                "set": {s.spelling: s.value for s in self.settings},
                "twin_flags": engine_flags(c, self.sim_flags)[0],
                "twin_ubatch_tokens": self.ubatch_tokens,
                "load": self.load,
            },
            "seeds": self.seeds,
            "figures": [{**plain(f), "change": plain(f.change)} for f in self.figures],
            "buckets": plain(self.buckets),
        }
