"""PromQL for each census quantity, to paste into Grafana or record as Prometheus rules.

``census_queries(profile)`` returns one :class:`CensusQuery` per quantity the census reads
(the step ledger's phase ratio, per-stream decode rate, TTFT by quantile, preemption
increase, ...), each naming the runbook trap it steps around. ``render_promql`` writes them
as commented PromQL for ``pdcensus promql``; ``render_rules`` writes a Prometheus
recording-rules file that ``promtool check rules`` accepts.

Sample names come from :mod:`pdcensus.series.profiles`, never typed here. Every expression
aggregates ``by (job, instance)`` so that numerator and denominator match one endpoint
whatever other labels (``model_name``) an engine adds, and every denominator is filtered
``> 0`` so an idle window gives no sample instead of ``NaN``/``+Inf``.

The rules file is written by hand, not by a YAML library, because it carries a comment per
rule (the trap it avoids) and the expressions are emitted as block scalars, which need no
escaping; the tests run the real ``promtool check rules`` on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import promql_parser

from pdcensus.errors import UsageError
from pdcensus.series.profiles import Profile, Signal

GRAFANA_WINDOWS = ("$__rate_interval", "$__interval", "$__range")
BY = "sum by (job, instance)"
STEP_HINT = (
    "Query step: the scrape interval or less, and never more than 30 s. A 15 s scrape read with a "
    "120 s step samples one scrape in eight and averages the chunk away. In Grafana set the panel's "
    "Min interval to the scrape interval; [$__rate_interval] then spans at least four scrapes."
)
TTFT_QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class CensusQuery:
    """One census quantity as PromQL: what it is, its expression, and the trap it avoids."""

    key: str  # stable id, e.g. "decode_only_step_seconds"
    title: str
    expr: str
    unit: str  # Grafana unit id ("s", "short", "percentunit", ...)
    avoids: str
    operation: str  # the recording rule's operation part, e.g. "mean1m"
    panel: str  # which dashboard panel shows it

    def record_name(self) -> str:
        """The recording-rule name, ``level:metric:operations`` as Prometheus recommends."""
        return f"job_instance:pdcensus_{self.key}:{self.operation}"


def normalize_selector(selector: str) -> str:
    """The label matchers inside ``{...}`` (braces optional), checked by a PromQL parser."""
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1].strip()
    if not inner:
        return ""
    if "\n" in inner or "\r" in inner or "{" in inner or "}" in inner:
        raise UsageError(f"bad selector {selector!r}; give label matchers like '{{job=\"radiance\"}}'")
    try:
        promql_parser.parse("up{" + inner + "}")
    except ValueError as exc:
        raise UsageError(
            f"bad selector {selector!r} ({exc}); give label matchers like '{{job=\"radiance\"}}'"
        ) from None
    return inner


def check_window(window: str, *, allow_grafana: bool) -> str:
    """A range-vector window: a Prometheus duration, or (for dashboards) a Grafana variable."""
    if window in GRAFANA_WINDOWS:
        if allow_grafana:
            return window
        raise UsageError(f"window {window!r} is a Grafana variable; recording rules need a duration like 1m")
    try:
        promql_parser.parse_duration(window)
    except (ValueError, OverflowError):
        choices = "a duration like 1m or 90s" + (", or " + ", ".join(GRAFANA_WINDOWS) if allow_grafana else "")
        raise UsageError(f"bad window {window!r}; use {choices}") from None
    return window


def prometheus_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration: 60 -> '1m', 90 -> '1m30s', 0.5 -> '500ms'."""
    ms = int(round(seconds * 1000))
    if ms <= 0:
        raise UsageError(f"duration must be positive, got {seconds!r} s")
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(parts)


def offset_clause(seconds: float) -> str:
    """`` offset <d>`` to move a selector ``seconds`` back in time ('' for none)."""
    return f" offset {prometheus_duration(seconds)}" if seconds > 0 else ""


def _operation_suffix(window: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "", window) or "window"


def census_queries(profile: Profile, *, selector: str = "", window: str = "$__rate_interval",
                   offset_seconds: float = 0.0) -> list[CensusQuery]:
    """Every census quantity this profile's metric set can express, as PromQL.

    ``offset_seconds`` moves every selector back in time (``offset``), so a quantity as it was a
    while ago is one plain expression, not a subquery (the fleet screen's lags).
    """
    inner = normalize_selector(selector)
    window = check_window(window, allow_grafana=True)
    w = _operation_suffix(window)
    off = offset_clause(offset_seconds)

    def sel(signal: Signal, suffix: str = "") -> str:
        name = profile.name_of(signal)
        assert name is not None
        return f"{name}{suffix}{{{inner}}}" if inner else f"{name}{suffix}"

    def instant(signal: Signal) -> str:
        return f"{sel(signal)}{off}"

    def increase(signal: Signal) -> str:
        return f"{BY} (increase({sel(signal)}[{window}]{off}))"

    def rate(signal: Signal) -> str:
        return f"{BY} (rate({sel(signal)}[{window}]{off}))"

    out: list[CensusQuery] = []
    shape_counter = Signal.STEPS if profile.has(Signal.STEPS) else Signal.GENERATION_TOKENS
    if profile.has(shape_counter):
        out.append(CensusQuery(
            "counter_resets", "Counter resets (a new shape starts)",
            f"{BY} (resets({sel(shape_counter)}[{window}]{off}))", "short",
            "ranking buckets across a restart or a build change: every counter resets there, so a "
            "window with a reset is two shapes", f"resets{w}", "Shape"))
    if profile.has_ledger:
        decode = f"{increase(Signal.STEP_SECONDS_DECODE)} / ({increase(Signal.STEPS_DECODE)} > 0)"
        chunk = (f"({increase(Signal.STEP_SECONDS)} - {increase(Signal.STEP_SECONDS_DECODE)}) / "
                 f"(({increase(Signal.STEPS)} - {increase(Signal.STEPS_DECODE)}) > 0)")
        dilution = ("a mean step (step_seconds/steps) dilutes the chunk: when ~5 % of steps carry a third "
                    "of the step time the mean cannot move; the phase ratio splits the two")
        out += [
            CensusQuery("decode_only_step_seconds", "Mean decode-only step", decode, "s",
                        dilution, f"mean{w}", "Step ledger"),
            CensusQuery("chunk_step_seconds", "Mean chunk step", chunk, "s",
                        dilution, f"mean{w}", "Step ledger"),
            CensusQuery("phase_ratio", "Phase ratio (chunk step / decode-only step)",
                        f"({chunk}) / ({decode})", "short",
                        "reading a rate collapse as eviction: flat decode-only steps with long chunk steps "
                        "are step-time sharing", f"ratio{w}", "Phase ratio"),
            CensusQuery("chunk_step_time_share", "Chunk steps' share of step time",
                        f"1 - {increase(Signal.STEP_SECONDS_DECODE)} / ({increase(Signal.STEP_SECONDS)} > 0)",
                        "percentunit", dilution, f"share{w}", "Phase ratio"),
        ]
    if profile.has(Signal.STEPS_HELD):
        out.append(CensusQuery(
            "held_steps", "Held steps (--prefill-interleave)", increase(Signal.STEPS_HELD), "short",
            "assuming a deployed --prefill-interleave engaged: if this stays zero, nothing is protecting "
            "decoders", f"increase{w}", "Held steps"))
    same_scrape = ("bucketing decode by prefill from different scrapes: read both at the same step, "
                   "at most 30 s and at most the scrape interval")
    decode_rate, op = "", f"rate{w}"
    if profile.has(Signal.DECODE_TPS):
        decode_rate, op = f"{BY} ({instant(Signal.DECODE_TPS)})", "sum"
    elif profile.has(Signal.GENERATION_TOKENS):
        decode_rate = rate(Signal.GENERATION_TOKENS)
    prefill_rate = (f"{BY} ({instant(Signal.PREFILL_TPS)})" if profile.has(Signal.PREFILL_TPS)
                    else rate(Signal.PROMPT_TOKENS) if profile.has(Signal.PROMPT_TOKENS) else "")
    if decode_rate:
        out.append(CensusQuery("decode_tokens_per_second", "Decode tokens/s", decode_rate, "short",
                               same_scrape, op, "Decode and prefill"))
    if prefill_rate:
        out.append(CensusQuery("prefill_tokens_per_second", "Prefill tokens/s", prefill_rate, "short",
                               same_scrape, "sum" if profile.has(Signal.PREFILL_TPS) else f"rate{w}",
                               "Decode and prefill"))
    if decode_rate and profile.has(Signal.RUNNING):
        out.append(CensusQuery(
            "per_stream_decode_tokens_per_second", "Per-stream decode rate (decode / running)",
            f"{decode_rate} / ({BY} ({instant(Signal.RUNNING)}) > 0)", "short",
            "reading the batch-pooled decode gauge as one stream's speed: a fuller batch hides a "
            "slower stream", op, "Per-stream decode rate"))
    if profile.has(Signal.TTFT):
        ttft_name = profile.name_of(Signal.TTFT)
        for q in TTFT_QUANTILES:
            pct = f"p{q * 100:g}".replace(".", "_")
            out.append(CensusQuery(
                f"ttft_seconds_{pct}", f"TTFT {pct}",
                f"histogram_quantile({q:g}, sum by (job, instance, le) "
                f"(rate({sel(Signal.TTFT, '_bucket')}[{window}]{off})))", "s",
                f"latency asked under radiance: (it exists only as {ttft_name}); an arriving request "
                "pays the same steps and shows in no decode number", f"{pct}_{w}", "TTFT"))
    if profile.has(Signal.PREEMPTIONS):
        depth = profile.name_of(Signal.PREEMPTED_DEPTH)
        avoid = (f"reading {depth}, the instant depth, as a count; preemptions are the counter's increase"
                 if depth else "reading an instant queue depth as a count; preemptions are the counter's increase")
        out.append(CensusQuery("preemptions", "Preemptions", increase(Signal.PREEMPTIONS), "short",
                               avoid, f"increase{w}", "Preemptions"))
    if profile.has(Signal.PREFIX_HIT_CUT_TOKENS):
        out.append(CensusQuery(
            "prefix_hit_cut_tokens_per_second", "Prefix-hit cut tokens replayed as prefill",
            rate(Signal.PREFIX_HIT_CUT_TOKENS), "short",
            "taking all prefill for client load: a prefix hit on the hybrid model reuses only up to the last "
            "linear-state checkpoint, so cached tokens replay as prefill you made yourself",
            f"rate{w}", "Decode and prefill"))
    return out


def missing_note(profile: Profile) -> str:
    """What this profile cannot express, said plainly (empty when nothing is missing)."""
    if profile.has_ledger:
        return ""
    return (f"No step ledger on {profile.name}: it exports no decode-only step counters, so there is no "
            "phase ratio. Do not fall back to step_seconds/steps: that mean dilutes the chunk.")


def _comment(text: str, prefix: str = "# ") -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > 96:
            lines.append(prefix + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    if line:
        lines.append(prefix + line)
    return lines


def render_promql(profile: Profile, queries: list[CensusQuery]) -> str:
    """The queries as commented PromQL text, one block per quantity."""
    lines = [f"# pdcensus census queries, profile {profile.name} ({profile.description})"]
    lines += _comment(STEP_HINT)
    lines += _comment(missing_note(profile))
    for q in queries:
        lines += ["", f"# {q.title} [{q.unit}]"]
        lines += _comment("Avoids: " + q.avoids)
        lines.append(q.expr)
    return "\n".join(lines) + "\n"


def render_rules(profile: Profile, queries: list[CensusQuery], *, interval_seconds: float) -> str:
    """A Prometheus recording-rules file (YAML) with one rule per query."""
    for q in queries:
        check_window_free(q.expr)
    lines = [f"# Recording rules for the pdcensus census quantities, profile {profile.name}.",
             "# Check with: promtool check rules FILE"]
    lines += _comment(missing_note(profile))
    lines += ["groups:", f"  - name: pdcensus-{profile.name}",
              f"    interval: {prometheus_duration(interval_seconds)}", "    rules:"]
    for q in queries:
        lines += _comment(f"{q.title} [{q.unit}]. Avoids: {q.avoids}", prefix="      # ")
        lines += [f"      - record: {q.record_name()}", "        expr: |-", f"          {q.expr}"]
    return "\n".join(lines) + "\n"


def check_window_free(expr: str) -> None:
    """Refuse an expression that still holds a Grafana variable (a rule cannot resolve it)."""
    for var in GRAFANA_WINDOWS:
        if var in expr:
            raise UsageError(f"recording rules need a duration window, not {var}; pass --window 1m")
