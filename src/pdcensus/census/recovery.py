"""A tail test that runs where tails exist: decode's recovery with time since the last prefill.

The runbook's lag test compares scrapes 2-14 min after a prefill with clean ones (nothing
heavy in the 14 min before). Where prefill is frequent, no scrape is clean and the test
never runs, though that is exactly where eviction costs most. So, as well: over scrapes whose
own prefill is quiet, per-stream decode is regressed on the time since the last heavy
prefill, with batch size held as a control (a long prompt's queued requests are admitted
together after it, and per-stream decode slows with the batch on every engine). Residency
that is re-promoted over minutes makes decode *recover* with time since the prefill; step-time
sharing does not (a quiet scrape holds no chunk step).

The effect is read inside the range the window shows, never extrapolated: the fitted rate
at the 10th percentile of time-since (soon after a prefill) over the fitted rate at the 90th
(long after), at the mean batch. It cannot separate a tail from batch growth when batch and
time-since move together (``MAX_COLLINEARITY``), nor see a tail when time-since spans less
than ``MIN_SPAN_SECONDS``; the result says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.bootstrap import interval
from pdcensus.census.dose import weighted_fit
from pdcensus.census.lag import TAIL_WINDOW_SECONDS, History

MIN_SCRAPES = 30  # quiet scrapes with a prefill before them in the window
MIN_SPAN_SECONDS = 120.0  # time-since must span at least this between its 10th and 90th percentiles
MAX_COLLINEARITY = 0.9  # |corr(batch, time-since)| above this: batch growth and a tail look alike


@dataclass(frozen=True)
class Recovery:
    """Fitted per-stream decode soon after prefill / long after, per replicate (None: not measurable)."""

    effect: np.ndarray | None
    reason: str
    soon_seconds: float = float("nan")
    late_seconds: float = float("nan")
    scrapes: int = 0
    loss: np.ndarray | None = None  # decoders' time lost before recovery / all decoders' time, per replicate

    def text(self) -> str:
        if self.effect is None:
            return self.reason
        lo, hi = interval(self.effect)
        return (f"per-stream decode {self.soon_seconds / 60:.1f} min after prefill / {self.late_seconds / 60:.1f} min "
                f"after, batch held constant: {self.effect[0]:.2f} (90% interval {lo:.2f}-{hi:.2f})")


def recovery(per_stream: np.ndarray, decoder_seconds: np.ndarray, running: np.ndarray | None, hist: History,
             weights: np.ndarray) -> Recovery:
    """Fit the recovery of per-stream decode with time since the last heavy prefill."""
    since = hist.since_heavy_seconds
    sel = (hist.quiet & np.isfinite(per_stream) & (decoder_seconds > 0) & np.isfinite(since)
           & (since <= TAIL_WINDOW_SECONDS[1]))
    n = int(sel.sum())
    if n < MIN_SCRAPES:
        return Recovery(None, f"recovery fit needs {MIN_SCRAPES} quiet scrapes within 14 min after a prefill; "
                              f"found {n}")
    soon, late = (float(q) for q in np.quantile(since[sel], [0.1, 0.9]))
    if late - soon < MIN_SPAN_SECONDS:
        return Recovery(None, f"time since the last prefill spans only {late - soon:.0f} s here (10th-90th "
                              f"percentile): too little to see a recovery", soon, late, n)
    cols = [np.ones(since.size), np.where(sel, since, 0.0) / 60.0]
    if running is not None:
        r = np.where(sel, np.nan_to_num(running), 0.0)
        mean_r = float(r[sel].mean())
        if float(np.std(r[sel])) > 1e-9:
            corr = float(np.corrcoef(r[sel], since[sel])[0, 1])
            if abs(corr) > MAX_COLLINEARITY:
                return Recovery(None, f"batch size and time since prefill move together (correlation {corr:.2f}): "
                                      "a tail cannot be told from batch growth here", soon, late, n)
            cols.append(r - mean_r)
    beta = weighted_fit(weights, np.where(sel, decoder_seconds, 0.0), np.column_stack(cols),
                        np.where(sel, per_stream, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        at_soon = beta[:, 0] + beta[:, 1] * soon / 60.0
        at_late = beta[:, 0] + beta[:, 1] * late / 60.0
        effect = np.where(at_late > 0, at_soon / at_late, np.nan)
        fitted = beta[:, :1] + beta[:, 1:2] * (since[None, :] / 60.0)
        deficit = np.where(sel[None, :], np.clip(1.0 - fitted / at_late[:, None], 0.0, 1.0), 0.0)
    wd = np.nan_to_num(decoder_seconds)
    loss = (weights * np.nan_to_num(deficit) * wd[None, :]).sum(axis=1) / np.maximum(weights @ wd, 1e-12)
    return Recovery(effect, "ran", soon, late, n, loss)
