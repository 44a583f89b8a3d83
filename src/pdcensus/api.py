"""The library entry point: ``pdcensus.api.census(source, **options) -> CensusReport``.

A notebook user gets exactly what the CLI prints: the CLI is this call plus rendering.
``source`` is a path (a recording file or a simulator output directory, read with
``pdcensus.sources.load.load_source``) or an in-memory :class:`Recording`.
"""

from __future__ import annotations

from pathlib import Path

from pdcensus.census.model import CensusReport
from pdcensus.census.run import CensusOptions, census_endpoint, census_recording
from pdcensus.series.model import Recording


def _recording(source: str | Path | Recording) -> Recording:
    if isinstance(source, Recording):
        return source
    from pdcensus.sources.load import load_source

    return load_source(source)


def census(
    source: str | Path | Recording,
    *,
    instance: str | None = None,
    start: float | None = None,
    end: float | None = None,
    segment: int | None = None,
) -> CensusReport:
    """The census of one endpoint (``instance`` is required when the source holds several).

    ``start``/``end`` (Unix seconds) cut the window; ``segment`` (1-based) picks a shape
    other than the latest. Raises ``DataError`` on unusable data and ``UsageError`` on a
    bad choice (an unknown instance, a segment that does not exist).
    """
    rec = _recording(source)
    options = CensusOptions(instance=instance, start=start, end=end, segment=segment)
    return census_endpoint(rec.endpoint(instance), rec.families, rec.source or str(source), options)


def census_all(
    source: str | Path | Recording,
    *,
    start: float | None = None,
    end: float | None = None,
    segment: int | None = None,
) -> list[CensusReport]:
    """One report per endpoint that carries engine metrics."""
    rec = _recording(source)
    return census_recording(rec, CensusOptions(start=start, end=end, segment=segment))
