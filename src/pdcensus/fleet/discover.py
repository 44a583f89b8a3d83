"""Discover the fleet: every ``(job, instance)`` with engine metrics under a selector, and its metric profile.

One ``/api/v1/series`` call with the engine families (histogram buckets left out: one series per
name is enough) lists every endpoint of the window and the sample names it exports; the names
decide each endpoint's profile (:func:`pdcensus.series.profiles.detect_profile`), so that the
screen asks each endpoint for the names its engine build really exports.

:func:`discover_engines` is the same look for ``census --prometheus`` without a selector: the
families of every known profile (:func:`engine_names_matcher`), and every target's ``up`` so
that the endpoints without engine metrics can be named as skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import math
import statistics

from pdcensus.queries.promql_export import prometheus_duration
from pdcensus.series.profiles import Signal, detect_profile, get_profile
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


GENERIC_NAMES = frozenset({"up", "process_start_time_seconds"})
"""Names a profile reads that any exporter may have: they do not make a target an engine."""


def engine_names_matcher() -> str:
    """``__name__=~"..."`` over every sample name a known profile reads (engine-specific ones, no buckets)."""
    from pdcensus.series.profiles import census_sample_names

    names = sorted(n for n in census_sample_names() - GENERIC_NAMES if not n.endswith("_bucket"))
    return f"__name__=~{quote('|'.join(re2_literal(n) for n in names))}"


LISTED = 8  # endpoints named one by one in a discovery line; the rest are counted


def _listed(pairs: list[str]) -> str:
    more = f", and {len(pairs) - LISTED} more" if len(pairs) > LISTED else ""
    return ", ".join(pairs[:LISTED]) + more


@dataclass(frozen=True)
class EngineDiscovery:
    """The engine endpoints a store holds in a window (with their profiles), and the targets without engine metrics."""

    engines: tuple[Discovered, ...]
    others: tuple[tuple[str, str], ...]  # (job, instance) with ``up`` but no engine family

    def taken(self) -> list[Discovered]:
        """The endpoints a census reads: those whose names match a profile."""
        return [e for e in self.engines if e.profile]

    def skipped(self) -> list[str]:
        """``job/instance (why)`` for every target not taken."""
        return ([f"{e.job}/{e.instance} (engine names of no known profile)" for e in self.engines if not e.profile]
                + [f"{job}/{instance} (no engine metrics)" for job, instance in self.others])

    def selector(self) -> str:
        """A selector holding every endpoint taken: jobs x instances (an extra pair has no engine metrics to census)."""
        taken = self.taken()
        jobs = sorted({e.job for e in taken})
        instances = sorted({e.instance for e in taken})
        return "{" + ",".join([f"job=~{quote('|'.join(re2_literal(j) for j in jobs))}",
                               f"instance=~{quote('|'.join(re2_literal(i) for i in instances))}"]) + "}"

    def describe(self) -> str:
        """One line: which endpoints were taken (with their profiles) and which skipped."""
        taken = [f"{e.job}/{e.instance} ({e.profile})" for e in self.taken()]
        skipped = self.skipped()
        line = f"took {len(taken)} engine endpoint(s) the store holds: {_listed(taken)}"
        return line + (f"; skipped {len(skipped)}: {_listed(skipped)}" if skipped else "; skipped none")

    def nothing_taken(self, url: str, start: float, end: float) -> str:
        """Why no census can run: no endpoint exported any known profile's families in the window."""
        from pdcensus.series.profiles import PROFILES

        skipped = self.skipped()
        seen = f"; the store holds only {_listed(skipped)}" if skipped else "; the store holds no target at all"
        return (f"{url}: no engine endpoint between {start:.3f} and {end:.3f} (looked for the metric families of "
                f"every profile: {', '.join(PROFILES)}){seen}; give --selector to name the endpoints")


async def discover_engines(client: ApiClient, matchers: str, start: float, end: float) -> EngineDiscovery:
    """Every endpoint with the families of some known profile under ``matchers``, and the targets without any."""
    engines = await discover_endpoints(client, matchers, start, end, engine_names_matcher())
    match = "{" + ",".join(m for m in (matchers, '__name__="up"') if m) + "}"
    data, _ = await client.call("/api/v1/series", {"match[]": [match], "start": f"{start:.3f}", "end": f"{end:.3f}"},
                                post=True)
    known = {(e.job, e.instance) for e in engines}
    others = sorted({(str(s.get("job", "")), str(s.get("instance", ""))) for s in data or []} - known)
    return EngineDiscovery(tuple(engines), tuple(others))


async def discover_endpoints(client: ApiClient, matchers: str, start: float, end: float,
                             name_matcher: str = ENGINE_NAMES) -> list[Discovered]:
    """Every endpoint with an engine metric under ``matchers`` in the window, sorted, with its profile.

    ``name_matcher`` (a ``__name__`` matcher) says which names are engine metrics.
    """
    match = "{" + ",".join(m for m in (matchers, name_matcher) if m) + "}"
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


async def scrape_interval(client: ApiClient, matchers: str, endpoints: list[Discovered], start: float,
                          end: float) -> tuple[float | None, str]:
    """The fleet's scrape interval, read from the store: the median over endpoints of window / samples.

    Per profile, two queries on its running gauge: the samples in the window (``count_over_time``
    on raw samples) and the endpoint's own span (first to last ``timestamp`` seen at 1-minute steps:
    an endpoint may start or stop inside the window). The screen's step must be the scrape interval: at a step longer than the
    scrapes each step sums several of them (real vLLM scraped every second and screened at 15 s
    ranked its runs at Spearman 0.65 against the census, 0.86 at 1 s). Returns the interval in
    whole seconds (None when no endpoint has two samples) and a line saying how it was read.
    """
    window = prometheus_duration(end - start)
    per_endpoint: list[float] = []
    for name in sorted({e.profile for e in endpoints if e.profile}):
        running = get_profile(name).name_of(Signal.RUNNING)
        if running is None:
            continue
        sel = running + ("{" + matchers + "}" if matchers else "")
        # an endpoint's own span (it may start or stop inside the window), to the minute, and its samples
        span = (f"max by (job, instance) (max_over_time(timestamp({sel})[{window}:1m]) - "
                f"min_over_time(timestamp({sel})[{window}:1m]))")
        count = f"max by (job, instance) (count_over_time({sel}[{window}]))"
        answers = []
        for expr in (span, count):
            data, _ = await client.call("/api/v1/query", {"query": expr, "time": f"{end:.3f}"}, post=True)
            answers.append({(str(i["metric"].get("job", "")), str(i["metric"].get("instance", ""))): float(i["value"][1])
                            for i in (data or {}).get("result") or []})
        for key, samples in answers[1].items():
            seconds = answers[0].get(key, math.nan)
            if samples >= 2 and seconds > 0:
                per_endpoint.append(seconds / (samples - 1))
    if not per_endpoint:
        return None, "no endpoint has two samples of its running gauge in the window"
    median = statistics.median(per_endpoint)
    seconds = max(1.0, float(round(median)))
    spread = f"{min(per_endpoint):.1f}-{max(per_endpoint):.1f} s" if len(per_endpoint) > 1 else f"{median:.1f} s"
    mixed = "" if math.isclose(min(per_endpoint), max(per_endpoint), rel_tol=0.5) else (
        " (the endpoints' intervals differ: pass --step for the ones you mean)")
    return seconds, f"scrape interval {seconds:g} s (median of {len(per_endpoint)} endpoint(s), {spread}){mixed}"


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
