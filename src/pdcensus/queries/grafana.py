"""A Grafana dashboard (JSON model, schemaVersion 39) of the census quantities.

``build_dashboard(profile)`` returns the dashboard as a dict that ``json.dumps`` turns into a
file Grafana imports (Dashboards > New > Import). Panels come from the same
:func:`pdcensus.queries.promql_export.census_queries` as ``pdcensus promql``, grouped by the
quantity they show, so the dashboard and the pasted PromQL can never disagree.

Two template variables make it portable: ``datasource`` (any Prometheus-compatible data
source) and ``instance`` (``label_values`` of a metric every build of the profile exports),
and every target selects ``instance=~"$instance"``. Each panel's Min interval is the scrape
interval and its max data points are Prometheus's 11,000-point limit, so Grafana's step
stays at the scrape interval for windows up to about two days (the runbook: step <= 30 s).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from pdcensus.queries.promql_export import CensusQuery, census_queries, missing_note, prometheus_duration
from pdcensus.series.profiles import Profile, Signal

SCHEMA_VERSION = 39
MAX_DATA_POINTS = 11_000  # Prometheus refuses a range query with more points per series
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_PANEL_WIDTH, _PANEL_HEIGHT, _GRID_COLUMNS = 12, 8, 24

PANEL_DESCRIPTIONS = {
    "Shape": "Counter resets mark a restart or a build change: never compare buckets across one.",
    "Step ledger": "Mean decode-only step vs mean chunk step, each from its own counters (the phase "
                   "ratio), never step_seconds/steps.",
    "Phase ratio": "How many decode-only steps one chunk step costs a decoder beside it, and the chunk "
                   "steps' share of step time.",
    "Held steps": "Decode-only steps forced by --prefill-interleave; zero means nothing protects decoders.",
    "Decode and prefill": "Decode and prefill rates from the same scrape; prefix-hit cuts are prefill "
                          "the endpoint made itself.",
    "Per-stream decode rate": "Batch-pooled decode rate divided by the running sequences.",
    "TTFT": "Time to first token by quantile, from the vllm: histogram (latency exists only there).",
    "Preemptions": "Increase of the preemption counter: bursts are stalls (a sequence re-prefills from "
                   "token 0), not sludge.",
}


def _variable_metric(profile: Profile) -> str:
    for signal in (Signal.RUNNING, Signal.DECODE_TPS, Signal.GENERATION_TOKENS):
        name = profile.name_of(signal)
        if name:
            return name
    return "up"


def _templating(profile: Profile) -> dict[str, Any]:
    metric = _variable_metric(profile)
    return {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
        {"name": "instance", "label": "Instance", "type": "query", "datasource": DATASOURCE,
         "definition": f"label_values({metric}, instance)",
         "query": {"query": f"label_values({metric}, instance)", "refId": "PrometheusVariableQueryEditor-VariableQuery",
                   "qryType": 1},
         "current": {}, "hide": 0, "refresh": 2, "regex": "", "sort": 1, "multi": True,
         "includeAll": True, "allValue": ".+", "options": []},
    ]}


def _panel(panel_id: int, title: str, queries: list[CensusQuery], position: int,
           interval: str) -> dict[str, Any]:
    many = len(queries) > 1
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "description": PANEL_DESCRIPTIONS.get(title, "") + " Avoids: " + "; ".join(
            sorted({q.avoids for q in queries})) + ".",
        "datasource": DATASOURCE,
        "gridPos": {"h": _PANEL_HEIGHT, "w": _PANEL_WIDTH,
                    "x": (position % 2) * _PANEL_WIDTH, "y": (position // 2) * _PANEL_HEIGHT},
        "interval": interval,
        "maxDataPoints": MAX_DATA_POINTS,
        "fieldConfig": {
            "defaults": {"unit": queries[0].unit, "custom": {"drawStyle": "line", "lineWidth": 1,
                                                             "spanNulls": False, "showPoints": "never"}},
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                    "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": q.expr, "range": True,
             "instant": False, "editorMode": "code",
             "legendFormat": "{{instance}} " + q.title if many else "{{instance}}"}
            for i, q in enumerate(queries)
        ],
    }


def build_dashboard(profile: Profile, *, scrape_interval_seconds: float = 15.0,
                    title: str | None = None) -> dict[str, Any]:
    """The dashboard JSON model for ``profile`` (a dict, ready for ``json.dumps``)."""
    interval = prometheus_duration(scrape_interval_seconds)
    queries = census_queries(profile, selector='instance=~"$instance"', window="$__rate_interval")
    panels_by_title: OrderedDict[str, list[CensusQuery]] = OrderedDict()
    for q in queries:
        panels_by_title.setdefault(q.panel, []).append(q)
    panels = [_panel(i + 1, name, qs, i, interval) for i, (name, qs) in enumerate(panels_by_title.items())]
    note = missing_note(profile)
    return {
        "uid": f"pdcensus-{profile.name}".replace(".", "-")[:40],
        "title": title or f"pdcensus census ({profile.name})",
        "description": f"Decode/prefill interference census quantities for {profile.description}. "
                       + (note + " " if note else "") + "Step: the scrape interval, never above 30 s.",
        "tags": ["pdcensus", profile.engine],
        "timezone": "utc",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": "",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [],
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
            "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
        }]},
        "templating": _templating(profile),
        "panels": panels,
    }
