"""Examine: the full census, from raw samples, of the endpoints the screen picked.

The picked endpoints are pulled through the Prometheus source
(:func:`pdcensus.sources.prometheus.fetch_recording_async`) in batches of ``batch_size``
instances (one selector ``instance=~"a|b|..."`` per batch, so the number of queries grows with the
number of sample names, not with the endpoints), ``concurrency`` batches at a time; only the
sample names some metric profile reads are pulled. The census is CPU work and runs in a worker
thread so that the event loop keeps the other batches' queries moving. An endpoint whose data
cannot be censused keeps its one-line reason; a store that cannot be reached stops the run.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from pdcensus.census.model import CensusReport
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.errors import CensusError, SourceUnreachableError
from pdcensus.fleet.discover import batch_selector
from pdcensus.fleet.rank import Examined
from pdcensus.series.model import Recording
from pdcensus.sources.prometheus import fetch_recording_async
from pdcensus.sources.prometheus_http import AuthConfig


def census_names() -> set[str]:
    """Every sample name a census reads (:func:`pdcensus.series.profiles.census_sample_names`: the
    profiles', the ledger's and rate terms', vLLM's prefill-reconstruction names), plus the process start."""
    from pdcensus.series.profiles import census_sample_names

    return census_sample_names() | {"process_start_time_seconds"}


def report_file_name(job: str, instance: str) -> str:
    """A file name for one endpoint's full report: only ``[A-Za-z0-9._-]``, unique per (job, instance)."""
    import hashlib

    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{job}_{instance}").strip("._")[:80]
    digest = hashlib.sha256(f"{job}\0{instance}".encode()).hexdigest()[:8]
    return f"{slug}-{digest}.html"


@dataclass(frozen=True)
class ExamineOutcome:
    """One examined endpoint: its census summed up and as JSON, or why there is none."""

    job: str
    instance: str
    examined: Examined | None
    report_json: dict[str, Any] | None
    error: str | None
    warnings: tuple[str, ...]
    seconds: float


def _census_one(recording: Recording, instance: str, html_dir: Path | None, job: str) -> CensusReport:
    report = census_recording(recording, CensusOptions(instance=instance))[0]
    if html_dir is not None:
        from pdcensus.report.html import write_html

        write_html(report, html_dir / report_file_name(job, instance))
    return report


async def examine_batch(base_url: str, matchers: str, job: str, instances: list[str], start: float, end: float,
                        *, auth: AuthConfig | None, limit: asyncio.Semaphore, timeout: float,
                        html_dir: Path | None = None, transport: httpx.AsyncBaseTransport | None = None,
                        on_endpoint: Callable[[ExamineOutcome], None] | None = None) -> list[ExamineOutcome]:
    """Fetch one batch of endpoints in one pull, then census each of them."""
    async with limit:
        began = time.monotonic()
        try:
            recording, warnings = await fetch_recording_async(
                base_url, selector=batch_selector(matchers, job, instances), start=start, end=end,
                names=census_names(), auth=auth, timeout=timeout, concurrency=4, transport=transport)
        except SourceUnreachableError:
            raise
        except CensusError as exc:
            failed = [ExamineOutcome(job, i, None, None, str(exc), (), time.monotonic() - began) for i in instances]
            for outcome in failed:
                if on_endpoint is not None:
                    on_endpoint(outcome)
            return failed
        fetched = (time.monotonic() - began) / len(instances)
        out = []
        for instance in instances:
            t0 = time.monotonic()
            try:
                report = await asyncio.to_thread(_census_one, recording, instance, html_dir, job)
            except CensusError as exc:
                outcome = ExamineOutcome(job, instance, None, None, str(exc), (), fetched + time.monotonic() - t0)
            else:
                outcome = ExamineOutcome(job, instance, Examined.from_report(report), report.to_dict(), None,
                                         tuple(warnings), fetched + time.monotonic() - t0)
            out.append(outcome)
            if on_endpoint is not None:
                on_endpoint(outcome)
    return out
