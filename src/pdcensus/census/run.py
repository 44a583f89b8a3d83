"""Orchestration: one recording -> one census report per endpoint (pure, no I/O).

``census_recording(recording, options)`` runs the passes in the runbook's order:
shape proof, signals through the profile, buckets, ledger, lag test, TTFT, preemption
bursts, traps, and the verdict, and assembles the typed :class:`CensusReport` (with the
checklist of which of those steps ran on this engine's metrics, ``passes``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pdcensus.census import bootstrap
from pdcensus.census.bootstrap import interval
from pdcensus.census.buckets import (
    BucketAssignment,
    assign_buckets,
    bucket_table,
    per_stream_rate,
)
from pdcensus.census.client_felt import ClientFelt, client_felt
from pdcensus.census.domains import withhold
from pdcensus.census.dose import DoseFit, dose_response, ledger_stall_ms_per_1k
from pdcensus.census.guards import (
    GuardReason,
    counted_limits,
    history_observed,
    no_kv_tier_limits,
    shape_guards,
    verdict_limits,
)
from pdcensus.census.lag import TAIL_WINDOW_SECONDS, history, lag_test
from pdcensus.census.ledger import LedgerExcess, step_ledger
from pdcensus.census.kv_tier import kv_second_tier
from pdcensus.census.measure import Measured, verdict_inputs
from pdcensus.census.model import CensusReport, EndpointFailure, LedgerResult, LossShares, ShapeResult, Timeline
from pdcensus.census.overload import detect_overload
from pdcensus.census.passes import runbook_passes
from pdcensus.census.preemption import preemption_bursts, resume_gap_loss
from pdcensus.census.prefill_progress import PrefillBasis
from pdcensus.census.sanity import check_ledger, check_shares
from pdcensus.census.series_checks import series_traps
from pdcensus.census.shape import choose_segment, split_shapes
from pdcensus.census.signals import ShapeSignals, extract_signals
from pdcensus.census.time_checks import check_interval
from pdcensus.census.traps import REPLAY_SHARE, check_traps, replay_share
from pdcensus.census.ttft import ttft_summary
from pdcensus.census.usable import LeftOut, admit_samples, left_out_trap
from pdcensus.census.verdict import VerdictInputs, decide
from pdcensus.errors import DataError
from pdcensus.series.model import Endpoint, Family, Recording
from pdcensus.series.profiles import Detection, Signal, detect_profile
from pdcensus.sources.client_records import ClientRequest


@dataclass(frozen=True)
class CensusOptions:
    instance: str | None = None
    start: float | None = None
    end: float | None = None
    segment: int | None = None
    replicates: int = bootstrap.REPLICATES
    # per-request client records (a benchmark's), read by the caller: "what users felt" by prefill bucket
    client_records: tuple[ClientRequest, ...] = ()


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
    reports: list[CensusReport] = []
    errors: list[tuple[str, DataError]] = []
    for ep in engines:  # one bad endpoint is reported with its reason; the others' reports are kept
        try:
            reports.append(census_endpoint(ep, recording.families, source, options))
        except DataError as exc:
            errors.append((ep.instance, exc))
    if not reports:
        raise errors[0][1]  # every endpoint failed: exit 3 with the first one's reason
    if errors:
        failed = tuple(EndpointFailure(instance, str(exc)) for instance, exc in errors)
        reports = [replace(r, failed_endpoints=failed) for r in reports]
    return reports


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
    check_interval(source, scrape_interval)
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
    guards = shape_guards(s, a.busy)
    limits = verdict_limits(guards)
    if not s.rates_from_counters and GuardReason.CONTRAST_ABOVE_ONE in limits.reasons:
        # the counters' lumps do not reach a contrast bucketed by same-scrape gauges
        kept = tuple(r for r in limits.reasons if r is not GuardReason.CONTRAST_ABOVE_ONE)
        limits = replace(limits, reasons=kept, max_confidence=limits.max_confidence if kept else 1.0)
    # a scrape is clean only where its whole lookback was observed after the ramp-up and any long gap
    hist = replace(hist, clean=hist.clean & history_observed(s.times, TAIL_WINDOW_SECONDS[1], guards.window))
    W = bootstrap.weights(s.n, bootstrap.block_length(hist.heavy.astype(float)), options.replicates)

    ledger, excess = step_ledger(s, a, hist)
    if s.counted_steps is not None and excess is not None:
        limits = counted_limits(limits, ledger.decode_step_inflation_after_prefill)
    broken = check_ledger(s, p) if excess is not None else ()
    if broken:  # numbers that cannot be true never reach a verdict
        ledger = LedgerResult(False, "withheld: " + "; ".join(b.text for b in broken))
        excess = None
    lag, tail_effect = lag_test(s.times, p, wdec, a.busy, a.idle, hist, scrape_interval, W)
    pre_name = det.profile.name_of(Signal.PREEMPTIONS) or "preemptions counter"
    preemption, ploss = preemption_bursts(s.times, s.increase(Signal.PREEMPTIONS), decode, prefill, a,
                                          s.gauge(Signal.PREEMPTED_DEPTH), running, s.interval_seconds, W, pre_name,
                                          waiting=s.gauge(Signal.WAITING))
    ploss = resume_gap_loss(ploss, s.increase(Signal.PREEMPTIONS), s.counted_steps, s.chunk_intervals, W, running,
                            s.interval_seconds)
    ttft_hist = s.histograms.get(Signal.TTFT)
    basis = ("counter increase / interval (interval means, not same-scrape gauges)" if s.rates_from_counters
             else "same-scrape gauges")
    if s.prefill_basis is not None and s.prefill_basis is not PrefillBasis.GAUGE:
        basis += f"; prefill: {s.prefill_basis.value}"
    left_out = read.left_out
    warn = (("decode and prefill exist only as counters here: rates are interval means",) if s.rates_from_counters
            else ()) + tuple(x.text for x in left_out)
    table = bucket_table(a, decode, running, prefill_name="prefill", basis=basis, scrape_interval_seconds=scrape_interval,
                         ttft=ttft_hist, preemptions=s.increase(Signal.PREEMPTIONS), warnings=warn,
                         itl=s.histograms.get(Signal.ITL))
    share, replay_rate = replay_share(s)
    client_table = None
    if replay_rate is not None and np.isfinite(share) and share >= REPLAY_SHARE:
        client = np.clip(prefill - np.nan_to_num(replay_rate), 0, None)
        ca = assign_buckets(client)
        client_table = bucket_table(ca, decode, running, prefill_name="client-new prefill (prefill - replay)",
                                    basis=basis + "; replay = prefix-hit cut increase / interval",
                                    scrape_interval_seconds=scrape_interval, ttft=ttft_hist,
                                    preemptions=s.increase(Signal.PREEMPTIONS))
    window = endpoint.slice_time(options.start, options.end) if options.start or options.end else endpoint
    read_gauges = [det.profile.name_of(g) for g in (Signal.DECODE_TPS, Signal.PREFILL_TPS, Signal.RUNNING,
                                                    Signal.KV_CACHE_USAGE)]
    traps = (check_traps(s, ledger, preemption, shape) + (left_out_trap(left_out),)
             + series_traps(window, families, [n for n in read_gauges if n]))

    assert shape.analysed is not None
    reason = (shape.segments[shape.analysed - 1].reason if shape.proven
              else "the analysed shape could not be proven one shape")
    dose = dose_response(p, wdec, prefill, running, a.busy, W, ledger_ms_per_1k_tokens=_ledger_ms_per_1k(s, excess, dt),
                         basis=f"prefill: {basis}")
    dose_result, dose_withheld = withhold(dose.result, path="dose_response")
    dose = DoseFit(dose_result, dose.stall_seconds_per_token, dose.depth_at_top)
    if dose_withheld:  # a figure outside its domain is never reasoned from: the verdict reads no dose-response
        dose = DoseFit(replace(dose_result, available=False, reason="withheld: " + "; ".join(dose_withheld)),
                       None, None)
    measured = Measured(shape.proven, reason, s, a, p, wdec, hist, W, excess, running, dt, tail_effect,
                        lag.tail_test_ran, ploss, preemption, dose, tuple(b.text for b in broken), guards, limits)
    inputs = verdict_inputs(measured)
    # sharing and eviction are shares of the running decoders' time; the stall's share counts the
    # preempted sequences too, so only the first two must fit in the whole together
    shares = {"sharing": float(inputs.sharing_loss()[0]), "eviction": float(inputs.eviction_loss()[0])}
    over = check_shares(shares, ledger=excess is not None)
    if over is not None and excess is not None:  # the ledger's shares cannot be true: census without it
        ledger = LedgerResult(False, "withheld: " + over.text)
        measured = replace(measured, excess=None, withheld=measured.withheld + (over.text,))
        inputs = verdict_inputs(measured)
    elif over is not None:
        inputs = replace(inputs, withheld=inputs.withheld + (over.text,))
    tier, tier_basis = kv_second_tier(endpoint)
    inputs = replace(inputs, kv_second_tier=tier, kv_tier_basis=tier_basis)
    if tier is False and inputs.limits is not None:  # eviction is ruled out: a short window hides none
        inputs = replace(inputs, limits=no_kv_tier_limits(inputs.limits))
    verdict = replace(decide(inputs), dose_response=dose.result)
    if dose_withheld:
        verdict = replace(verdict, withheld=verdict.withheld + dose_withheld)
    losses, out_of_domain = _in_domain(_losses(inputs, ploss.basis, inputs.has_ledger))
    if out_of_domain:
        verdict = replace(verdict, withheld=verdict.withheld + out_of_domain)
    ttft = ttft_summary(ttft_hist, a, det.profile.name)
    felt = _client_felt(options.client_records, s, a.busy)
    passes = runbook_passes(det.profile, shape, ledger, table, lag, ttft, preemption, inputs)
    report = CensusReport(source, endpoint.job, endpoint.instance, det.profile.name, det.reason, verdict, shape, ledger,
                          table, client_table, lag, ttft, preemption, traps, losses, _timeline(s, running),
                          passes=passes, client_felt=felt, overload=detect_overload(s, options.replicates))
    return in_domain(report, _window_seconds(s.times, scrape_interval))


def in_domain(report: CensusReport, window_seconds: float) -> CensusReport:
    """The report with every figure outside its domain withheld and named (pdcensus.census.domains).

    The one place the report is built checks it once; the views and the advice read only what passed.
    """
    checked, notes = withhold(report, window_seconds)
    if not notes:
        return checked  # intervals clipped to their domain, perhaps
    return replace(checked, verdict=replace(checked.verdict, withheld=checked.verdict.withheld + notes))


def _window_seconds(times: np.ndarray, scrape_interval: float) -> float:
    t = np.asarray(times, dtype=np.float64)
    t = t[np.isfinite(t)]
    if t.size < 2:
        return float("nan")
    return float(t[-1] - t[0]) + (scrape_interval if np.isfinite(scrape_interval) else 0.0)


def _client_felt(records: tuple[ClientRequest, ...], s: ShapeSignals, busy: np.ndarray) -> ClientFelt | None:
    """TTFT and TPOT of the client's requests by the census's own prefill buckets (None without records)."""
    prompt = s.increase(Signal.PROMPT_TOKENS)
    if not records or prompt is None:
        return None
    return client_felt(records, s.times, np.nan_to_num(prompt), busy)


def _ledger_ms_per_1k(s: ShapeSignals, excess: LedgerExcess | None, dt: np.ndarray) -> float:
    """The ledger's own stall per 1,000 prefill tokens: (chunk step - decode-only step) per chunk token."""
    if excess is None or excess.chunk_seconds is None or not excess.chunk_steps_counted:
        return float("nan")
    v = excess.valid
    prompt = s.increase(Signal.PROMPT_TOKENS)
    tokens = (np.nansum(prompt[v]) if prompt is not None
              else np.nansum((np.nan_to_num(np.asarray(s.prefill_tokens_per_second)) * dt)[v]))
    d0 = excess.reference_step_seconds
    ref = float(np.nanmedian(d0)) if np.isfinite(d0).any() else float("nan")
    return ledger_stall_ms_per_1k(float(excess.chunk_seconds[v].sum()), float(excess.chunk_steps[v].sum()), ref,
                                  float(tokens))


_SHARES = (("step_time_sharing", "step-time sharing"), ("eviction", "eviction"),
           ("preemption_stall", "preemption stall"))


def _in_domain(losses: LossShares) -> tuple[LossShares, tuple[str, ...]]:
    """Each loss share outside [0, 1] withheld (NaN, interval NaN), with the reason for ``verdict.withheld``.

    A share of decoders' time cannot be negative or above the whole: such a point estimate (the
    bootstrap of a deficit whose baseline moved, e.g. re-prefill chunk steps beside a preemption)
    is never printed and never reasoned from.
    """
    changes: dict[str, object] = {}
    notes: list[str] = []
    for key, name in _SHARES:
        value = float(getattr(losses, key))
        if np.isfinite(value) and not 0.0 <= value <= 1.0:
            changes[key] = float("nan")
            changes[f"{key}_interval"] = (float("nan"), float("nan"))
            changes[f"{key}_basis"] = f"withheld: the estimate ({100 * value:.1f} %) lies outside [0, 1]"
            notes.append(f"{name} loss share withheld: its estimate, {100 * value:.1f} %, lies outside [0, 1] "
                         "(a share of decoders' time)")
    if not changes:
        return losses, ()
    return replace(losses, **changes), tuple(notes)  # type: ignore[arg-type]


def _losses(x: VerdictInputs, preemption_basis: str, ledger: bool) -> LossShares:
    sts, ev = x.sharing_loss(), x.eviction_loss()
    return LossShares(
        float(sts[0]), interval(sts), "ledger: chunk time beyond decode-only steps" if ledger
        else "rates: per-stream deficit while prefill runs (no ledger)",
        float(ev[0]), interval(ev), "max(lagged-tail deficit, inflated decode-only steps, deficit before recovery)"
        + (f"; not eviction here: the engine's cache config names no second KV tier ({x.kv_tier_basis})"
           if x.kv_second_tier is False else ""),
        float(x.preemption[0]), interval(x.preemption), preemption_basis,
        float(x.collapse[0]), interval(x.collapse),
    )
