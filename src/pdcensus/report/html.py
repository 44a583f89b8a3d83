"""The census report as one self-contained HTML file: inline CSS, inline SVG plots, no script.

``render_html(reports)`` returns the page; ``write_html(reports, path)`` writes it. The page
loads nothing: no script, font, image or stylesheet from anywhere, and its
Content-Security-Policy (``default-src 'none'``) would refuse one if a string ever smuggled
it in. Every string from the data is escaped with :func:`html.escape` (the plots escape
their own text the same way). It reads well on a phone (fluid layout, ``viewBox`` SVGs that
scale, tables that scroll sideways) and on paper (``@media print``: no navigation, figures
and tables kept whole).

Content and order come from :mod:`pdcensus.report.document`, which the Markdown report
shares: verdict and confidence first, then shape, buckets, lag profile, step ledger,
preemption bursts, traps and advice.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from pdcensus.census.model import SCHEMA, CensusReport
from pdcensus.report.document import Document, build_document
from pdcensus.report.document_blocks import (
    Block, Bullets, Callout, Code, FigureBlock, Heading, Paragraph, Table,
)
from pdcensus.report.plots import render_svg
from pdcensus.sources.atomic import write_atomically

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { --fg:#1d1d1f; --muted:#5f6368; --line:#dadce0; --warn:#b3261e; --warn-bg:#fdecea;
        --good:#146c2e; --good-bg:#e6f4ea; --accent:#0072B2; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1100px; padding: 16px 20px 40px; color: var(--fg);
       font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
h1 { font-size: 1.6em; margin: 0.2em 0; }
h2 { font-size: 1.3em; margin: 1.6em 0 0.4em; padding-top: 0.4em; border-top: 1px solid var(--line); }
h3 { font-size: 1.1em; margin: 1.2em 0 0.3em; }
h4 { font-size: 1em; margin: 1em 0 0.3em; }
.subtitle, .muted { color: var(--muted); }
nav { font-size: 0.9em; margin: 0.5em 0 1em; }
nav a { margin-right: 0.8em; color: var(--accent); white-space: nowrap; }
.callout { border-left: 6px solid var(--accent); background: #eef5fb; padding: 12px 16px; margin: 0.6em 0;
           border-radius: 4px; }
.callout .label { display: block; text-transform: uppercase; font-size: 0.75em; letter-spacing: 0.08em;
                  color: var(--muted); }
.callout .value { display: block; font-size: 1.8em; font-weight: 700; line-height: 1.2; }
.callout .detail { display: block; }
.callout.warning { border-color: var(--warn); background: var(--warn-bg); }
.callout.good { border-color: var(--good); background: var(--good-bg); }
.callout.muted { border-color: var(--muted); background: #f1f3f4; }
p.warning, ul.warning { color: var(--warn); }
p.good { color: var(--good); }
.table-wrap { overflow-x: auto; margin: 0.6em 0; }
table { border-collapse: collapse; font-size: 0.9em; min-width: 50%; }
caption { text-align: left; color: var(--muted); padding: 0 0 4px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f8f9fa; font-weight: 600; overflow-wrap: normal; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; overflow-wrap: normal; }
tr.warning td { background: var(--warn-bg); }
figure { margin: 0.8em 0; }
figure svg.plot { width: 100%; height: auto; max-width: 100%; display: block; }
figcaption { color: var(--muted); font-size: 0.85em; }
pre { background: #f6f8fa; padding: 8px 12px; overflow-x: auto; border-radius: 4px; white-space: pre-wrap;
      overflow-wrap: anywhere; }
.table-wrap.tall { max-height: 26em; overflow-y: auto; }
.table-wrap.tall th { position: sticky; top: 0; }
footer { margin-top: 2em; color: var(--muted); font-size: 0.85em; border-top: 1px solid var(--line); }
@media (max-width: 1000px) {
  table { font-size: 0.82em; }
  th, td { padding: 3px 4px; }
  td.num { white-space: normal; }
}
@media (max-width: 640px) {
  body { padding: 8px 10px 24px; font-size: 14px; }
  .callout .value { font-size: 1.4em; }
  th, td { padding: 3px 6px; }
}
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav { display: none; }
  h2 { break-after: avoid; }
  figure, table, .callout, pre { break-inside: avoid; }
  .table-wrap, .table-wrap.tall { overflow: visible; max-height: none; }
  a { color: inherit; text-decoration: none; }
  .callout, th, tr.warning td { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def render_html(reports: CensusReport | Sequence[CensusReport], title: str | None = None) -> str:
    """The whole page for one report or several (one section per endpoint)."""
    items = [reports] if isinstance(reports, CensusReport) else list(reports)
    return render_document(build_document(items, title=title))


def write_html(reports: CensusReport | Sequence[CensusReport], path: str | Path,
               title: str | None = None) -> Path:
    """Write the page to ``path`` (UTF-8) and return the path."""
    return write_atomically(path, render_html(reports, title=title))


def render_document(doc: Document) -> str:
    nav = [b for b in doc.blocks if isinstance(b, Heading) and b.level == 2]
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{escape(doc.title)}</title>",
        f"<style>{CSS}</style>",
        "</head>",
        "<body>",
        "<header>",
        f"<h1>{escape(doc.title)}</h1>",
    ]
    if doc.subtitle:
        parts.append(f'<p class="subtitle">{escape(doc.subtitle)}</p>')
    if nav:
        links = " ".join(f'<a href="#{escape(h.anchor, quote=True)}">{escape(h.text)}</a>' for h in nav)
        parts.append(f"<nav>{links}</nav>")
    parts += ["</header>", "<main>"]
    parts.extend(render_block(b) for b in doc.blocks)
    parts += ["</main>", f"<footer><p>pdcensus report, census schema {escape(SCHEMA)}.</p></footer>",
              "</body>", "</html>"]
    return "\n".join(parts) + "\n"


def render_block(block: Block) -> str:
    """One block as HTML; every text is escaped here."""
    if isinstance(block, Heading):
        level = min(max(block.level, 1), 6)
        return f'<h{level} id="{escape(block.anchor, quote=True)}">{escape(block.text)}</h{level}>'
    if isinstance(block, Paragraph):
        return f'<p class="{block.tone.value}">{escape(block.text)}</p>'
    if isinstance(block, Callout):
        return (f'<div class="callout {block.tone.value}"><span class="label">{escape(block.label)}</span>'
                f'<strong class="value">{escape(block.value)}</strong>'
                f'<span class="detail">{escape(block.detail)}</span></div>')
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Bullets):
        tag = "ol" if block.ordered else "ul"
        items = "".join(f"<li>{escape(i)}</li>" for i in block.items)
        return f'<{tag} class="{block.tone.value}">{items}</{tag}>'
    if isinstance(block, Code):
        return f"<pre><code>{escape(block.text)}</code></pre>"
    assert isinstance(block, FigureBlock)
    fig = block.figure
    caption = f"<figcaption>{escape(fig.caption)}</figcaption>" if fig.caption else ""
    return f"<figure>{render_svg(fig.chart, svg_id=block.ident)}{caption}</figure>"


def _table(table: Table) -> str:
    def cls(i: int) -> str:
        return ' class="num"' if i in table.numeric else ""

    head = "".join(f"<th{cls(i)}>{escape(h)}</th>" for i, h in enumerate(table.headers))
    thead = f"<thead><tr>{head}</tr></thead>" if any(table.headers) else ""
    rows = []
    for r, row in enumerate(table.rows):
        tone = table.row_tones[r].value if r < len(table.row_tones) else "normal"
        cells = "".join(f"<td{cls(i)}>{escape(c)}</td>" for i, c in enumerate(row))
        rows.append(f'<tr class="{tone}">{cells}</tr>')
    caption = f"<caption>{escape(table.caption)}</caption>" if table.caption else ""
    # A long table scrolls inside a short box on screen and prints whole (a closed <details>
    # would print closed).
    wrap = "table-wrap tall" if table.folded else "table-wrap"
    return f'<div class="{wrap}"><table>{caption}{thead}<tbody>{"".join(rows)}</tbody></table></div>'
