"""The runbook's PromQL traps and metric names, found in any text that holds a query.

The same checks run on a runbook's code, a rules file's ``expr`` and a dashboard target's
``expr``: latency asked under ``radiance:`` (it exists only under the vLLM prefix),
``rate()`` over ``radiance:num_requests_preempted`` (an instant depth, not a counter), the
2-minute mean step ``engine_step_seconds_total / engine_steps_total`` (diluted by the ~95 %
decode-only steps), a query step over 30 s (a 15 s scrape against a 120 s step samples one
in eight), and, given the build's own metric set (``--metrics``), a name it does not export.
Each hit is an offset in the text, so the caller can place it at its file line and column.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from pdcensus.series.durations import parse_api_duration_seconds

MAX_QUERY_STEP_SECONDS = 30.0

_METRIC = re.compile(r"(?<![\w:])((?:radiance|vllm|sglang):[A-Za-z_][A-Za-z0-9_:]*)")
_LATENCY_WORDS = re.compile(
    r"time_to_first_token|ttft|inter_token|time_per_output|e2e|latency|decode_time|"
    r"num_requests_running|num_requests_waiting|num_preemptions"
)
_RATE_OVER_DEPTH = re.compile(
    r"\b(rate|irate|increase|delta|idelta|deriv|resets)\s*\(\s*(radiance:num_requests_preempted)\b"
)
_DILUTED = re.compile(
    r"((?:radiance:)?engine_step_seconds_total(?:\{[^}]*\})?(?:\[[^\]]*\])?\)*\s*/\s*"
    r"(?:[a-z_]+\s*(?:by\s*\([^)]*\)\s*)?\(\s*)*(?:radiance:)?engine_steps_total\b)"
)
# a written step: anything that starts like a number, read whole (``2x`` and ``1h30`` included) so
# that Prometheus's grammar, not this pattern, decides whether it is a duration
_DURATION = r"([0-9.][0-9A-Za-z.]*)"
_STEP_FORMS = (
    re.compile(r"[?&]step=" + _DURATION),
    re.compile(r"--step[= ]+" + _DURATION),
    re.compile(r"[\"']?step[\"']?\s*:\s*[\"']?" + _DURATION),
    re.compile(r"\[[^\]\[:]+:" + _DURATION + r"\]"),
)


@dataclass(frozen=True)
class QueryHit:
    """One trap or unknown name at ``offset`` in the text it was found in."""

    offset: int
    rule: str
    subject: str
    message: str


def duration_seconds(text: str) -> float:
    """A written query step in seconds, as Prometheus reads it; ValueError where Prometheus refuses it.

    Plain seconds (``120``, ``1.5``) or Prometheus's duration grammar (``2m``, ``1m30s``), the
    one parser of :mod:`pdcensus.series.durations`: ``2x``, ``1h30`` and ``1.5h`` are errors,
    not 0 or 3600 seconds.
    """
    return parse_api_duration_seconds(text)


def exported(name: str, metric_names: Collection[str]) -> bool:
    """True when the build exports ``name`` (a histogram's or counter's series count too)."""
    if name in metric_names:
        return True
    base = re.sub(r"_(bucket|count|sum|total|created)$", "", name)
    return any(base + s in metric_names for s in ("", "_total", "_bucket", "_count", "_sum"))


def query_hits(text: str, metric_names: Collection[str] | None = None,
               step_forms: bool = True) -> Iterator[QueryHit]:
    """Every trap in ``text``; ``step_forms`` off for a query string (its ``[5m:1m]`` still counts)."""
    for m in _METRIC.finditer(text):
        name = m.group(1).rstrip(":")
        if name.startswith("radiance:") and _LATENCY_WORDS.search(name):
            yield QueryHit(m.start(1), "latency-under-radiance", name,
                           f"{name}: latency, running/waiting and preemptions exist only under the "
                           f"vLLM prefix (vllm:{name.split(':', 1)[1]}); a radiance:-only query finds "
                           "no latency and reads as 'the endpoint never stalls anyone'")
        elif metric_names is not None and not exported(name, metric_names):
            yield QueryHit(m.start(1), "metric-not-exported", name,
                           f"{name} is not in the build's metric set (from --metrics)")
    for m in _RATE_OVER_DEPTH.finditer(text):
        yield QueryHit(m.start(), "rate-over-instant-depth", m.group(0) + "...",
                       f"{m.group(1)}() over {m.group(2)}, the INSTANT depth of preempted sequences "
                       "(a gauge, not a counter); count preemptions with "
                       "increase(vllm:num_preemptions_total[...])")
    for m in _DILUTED.finditer(text):
        yield QueryHit(m.start(1), "diluted-mean-step", m.group(1),
                       "engine_step_seconds_total / engine_steps_total is a mean over all steps: if ~5 % "
                       "of steps carry a third of the step time it cannot move; use the phase ratio "
                       "(step_seconds - step_seconds_decode) / (steps - steps_decode) for the chunk "
                       "step and step_seconds_decode / steps_decode for the decode-only step")
    for form in _STEP_FORMS if step_forms else _STEP_FORMS[3:]:
        for m in form.finditer(text):
            try:
                seconds = duration_seconds(m.group(1))
            except ValueError:
                yield QueryHit(m.start(), "bad-duration", m.group(0),
                               f"query step {m.group(1)} is not a duration Prometheus reads (plain seconds, or "
                               "[0-9]+ and a unit, units y w d h m s ms largest first, no fractions: 90, 1m30s); "
                               "the query is refused")
                continue
            if seconds > MAX_QUERY_STEP_SECONDS:
                yield QueryHit(m.start(), "query-step-over-30s", m.group(0),
                               f"query step {m.group(1)} = {seconds:g} s > {MAX_QUERY_STEP_SECONDS:g} s: "
                               "a 15 s scrape against a 120 s step samples one in eight; use a step "
                               "of 30 s or less (and no longer than the scrape interval)")
