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
_DURATION = r"(\d+(?:\.\d+)?(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*)"
_STEP_FORMS = (
    re.compile(r"[?&]step=" + _DURATION + r"\b"),
    re.compile(r"--step[= ]+" + _DURATION + r"\b"),
    re.compile(r"[\"']?step[\"']?\s*:\s*[\"']?" + _DURATION + r"\b"),
    re.compile(r"\[[^\]\[:]+:" + _DURATION + r"\]"),
)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}


@dataclass(frozen=True)
class QueryHit:
    """One trap or unknown name at ``offset`` in the text it was found in."""

    offset: int
    rule: str
    subject: str
    message: str


def duration_seconds(text: str) -> float:
    """A Prometheus duration (``2m``, ``1m30s``, ``120``) in seconds."""
    if re.fullmatch(r"\d+(?:\.\d+)?", text):
        return float(text)
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|[smhdwy])", text))


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
            seconds = duration_seconds(m.group(1))
            if seconds > MAX_QUERY_STEP_SECONDS:
                yield QueryHit(m.start(), "query-step-over-30s", m.group(0),
                               f"query step {m.group(1)} = {seconds:g} s > {MAX_QUERY_STEP_SECONDS:g} s: "
                               "a 15 s scrape against a 120 s step samples one in eight; use a step "
                               "of 30 s or less (and no longer than the scrape interval)")
