"""A plain, self-contained HTML view of census reports (no scripts, no external assets).

Every string that came from the data (label values, source paths, texts quoting
names) is escaped with :func:`html.escape`, so a hostile label value cannot inject
markup. The richer HTML report with plots lives elsewhere; this one is the minimum a
browser can show from the typed model.
"""

from __future__ import annotations

import datetime as _dt
import math
from html import escape
from typing import Any

from pdcensus.census.model import BucketTable, CensusReport

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .5em;font-size:.9em}
th{background:#f3f3f3;text-align:left}.verdict{font-size:1.6em;font-weight:bold}.fired{color:#b00;font-weight:bold}
.ok{color:#070}.no{color:#999}
"""


def _num(x: Any, fmt: str = ".3g") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, (int, float)):
        return format(x, fmt)
    return escape(str(x))


def _time(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _buckets(title: str, b: BucketTable) -> str:
    rows = [[escape(r.bucket), str(r.samples), _num(r.decode_tokens_per_second, ".0f"),
             _num(r.per_stream_tokens_per_second, ".1f"), _num(r.per_stream_vs_idle, ".2f"),
             _num(r.ttft_p50_seconds, ".2f"), _num(r.ttft_p90_seconds, ".2f"), _num(r.ttft_p99_seconds, ".2f"),
             _num(r.preemptions, ".0f")] for r in b.rows]
    warn = "".join(f"<p>warning: {escape(w)}</p>" for w in b.warnings)
    return (f"<h3>{escape(title)}: decode by {escape(b.prefill)} ({escape(b.basis)})</h3>"
            + _table(["bucket", "samples", "decode tok/s", "per-stream tok/s", "vs idle", "TTFT p50 s", "p90 s",
                      "p99 s", "preemptions"], rows)
            + f"<p>{escape(b.idle_rule)}</p>{warn}")


def render_report(report: CensusReport) -> str:
    """One endpoint's section (an HTML fragment)."""
    v = report.verdict
    parts = [f"<h2>{escape(report.instance)} <small>({escape(report.job)}, {escape(report.profile)})</small></h2>",
             f"<p class='verdict'>{escape(v.mechanism.value)} - confidence {v.confidence:.2f}</p>"]
    if v.mechanisms:
        parts.append("<p>mechanisms found: " + escape(", ".join(m.value for m in v.mechanisms)) + "</p>")
    if v.settle:
        parts.append("<p>What would settle it:</p><ul>" + "".join(f"<li>{escape(s)}</li>" for s in v.settle) + "</ul>")
    parts.append("<h3>Evidence</h3>" + _table(
        ["rule", "value", "threshold", "satisfied", "what"],
        [[escape(e.rule), _num(e.value), _num(e.threshold),
          "<span class='ok'>yes</span>" if e.satisfied else "<span class='no'>no</span>", escape(e.text)]
         for e in v.evidence]))
    parts.append(f"<h3>Shape: {escape(report.shape.reason)} (analysed: {report.shape.analysed})</h3>" + _table(
        ["#", "start (UTC)", "end", "scrapes", "profile", "starts because", "notes"],
        [[str(s.index), _time(s.start), _time(s.end), str(s.scrapes), escape(s.profile), escape(s.reason),
          escape("; ".join(s.notes))] for s in report.shape.segments]))
    lg = report.ledger
    if lg.available:
        parts.append("<h3>Step ledger</h3>" + _table(
            ["decode-only step s", "chunk step s", "mean step s (diluted)", "held steps", "chunk share of steps",
             "chunk share of step time", "reference decode-only step s"],
            [[_num(lg.decode_step_seconds, ".4f"), _num(lg.chunk_step_seconds, ".4f"), _num(lg.mean_step_seconds, ".4f"),
              _num(lg.held_steps, ".0f"), _num(lg.chunk_share_of_steps, ".3f"), _num(lg.chunk_share_of_step_time, ".3f"),
              _num(lg.reference_decode_step_seconds, ".4f")]]))
        parts.append(_table(["bucket", "intervals", "decode-only step s", "chunk step s"],
                            [[escape(b.bucket), str(b.intervals), _num(b.decode_step_seconds, ".4f"),
                              _num(b.chunk_step_seconds, ".4f")] for b in lg.by_bucket]))
    else:
        parts.append(f"<h3>Step ledger</h3><p>unavailable: {escape(lg.reason)}</p>")
    if report.buckets:
        parts.append(_buckets("Buckets", report.buckets))
    if report.client_new_buckets:
        parts.append(_buckets("Buckets on client-new prefill", report.client_new_buckets))
    lag = report.lag
    if lag.available:
        parts.append("<h3>Lag test</h3>" + _table(
            ["lag min", "effect", "low", "high", "busy n", "idle n"],
            [[_num(p.lag_seconds / 60, ".2f"), _num(p.effect, ".3f"), _num(p.low, ".3f"), _num(p.high, ".3f"),
              str(p.busy_samples), str(p.idle_samples)] for p in lag.points]))
        parts.append(f"<p>tail test (2-14 min): {_num(lag.tail_effect, '.3f')} ({_num(lag.tail_low, '.3f')} - "
                     f"{_num(lag.tail_high, '.3f')}); {escape(lag.control)}</p>")
    else:
        parts.append(f"<h3>Lag test</h3><p>unavailable: {escape(lag.reason)}</p>")
    pr = report.preemption
    parts.append("<h3>Preemption</h3>" + (_table(
        ["start", "end", "preemptions", "decode vs baseline", "prefill vs mean"],
        [[_time(b.start), _time(b.end), _num(b.preemptions, ".0f"), _num(b.decode_vs_baseline, ".2f"),
          _num(b.prefill_vs_baseline, ".2f")] for b in pr.bursts]) if pr.available else f"<p>{escape(pr.reason)}</p>"))
    parts.append("<h3>Traps</h3>" + _table(
        ["trap", "fired", "what"],
        [[escape(t.name), "<span class='fired'>FIRED</span>" if t.fired else "no", escape(t.text)]
         for t in report.traps]))
    return "\n".join(parts)


def render_html(reports: list[CensusReport], title: str = "pdcensus census") -> str:
    """A whole HTML document for one or more endpoints."""
    source = escape(reports[0].source) if reports else ""
    body = "\n<hr>\n".join(render_report(r) for r in reports)
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1><p>source: {source}</p>\n{body}\n"
            "</body></html>\n")
