"""Orchestration: one recording -> one census report per endpoint (pure, no I/O).

``census_recording(recording, options)`` runs the passes in the runbook's order:
shape proof, signals through the profile, buckets, ledger, lag test, TTFT, preemption
bursts, traps, and the verdict, and assembles the typed :class:`CensusReport` (with the
checklist of which of those steps ran on this engine's metrics, ``passes``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census import bootstrap
from pdcensus.census.bootstrap import interval, weighted_ratio
from pdcensus.census.buckets import (
    IDLE_FLOOR_TOKENS_PER_SECOND,
    BucketAssignment,
    assign_buckets,
    bucket_table,
    per_stream_rate,
)
from pdcensus.census.lag import History, history, lag_test
from pdcensus.census.ledger import LedgerExcess, step_ledger
from pdcensus.census.model import CensusReport, LossShares, PreemptionResult, ShapeResult, Timeline
from pdcensus.census.passes import runbook_passes
from pdcensus.census.preemption import PreemptionLoss, preemption_bursts
from pdcensus.census.shape import choose_segment, split_shapes
from pdcensus.census.signals import ShapeSignals, extract_signals
from pdcensus.census.traps import REPLAY_SHARE, check_traps, replay_share
from pdcensus.census.ttft import ttft_summary
from pdcensus.census.usable import LeftOut, admit_samples, left_out_trap
from pdcensus.census.verdict import VerdictInputs, decide
from pdcensus.errors import DataError
from pdcensus.series.model import Endpoint, Family, Recording
from pdcensus.series.profiles import Detection, Signal, detect_profile

# A burst lines up with a stall when decode at the burst is this far below its bucket's
# baseline, or prefill (the re-prefill from token 0) this far above its mean.
BURST_DIP = 0.95
BURST_SPIKE = 1.5


@dataclass(frozen=True)
class CensusOptions:
    instance: str | None = None
    start: float | None = None
    end: float | None = None
    segment: int | None = None
    replicates: int = bootstrap.REPLICATES


def census_recording(recording: Recording, options: CensusOptions = CensusOptions()) -> list[CensusReport]:
    """One report per endpoint (only the chosen one with ``options.instance``)."""
    source = recording.source or "recording"
    if options.instance is not None:
        return [census_endpoint(recording.endpoint(options.instance), recording.families, source, options)]
    if not recording.endpoints:
        raise DataError(f"{source}: no endpoint in the recording")
    engines = [ep for ep in recording.endpoints if detect_profile(ep.names()) is not None]
    if not engines:
        raise DataError(f"{source}: no engine metric (radiance:, vllm: or sglang:) in any endpoint")
    return [census_endpoint(ep, recording.families, source, options) for ep in engines]


def _timeline(s: ShapeSignals, running: np.ndarray | None) -> Timeline:
    def tup(a: np.ndarray | None) -> tuple[float, ...]:
        return tuple(float(x) for x in a) if a is not None else ()
    return Timeline(tup(s.times), tup(s.decode_tokens_per_second), tup(s.prefill_tokens_per_second), tup(running))


def _heavy(s: ShapeSignals, a: BucketAssignment) -> np.ndarray:
    """Heavy prefill at the scrape (gauge bucket) or over the interval before it (counter)."""
    heavy = a.busy.copy()
    prompt = s.increase(Signal.PROMPT_TOKENS)
    if prompt is not None and not s.rates_from_counters:
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_rate = prompt / s.interval_seconds
        heavy |= assign_buckets(mean_rate).busy
    return heavy


@dataclass(frozen=True)
class ShapeRead:
    """One endpoint's analysed shape, read the census's way: usable samples, proven shape, engine, signals."""

    shape: ShapeResult
    rows: np.ndarray
    detection: Detection
    scrape_interval_seconds: float
    signals: ShapeSignals
    left_out: tuple[LeftOut, ...]


def read_shape(endpoint: Endpoint, families: dict[str, Family], source: str, segment: int | None = None,
               start: float | None = None, end: float | None = None) -> ShapeRead:
    """The shape the census analyses (``segment``, else the latest) of ``endpoint`` between ``start`` and ``end``.

    Samples that are no usable number are left out first (:mod:`pdcensus.census.usable`); the
    engine is detected from what was scraped, whether or not its samples were usable. The
    census and the advice that re-reads a window (verify-arm, the TTFT replay) go through here,
    so they see the same shapes and the same signals.
    """
    ep = endpoint.slice_time(start, end) if start or end else endpoint
    # decided once, before the shape is proven: a sample that is no usable number is a missed scrape
    admission = admit_samples(ep, families)
    scraped, ep = ep, admission.endpoint
    split = split_shapes(ep, families)
    if not split.rows:
        raise DataError(f"{source}: instance {endpoint.instance!r} has no good scrape in the window")
    shape = choose_segment(split, segment)
    assert shape.analysed is not None
    rows = split.rows[shape.analysed - 1]
    # the metric set is what was scraped, whether or not its samples were usable
    names = {k.name for k, ok in zip(scraped.keys, scraped.present[rows].any(axis=0)) if ok}
    det = detect_profile(names)
    if det is None:
        raise DataError(f"{source}: instance {endpoint.instance!r}, shape {shape.analysed}: no engine metric "
                        "(radiance:, vllm: or sglang:)")
    seg_times = ep.timestamps[rows]
    scrape_interval = float(np.median(np.diff(seg_times))) if rows.size > 1 else float("nan")
    s = extract_signals(ep, rows, det.profile, scrape_interval, scraped_names=frozenset(names))
    return ShapeRead(shape, rows, det, scrape_interval, s, admission.left_out + s.left_out)


def census_endpoint(endpoint: Endpoint, families: dict[str, Family], source: str,
                    options: CensusOptions = CensusOptions()) -> CensusReport:
    """The whole census of one endpoint's window."""
    read = read_shape(endpoint, families, source, options.segment, options.start, options.end)
    shape, det, s, scrape_interval = read.shape, read.detection, read.signals, read.scrape_interval_seconds
    if s.decode_tokens_per_second is None or s.prefill_tokens_per_second is None:
        prof = det.profile
        raise DataError(f"{source}: no decode/prefill signal in shape {shape.analysed}: expected "
                        f"{prof.name_of(Signal.DECODE_TPS) or prof.name_of(Signal.GENERATION_TOKENS)} and "
                        f"{prof.name_of(Signal.PREFILL_TPS) or prof.name_of(Signal.PROMPT_TOKENS)}")
    decode, prefill = s.decode_tokens_per_second, s.prefill_tokens_per_second
    a = assign_buckets(prefill)
    running = s.gauge(Signal.RUNNING)
    p = per_stream_rate(decode, running)
    dt = np.nan_to_num(s.interval_seconds, nan=scrape_interval if np.isfinite(scrape_interval) else 0.0)
    valid = np.isfinite(p)
    # decode weight = streams x seconds; without a running gauge no scrape has a per-stream rate
    wdec = np.where(valid, np.nan_to_num(running) * dt, 0.0) if running is not None else np.zeros_like(dt)
    hist = history(s.times, _heavy(s, a), scrape_interval)
    W = bootstrap.weights(s.n, bootstrap.block_length(hist.heavy.astype(float)), options.replicates)

    ledger, excess = step_ledger(s, a, hist)
    lag, tail_effect = lag_test(s.times, p, wdec, a.busy, a.idle, hist, scrape_interval, W)
    pre_name = det.profile.name_of(Signal.PREEMPTIONS) or "preemptions counter"
    preemption, ploss = preemption_bursts(s.times, s.increase(Signal.PREEMPTIONS), decode, prefill, a,
                                          s.gauge(Signal.PREEMPTED_DEPTH), running, s.interval_seconds, W, pre_name,
                                          waiting=s.gauge(Signal.WAITING))
    ttft_hist = s.histograms.get(Signal.TTFT)
    basis = ("counter increase / interval (interval means, not same-scrape gauges)" if s.rates_from_counters
             else "same-scrape gauges")
    left_out = read.left_out
    warn = (("decode and prefill exist only as counters here: rates are interval means",) if s.rates_from_counters
            else ()) + tuple(x.text for x in left_out)
    table = bucket_table(a, decode, running, prefill_name="prefill", basis=basis, scrape_interval_seconds=scrape_interval,
                         ttft=ttft_hist, preemptions=s.increase(Signal.PREEMPTIONS), warnings=warn)
    share, replay_rate = replay_share(s)
    client_table = None
    if replay_rate is not None and np.isfinite(share) and share >= REPLAY_SHARE:
        client = np.clip(prefill - np.nan_to_num(replay_rate), 0, None)
        ca = assign_buckets(client)
        client_table = bucket_table(ca, decode, running, prefill_name="client-new prefill (prefill - replay)",
                                    basis=basis + "; replay = prefix-hit cut increase / interval",
                                    scrape_interval_seconds=scrape_interval, ttft=ttft_hist,
                                    preemptions=s.increase(Signal.PREEMPTIONS))
    traps = check_traps(s, ledger, preemption, shape) + (left_out_trap(left_out),)

    assert shape.analysed is not None
    inputs = _verdict_inputs(shape.proven, shape.segments[shape.analysed - 1].reason if shape.proven else
                             "the analysed shape could not be proven one shape", s, a, p, wdec, hist, W, excess,
                             running, dt, tail_effect, ploss, preemption)
    verdict = decide(inputs)
    losses = _losses(inputs, ploss.basis, excess is not None)
    ttft = ttft_summary(ttft_hist, a, det.profile.name)
    passes = runbook_passes(det.profile, shape, ledger, table, lag, ttft, preemption, inputs)
    return CensusReport(source, endpoint.job, endpoint.instance, det.profile.name, det.reason, verdict, shape, ledger, table,
                        client_table, lag, ttft, preemption, traps, losses, _timeline(s, running), passes=passes)


def _verdict_inputs(proven: bool, shape_reason: str, s: ShapeSignals, a: BucketAssignment, p: np.ndarray,
                    wdec: np.ndarray, hist: History, W: np.ndarray, excess: LedgerExcess | None,
                    running: np.ndarray | None, dt: np.ndarray, tail_effect: np.ndarray, ploss: PreemptionLoss,
                    preemption: PreemptionResult) -> VerdictInputs:
    valid = np.isfinite(p) & (wdec > 0)
    pz = np.where(valid, p, 0.0)
    idle, busy = a.idle & valid, a.busy & valid
    p_idle = weighted_ratio(W, wdec * pz * idle, wdec * idle)
    total = W @ wdec
    busy_w, busy_wp = W @ (wdec * busy), W @ (wdec * pz * busy)
    with np.errstate(invalid="ignore", divide="ignore"):
        collapse = (busy_w - busy_wp / p_idle) / total
        lag0 = (busy_wp / busy_w) / p_idle
    clean, tail = hist.clean & valid, hist.tail & valid
    p_clean = weighted_ratio(W, wdec * pz * clean, wdec * clean)
    with np.errstate(invalid="ignore", divide="ignore"):
        tail_loss = ((W @ (wdec * tail)) - (W @ (wdec * pz * tail)) / p_clean) / total
    if not np.isfinite(tail_effect[0]):
        tail_loss = np.full(W.shape[0], np.nan)
    sharing = residency = during = after = after_bounded = None
    if excess is not None:
        r = np.nan_to_num(running) if running is not None else np.zeros(s.n)
        lv = excess.valid & (r > 0)
        den = np.where(lv, r * dt, 0.0)
        sharing = weighted_ratio(W, np.where(lv, r * np.nan_to_num(excess.sharing_seconds), 0.0), den)
        residency = weighted_ratio(W, np.where(lv, r * np.nan_to_num(excess.residency_seconds), 0.0), den)
        if np.isfinite(excess.reference_step_seconds).any():
            d0s = np.nan_to_num(excess.reference_step_seconds) * excess.decode_steps
            during = weighted_ratio(W, excess.decode_seconds * hist.heavy, d0s * hist.heavy)
            after = weighted_ratio(W, excess.decode_seconds * hist.quiet, d0s * hist.quiet)
            if (excess.decode_steps * hist.quiet).sum() <= 0:
                after = None
            if excess.batch_step_bound is not None and (excess.decode_steps * hist.quiet).sum() > 0:
                # the same test counting only decode-only time beyond the longest step a bigger
                # batch alone could explain (fast intervals at a big batch offset nothing)
                allowed = np.nan_to_num(excess.batch_step_bound) * excess.decode_steps
                beyond = np.clip(excess.decode_seconds - allowed, 0.0, None)
                after_bounded = weighted_ratio(W, (d0s + beyond) * hist.quiet, d0s * hist.quiet)
    aligned = bool((np.isfinite(preemption.decode_dip) and preemption.decode_dip <= BURST_DIP)
                   or (np.isfinite(preemption.prefill_spike) and preemption.prefill_spike >= BURST_SPIKE))
    return VerdictInputs(
        shape_proven=proven, shape_reason=shape_reason, samples=int(valid.sum()), idle_samples=int(idle.sum()),
        busy_samples=int(busy.sum()), has_ledger=excess is not None,
        ledger_chunk_steps=float(np.nansum(np.where(excess.valid & (np.nan_to_num(running) > 0), excess.chunk_steps, 0.0)))
        if excess is not None and running is not None else 0.0,
        scrape_interval_seconds=s.scrape_interval_seconds, rates_from_counters=s.rates_from_counters,
        preemption_counted=s.increase(Signal.PREEMPTIONS) is not None, saturated_share=_saturated_share(s, running),
        collapse=collapse, lag0_effect=lag0, sharing=sharing, residency=residency, inflation_during=during,
        inflation_after=after, tail_effect=tail_effect, tail_loss=tail_loss, preemption=ploss.share,
        preemption_basis=ploss.basis, bursts=len(preemption.bursts), burst_aligned=aligned,
        inflation_after_batch_bounded=after_bounded, tail_batch_ratio=_batch_ratio(running, tail, clean),
        baseline_prefill_free_share=float((s.prefill_tokens_per_second[idle] <= IDLE_FLOOR_TOKENS_PER_SECOND).mean())
        if idle.any() and s.prefill_tokens_per_second is not None else 1.0,
        preemption_lower_bound=ploss.basis.startswith("decode deficit"),
        preemption_from_queue=ploss.basis.startswith("time integral of the waiting"))


def _batch_ratio(running: np.ndarray | None, tail: np.ndarray, clean: np.ndarray) -> float:
    """max(1, median batch of the lagged-tail scrapes / of the clean ones).

    Per-stream rate falls with the batch on every engine, at most in proportion to it (a step
    has a fixed part >= 0), and the requests queued behind a long prompt are admitted together
    after it: a tail is residency only if it is deeper than this ratio explains.
    """
    if running is None or not tail.any() or not clean.any():
        return 1.0
    r = np.nan_to_num(running)
    ref = float(np.median(r[clean]))
    return max(1.0, float(np.median(r[tail])) / ref) if ref > 0 else 1.0


def _saturated_share(s: ShapeSignals, running: np.ndarray | None) -> float:
    """Share of scrapes with requests running in which some also wait (NaN without both gauges)."""
    waiting = s.gauge(Signal.WAITING)
    if waiting is None or running is None:
        return float("nan")
    busy = np.isfinite(running) & (running > 0) & np.isfinite(waiting)
    return float((waiting[busy] > 0).mean()) if busy.any() else float("nan")


def _losses(x: VerdictInputs, preemption_basis: str, ledger: bool) -> LossShares:
    sts = x.sharing if x.sharing is not None else x.collapse
    ev = np.fmax(np.nan_to_num(x.tail_loss), np.nan_to_num(x.residency) if x.residency is not None else 0.0)
    return LossShares(
        float(sts[0]), interval(sts), "ledger: chunk time beyond decode-only steps" if ledger
        else "rates: per-stream deficit while prefill runs (no ledger)",
        float(ev[0]), interval(ev), "max(lagged-tail deficit, inflated decode-only steps)",
        float(x.preemption[0]), interval(x.preemption), preemption_basis,
        float(x.collapse[0]), interval(x.collapse),
    )
