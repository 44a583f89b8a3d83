"""Discover the fleet: every ``(job, instance)`` with engine metrics under a selector, and its metric profile.

One ``/api/v1/series`` call with the engine families (histogram buckets left out: one series per
name is enough) lists every endpoint of the window and the sample names it exports; the names
decide each endpoint's profile (:func:`pdcensus.series.profiles.detect_profile`), so that the
screen asks each endpoint for the names its engine build really exports.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdcensus.series.profiles import detect_profile
from pdcensus.sources.prometheus_http import ApiClient

ENGINE_NAMES = '__name__=~"(radiance|vllm|sglang):.+",__name__!~".+_bucket"'
"""Engine families, histogram buckets left out: discovery needs one series per endpoint, not hundreds."""

_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$-")


@dataclass(frozen=True)
class Discovered:
    """One endpoint of the fleet and the profile its sample names match ('' when none does)."""

    job: str
    instance: str
    profile: str


def re2_literal(value: str) -> str:
    """``value`` as an RE2 pattern matching only itself (only punctuation is escaped: RE2 refuses ``\\ ``)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in value)


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


async def discover_endpoints(client: ApiClient, matchers: str, start: float, end: float) -> list[Discovered]:
    """Every endpoint with an engine metric under ``matchers`` in the window, sorted, with its profile."""
    match = "{" + ",".join(m for m in (matchers, ENGINE_NAMES) if m) + "}"
    data, _ = await client.call("/api/v1/series", {"match[]": [match], "start": f"{start:.3f}", "end": f"{end:.3f}"},
                                post=True)
    names: dict[tuple[str, str], set[str]] = {}
    for series in data or []:
        key = (str(series.get("job", "")), str(series.get("instance", "")))
        names.setdefault(key, set()).add(str(series.get("__name__", "")))
    out = []
    for (job, instance), found in sorted(names.items()):
        detection = detect_profile(found)
        out.append(Discovered(job, instance, detection.profile.name if detection else ""))
    return out


def batches(pairs: list[tuple[str, str]], batch_size: int) -> list[tuple[str, list[str]]]:
    """``(job, instances)`` groups of at most ``batch_size`` instances of one job, in order."""
    by_job: dict[str, list[str]] = {}
    for job, instance in pairs:
        by_job.setdefault(job, []).append(instance)
    return [(job, instances[i:i + batch_size]) for job, instances in by_job.items()
            for i in range(0, len(instances), batch_size)]


def batch_selector(matchers: str, job: str, instances: list[str]) -> str:
    """The selector of one batch: the user's matchers, the job, and the instances (one regex)."""
    if len(instances) == 1:
        instance = f"instance={quote(instances[0])}"
    else:
        instance = f"instance=~{quote('|'.join(re2_literal(i) for i in instances))}"
    job_matcher = f"job={quote(job)}"
    if job_matcher in matchers.split(","):
        job_matcher = ""
    return "{" + ",".join(m for m in (matchers, job_matcher, instance) if m) + "}"
