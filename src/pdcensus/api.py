"""The library entry point: ``pdcensus.api.census(source, **options) -> EndpointReport``.

A notebook user gets exactly what the CLI prints: the CLI is these calls plus rendering.
``source`` is a path (a recording file or a simulator output directory, read with
``pdcensus.sources.load.load_source``) or an in-memory :class:`Recording`;
:func:`census_prometheus` reads a Prometheus-compatible API instead. Every report comes
back with its advice attached (census -> advice), citing the side channels it used, and
:func:`tables` turns its evidence tables into polars DataFrames (``.to_pandas()`` needs pandas
and pyarrow, which pdcensus does not install).

::

    import pdcensus.api as pdc
    report = pdc.census("out/")              # a sim output dir or a recording file
    report.verdict.mechanism, report.verdict.confidence
    pdc.tables(report)["buckets"]            # a polars DataFrame
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from pdcensus.advice.endpoint_report import EndpointReport
from pdcensus.advice.ttft_replay import PrefillTrace, trace_from_signals
from pdcensus.census.model import CensusReport
from pdcensus.census.run import CensusOptions, census_endpoint, census_recording, read_shape
from pdcensus.errors import CensusError, DataError, UsageError
from pdcensus.series.model import Recording
from pdcensus.sources.client_records import load_client_records
from pdcensus.sources.vllm_build import vllm_build

if TYPE_CHECKING:
    from pdcensus.advice.evidence import Argv
    from pdcensus.fleet.discover import EngineDiscovery
    from pdcensus.sources.bundle import Bundle
    from pdcensus.sources.prometheus_http import AuthConfig

AUTO = "auto"  # evidence: look for side channels beside the source (a sim output dir)


def _recording(source: str | Path | Recording) -> Recording:
    if isinstance(source, Recording):
        return source
    from pdcensus.sources.load import load_source

    return load_source(source)


def prefill_trace(recording: Recording, report: CensusReport, start: float | None = None,
                  end: float | None = None) -> PrefillTrace | None:
    """The TTFT replay's trace of the shape a census report analysed (None if it cannot be found again).

    The census's own reading of that shape (:func:`pdcensus.census.run.read_shape`): the same
    samples, shapes and signals, so the replay sees what the census saw.
    """
    endpoint = next((ep for ep in recording.endpoints if ep.instance == report.instance and ep.job == report.job),
                    None)
    if endpoint is None or report.shape.analysed is None:
        return None
    try:
        read = read_shape(endpoint, recording.families, recording.source or "recording", report.shape.analysed,
                          start, end)
    except CensusError:
        return None
    if read.rows.size < 2:
        return None
    return trace_from_signals(read.signals)


def _with_argv(bundle: Bundle | None, argv: Argv | None) -> Bundle | None:
    """``bundle`` with its argv replaced by ``argv`` (a bundle of argv alone when there is none)."""
    from pdcensus.sources.bundle import Bundle

    if argv is None:
        return bundle
    if bundle is None:
        return Bundle(source=argv.origin, manifest={}, argv=argv.args, stats=None, diagnostics=None,
                      metrics_text=None)
    return replace(bundle, argv=argv.args, source=f"{bundle.source} (argv from {argv.origin})")


def _advise(reports: Sequence[CensusReport], source: object, evidence: str | Path | None,
            target_decode_share: float | None, recording: Recording | None = None,
            start: float | None = None, end: float | None = None, argv: Argv | None = None) -> list[EndpointReport]:
    """Read the side channels and the prefill traces (the I/O stays here), then attach each report's advice."""
    from pdcensus.advice.attach import attach_advice
    from pdcensus.advice.recommend import DEFAULT_TARGET_DECODE_SHARE
    from pdcensus.sources.bundle import find_side_channels, read_bundle

    asked = evidence is not None and evidence != AUTO  # named by the caller: unreadable is an error
    if evidence == AUTO:
        evidence = find_side_channels(source) if isinstance(source, (str, Path)) else None
    bundle: Bundle | None = None
    unreadable: str | None = None
    if evidence is not None:
        try:
            bundle = read_bundle(evidence)
        except DataError as exc:
            if asked:
                raise DataError(f"--evidence: {exc}") from None
            unreadable = str(exc)
    bundle = _with_argv(bundle, argv)
    share = DEFAULT_TARGET_DECODE_SHARE if target_decode_share is None else target_decode_share
    return [attach_advice(r, bundle, share,
                          prefill_trace(recording, r, start, end) if recording is not None else None,
                          unreadable, {**_config_flags(recording, r), **vllm_build(bundle.argv if bundle else None)})
            for r in reports]


def _config_flags(recording: Recording | None, report: CensusReport) -> dict[str, str]:
    """What the engine's own config labels say is deployed (vLLM's vllm:cache_config_info)."""
    from pdcensus.advice.deploy import deployed_from_labels

    if recording is None or report.instance not in recording.instances():
        return {}
    return deployed_from_labels(recording.endpoint(report.instance))


def census(
    source: str | Path | Recording,
    *,
    instance: str | None = None,
    start: float | None = None,
    end: float | None = None,
    segment: int | None = None,
    evidence: str | Path | None = AUTO,
    target_decode_share: float | None = None,
    argv: Argv | None = None,
) -> EndpointReport:
    """The census of one endpoint (``instance`` is required when the source holds several).

    ``start``/``end`` (Unix seconds) cut the window; ``segment`` (1-based) picks a shape
    other than the latest. ``evidence`` is a bundle from ``pdcensus collect`` or a sim
    output dir (argv, boot ledger, /stats) for the advice; ``"auto"`` looks beside the
    source. ``argv`` (:func:`pdcensus.advice.evidence.read_argv`: a saved cmdline or a pid)
    is the deployed command line, read instead of the bundle's. Raises ``DataError`` on
    unusable data and ``UsageError`` on a bad choice.
    """
    rec = _recording(source)
    options = CensusOptions(instance=instance, start=start, end=end, segment=segment)
    report = census_endpoint(rec.endpoint(instance), rec.families, rec.source or str(source), options)
    return _advise([report], source, evidence, target_decode_share, rec, start, end, argv)[0]


def census_all(
    source: str | Path | Recording,
    *,
    instance: str | None = None,
    start: float | None = None,
    end: float | None = None,
    segment: int | None = None,
    evidence: str | Path | None = AUTO,
    target_decode_share: float | None = None,
    warnings: Sequence[str] = (),
    client_records: str | Path | None = None,
    argv: Argv | None = None,
    twin: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[EndpointReport]:
    """One report per endpoint that carries engine metrics (or only ``instance``).

    ``twin``: also run the calibrated twin (``pdcensus whatif``) on each recommendation that is not
    minor, and carry its prediction beside the closed form's (:mod:`pdcensus.whatif.advice_check`;
    a few seconds per recommendation, each announced through ``progress``).

    ``client_records``: a benchmark's per-request records (the InferenceX harness CSV, GuideLLM or
    vLLM ``benchmark_serving`` JSON) for the report's "what users felt" by prefill bucket.
    """
    rec = _recording(source)
    records = tuple(load_client_records(client_records)) if client_records is not None else ()
    reports = census_recording(rec, CensusOptions(instance=instance, start=start, end=end, segment=segment,
                                                  client_records=records))
    if warnings:
        reports = [replace(r, source_warnings=tuple(warnings)) for r in reports]
    advised = _advise(reports, source, evidence, target_decode_share, rec, start, end, argv)
    return [_twin_checked(rec, r, progress) for r in advised] if twin else advised


def _twin_checked(recording: Recording, report: EndpointReport,
                  progress: Callable[[str], None] | None) -> EndpointReport:
    from pdcensus.whatif.advice_check import check_report

    return check_report(recording, report, progress=progress)


def discover_prometheus(
    url: str,
    *,
    selector: str = "",
    start: float,
    end: float,
    auth: AuthConfig | None = None,
    timeout_seconds: float = 30.0,
) -> EngineDiscovery:
    """The engine endpoints a Prometheus-compatible API holds in ``[start, end]`` under ``selector``.

    Every endpoint with the families of some known metric profile (radiance, vLLM, SGLang, TGI,
    llama.cpp), with the profile its names match, and the targets with ``up`` but none of those
    families (skipped). ``.selector()`` is a selector holding the endpoints taken; a store with
    none in the window is a ``DataError`` (exit 3) that names what it holds instead.
    """
    import asyncio

    from pdcensus.fleet.discover import discover_engines
    from pdcensus.sources.prometheus import selector_matchers
    from pdcensus.sources.prometheus_http import ApiClient

    if not end > start:
        raise UsageError(f"the window must end after it starts (start={start}, end={end})")
    matchers = selector_matchers(selector)

    async def run() -> EngineDiscovery:
        async with ApiClient(url, auth=auth, timeout_seconds=timeout_seconds) as client:
            return await discover_engines(client, matchers, start, end)

    found = asyncio.run(run())
    if not found.taken():
        raise DataError(found.nothing_taken(url, start, end))
    return found


def census_prometheus(
    url: str,
    *,
    selector: str | None = None,
    start: float,
    end: float,
    instance: str | None = None,
    segment: int | None = None,
    auth: AuthConfig | None = None,
    timeout_seconds: float = 30.0,
    evidence: str | Path | None = None,
    target_decode_share: float | None = None,
    argv: Argv | None = None,
    twin: bool = False,
    progress: Callable[[str], None] | None = None,
) -> list[EndpointReport]:
    """The census of every endpoint under ``selector`` on a Prometheus-compatible API.

    Only the sample names some profile reads are pulled, as raw samples, so the census's
    own PromQL-exact math runs on what the server stored; the server's warnings (Thanos
    partial responses, a fallback to resampled data) travel in each report. With no
    ``selector``, the engine endpoints the store holds (:func:`discover_prometheus`).
    """
    from pdcensus.series.profiles import census_sample_names
    from pdcensus.sources.prometheus import fetch_recording

    if selector is None:
        selector = discover_prometheus(url, start=start, end=end, auth=auth, timeout_seconds=timeout_seconds).selector()
    recording, warnings = fetch_recording(url, selector=selector, start=start, end=end,
                                          names=census_sample_names(), auth=auth, timeout=timeout_seconds)
    return census_all(recording, instance=instance, segment=segment, evidence=evidence,
                      target_decode_share=target_decode_share, warnings=warnings, argv=argv, twin=twin,
                      progress=progress)


def tables(report: CensusReport) -> dict[str, pl.DataFrame]:
    """The report's evidence tables as polars DataFrames (``.to_pandas()`` also needs pandas and pyarrow)."""
    from pdcensus.census.model import plain

    def frame(rows: Sequence[Any]) -> pl.DataFrame:
        return pl.DataFrame([plain(r) for r in rows]) if rows else pl.DataFrame()

    out = {
        "evidence": frame(report.verdict.evidence),
        "segments": frame(report.shape.segments),
        "buckets": frame(report.buckets.rows if report.buckets else ()),
        "ledger_by_bucket": frame(report.ledger.by_bucket),
        "lag": frame(report.lag.points),
        "preemption_bursts": frame(report.preemption.bursts),
        "traps": frame(report.traps),
    }
    if report.timeline is not None:
        out["timeline"] = pl.DataFrame(plain(report.timeline))
    if report.ledger.timeline is not None:
        out["ledger_timeline"] = pl.DataFrame(plain(report.ledger.timeline))
    return out
