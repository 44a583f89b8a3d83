"""Dose-response: per-interval decode per stream regressed on the prefill computed in it.

The bucket contrast asks *whether* decode is slower while prefill runs; a scrape interval
longer than a chunk dilutes the answer (a 0.3 s chunk inside a 10 s interval moves the
interval's mean rate by 3 %). The dose-response asks *how much* decode falls per prefill
token, which does not depend on the interval: if each decoder waits ``c`` seconds per
prefill token beside it, an interval of length ``dt`` with ``P`` prefill tokens gives

    per-stream rate = r0 * (dt - c * P) / dt = r0 - r0 * c * (P / dt),

so the slope of per-stream rate on the interval's prefill rate is ``-r0 * c`` and
``c = -slope / intercept``, reported as milliseconds of decode stall per 1,000 prefill
tokens. Batch size (the running gauge) is held as a control: per-stream decode slows with
the batch on every engine, and a long prompt's admission grows the batch. The fit is
decoder-time weighted least squares, computed for every moving-block bootstrap replicate
at once (normal equations from matrix products of the replicate weights), so the stall
has an interval like every other estimate of the census.

Where a step ledger exists, ``(chunk step - decode-only step) / prefill tokens per chunk
step`` is the same quantity read directly; the report shows both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.bootstrap import interval
from pdcensus.census.model import DoseResponse

# Fewer intervals with decoders than this, or fewer with prefill: no fit.
MIN_INTERVALS = 20
MIN_PREFILL_INTERVALS = 5
# The prefill level at which the depth is read: this quantile of the busy intervals' prefill rate.
TOP_QUANTILE = 0.95
# Per 1,000 tokens/s, so that the normal equations are well conditioned.
SCALE = 1000.0
# A fit is stable when at least this share of the replicates has a positive intercept (a ratio
# with a denominator near 0 swings to either sign) and the window's own estimate lies inside its
# interval. An unstable fit is reported as such and is never evidence for a verdict.
MIN_FINITE_REPLICATES = 0.9


@dataclass(frozen=True)
class DoseFit:
    """The result for the report and the per-replicate arrays for the verdict."""

    result: DoseResponse
    stall_seconds_per_token: np.ndarray | None  # per replicate (row 0 = the window)
    depth_at_top: np.ndarray | None  # per replicate


def _solve(xtx: np.ndarray, xty: np.ndarray) -> np.ndarray:
    """Batched least-squares solution of the normal equations; NaN where singular."""
    out = np.full(xty.shape, np.nan)
    det = np.linalg.det(xtx)
    ok = np.isfinite(det) & (np.abs(det) > 1e-12 * np.abs(xtx[:, 0, 0]) ** xtx.shape[1])
    if ok.any():
        out[ok] = np.linalg.solve(xtx[ok], xty[ok][..., None])[..., 0]
    return out


def weighted_fit(weights: np.ndarray, sample_weights: np.ndarray, design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weighted least-squares coefficients for every replicate row of ``weights`` (NaN where singular)."""
    wv = weights * sample_weights[None, :]
    xtx = np.einsum("ri,ij,ik->rjk", wv, design, design)
    xty = np.einsum("ri,ij,i->rj", wv, design, y)
    return _solve(xtx, xty)


def dose_response(per_stream: np.ndarray, decoder_seconds: np.ndarray, prefill_tokens_per_second: np.ndarray,
                  running: np.ndarray | None, busy: np.ndarray, weights: np.ndarray, *,
                  ledger_ms_per_1k_tokens: float = float("nan"), basis: str = "") -> DoseFit:
    """Fit the stall per prefill token over intervals with decoders, for every replicate."""
    p = np.asarray(per_stream, dtype=np.float64)
    x = np.asarray(prefill_tokens_per_second, dtype=np.float64)
    wd = np.asarray(decoder_seconds, dtype=np.float64)
    valid = np.isfinite(p) & np.isfinite(x) & (wd > 0) & (x >= 0)
    n_valid, n_prefill = int(valid.sum()), int((valid & (x > 0)).sum())
    if n_valid < MIN_INTERVALS or n_prefill < MIN_PREFILL_INTERVALS:
        return DoseFit(DoseResponse(False, f"needs {MIN_INTERVALS} intervals with decoders and "
                                           f"{MIN_PREFILL_INTERVALS} with prefill; found {n_valid} and {n_prefill}",
                                    n_valid, ledger_ms_per_1k_tokens=ledger_ms_per_1k_tokens, basis=basis), None, None)
    v = np.where(valid, wd, 0.0)
    cols = [np.ones_like(p), np.where(valid, x, 0.0) / SCALE]
    controlled = False
    if running is not None:
        r = np.where(valid, np.nan_to_num(running), 0.0)
        mean_r = float((v * r).sum() / v.sum())
        centred = r - mean_r
        if float((v * centred ** 2).sum() / v.sum()) > 1e-9 * max(mean_r ** 2, 1.0):
            cols.append(centred)
            controlled = True
    design = np.column_stack(cols)
    beta = weighted_fit(weights, v, design, np.where(valid, p, 0.0))
    intercept, slope = beta[:, 0], beta[:, 1] / SCALE
    with np.errstate(invalid="ignore", divide="ignore"):
        stall = np.where(intercept > 0, -slope / intercept, np.nan)
    busy_x = x[valid & busy & (x > 0)]
    top = float(np.quantile(busy_x, TOP_QUANTILE)) if busy_x.size else float(np.quantile(x[valid & (x > 0)], TOP_QUANTILE))
    depth = 1.0 - stall * top
    lo, hi = interval(stall)
    dlo, dhi = interval(depth)
    unstable = _instability(stall, lo, hi)
    result = DoseResponse(
        True, "decoder-time weighted least squares of per-stream decode on the interval's prefill rate"
        + (", batch size held as a control" if controlled else " (batch size constant or unknown: no control)")
        + (f"; unstable, not used as evidence: {unstable}" if unstable else ""),
        n_valid, float(stall[0] * 1e6), (lo * 1e6, hi * 1e6), float(intercept[0]), top, float(depth[0]),
        (dlo, dhi), controlled, ledger_ms_per_1k_tokens, basis, stable=not unstable)
    return DoseFit(result, None if unstable else stall, None if unstable else depth)


def _instability(stall: np.ndarray, lo: float, hi: float) -> str:
    """Why the replicates do not support the fit ('' when they do)."""
    reps = stall[1:]
    finite = float(np.isfinite(reps).mean()) if reps.size else 0.0
    if finite < MIN_FINITE_REPLICATES:
        return f"{1 - finite:.0%} of the bootstrap replicates have no positive idle rate to divide by"
    point = float(stall[0])
    if not np.isfinite(point) or not (lo <= point <= hi):
        return "the window's own estimate lies outside its 90% interval"
    return ""


def ledger_stall_ms_per_1k(chunk_seconds: float, chunk_steps: float, decode_step_seconds: float,
                           prefill_tokens: float) -> float:
    """(mean chunk step - mean decode-only step) per chunk token, in ms per 1,000 tokens."""
    if not (chunk_steps > 0 and prefill_tokens > 0 and np.isfinite(decode_step_seconds)):
        return float("nan")
    tokens_per_chunk_step = prefill_tokens / chunk_steps
    return float((chunk_seconds / chunk_steps - decode_step_seconds) / tokens_per_chunk_step * 1e6)
