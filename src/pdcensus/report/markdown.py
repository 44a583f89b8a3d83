"""The census report as Markdown for an incident ticket or a pull request, plots beside it.

``write_markdown(reports, "incident.md")`` writes ``incident.md`` and one SVG per plot in
``incident_plots/`` (linked relatively, so the pair can be attached or committed as is).
The content is the HTML report's (:mod:`pdcensus.report.document`), in GitHub-flavoured
Markdown: pipe tables with numeric columns right-aligned, fenced code for env lines.

Every string from the data is escaped: ``<``, ``>`` and ``&`` become entities (Markdown
renderers pass raw HTML through, so a label value could otherwise inject markup), and the
punctuation Markdown reads as syntax gets a backslash.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pdcensus.census.model import SCHEMA, CensusReport
from pdcensus.errors import ReportWriteError
from pdcensus.report.document import Document, build_document
from pdcensus.report.document_blocks import (
    Block, Bullets, Callout, Code, FigureBlock, Heading, Paragraph, Table, Tone,
)
from pdcensus.report.plots import render_svg
from pdcensus.sources.atomic import write_atomically

_SYNTAX = re.compile(r"([\\`*\[\]|])")
_EDGE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_LINE_START = re.compile(r"^(\s*)([#>+=-]|\d+(?=[.)]))")


@dataclass(frozen=True)
class MarkdownReport:
    """The Markdown text and the SVG files it links, by file name."""

    text: str
    plots: dict[str, str]


def escape_markdown(text: str) -> str:
    """Plain text made inert in Markdown: entities for HTML, backslashes for syntax."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SYNTAX.sub(r"\\\1", text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    text = " ".join(text.splitlines())
    marker = _LINE_START.match(text)
    if marker is None:
        return text
    lead, sign = marker.group(1), marker.group(2)
    rest = text[marker.end():]
    if sign[0].isdigit():  # "1." starts a list; "1\." does not
        return f"{lead}{sign}\\{rest}"
    return f"{lead}\\{sign}{rest}"


def plots_dir_for(path: str | Path) -> Path:
    """Where the plots of a Markdown file go: ``incident.md`` -> ``incident_plots``."""
    p = Path(path)
    return p.with_name(p.stem + "_plots")


def render_markdown(reports: CensusReport | Sequence[CensusReport], *, plots_dir: str = "report_plots",
                    title: str | None = None) -> MarkdownReport:
    """The Markdown text (linking ``plots_dir/<id>.svg``) and the SVGs to write there."""
    items = [reports] if isinstance(reports, CensusReport) else list(reports)
    return render_document(build_document(items, title=title), plots_dir)


def write_markdown(reports: CensusReport | Sequence[CensusReport], path: str | Path, *,
                   title: str | None = None) -> list[Path]:
    """Write ``path`` and its ``<stem>_plots/*.svg``; return every path written."""
    out = Path(path)
    plots = plots_dir_for(out)
    md = render_markdown(reports, plots_dir=plots.name, title=title)
    try:
        plots.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportWriteError(f"cannot write {str(out)!r}: cannot make {str(plots)!r}: {exc.strerror}") from None
    written = []
    for name, svg in md.plots.items():  # the figures first: the page never links to a missing one
        written.append(write_atomically(plots / name, '<?xml version="1.0" encoding="UTF-8"?>\n' + svg + "\n"))
    return [write_atomically(out, md.text), *written]


def render_document(doc: Document, plots_dir: str) -> MarkdownReport:
    lines = [f"# {escape_markdown(doc.title)}", ""]
    if doc.subtitle:
        lines += [escape_markdown(doc.subtitle), ""]
    plots: dict[str, str] = {}
    for block in doc.blocks:
        if isinstance(block, FigureBlock):
            name = f"{block.ident}.svg"
            plots[name] = render_svg(block.figure.chart, svg_id=block.ident)
            alt = escape_markdown(block.figure.chart.title)
            lines.append(f"![{alt}]({plots_dir}/{name})")
            if block.figure.caption:
                lines += ["", f"*{escape_markdown(block.figure.caption)}*"]
        else:
            lines.extend(render_block(block))
        lines.append("")
    lines.append(f"pdcensus report, census schema {SCHEMA}.")
    return MarkdownReport("\n".join(lines) + "\n", plots)


def render_block(block: Block) -> list[str]:
    """One non-figure block as Markdown lines."""
    if isinstance(block, Heading):
        return [f"{'#' * min(max(block.level, 1), 6)} {escape_markdown(block.text)}"]
    if isinstance(block, Paragraph):
        text = escape_markdown(block.text)
        if block.tone is Tone.WARNING:
            return [f"> **Warning:** {text}"]
        return [f"*{text}*" if block.tone is Tone.MUTED and text else text]
    if isinstance(block, Callout):
        return [f"> **{escape_markdown(block.label.upper())}: {escape_markdown(block.value)}**  ",
                f"> {escape_markdown(block.detail)}"]
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Bullets):
        return [(f"{i + 1}. " if block.ordered else "- ") + escape_markdown(item)
                for i, item in enumerate(block.items)]
    if isinstance(block, Code):
        runs = [len(m) for m in re.findall(r"`+", block.text)]
        fence = "`" * max(3, max(runs, default=0) + 1)
        return [fence, block.text, fence]
    return []


def _table(table: Table) -> list[str]:
    out = []
    if table.folded:  # GitHub and GitLab fold this; elsewhere it shows open
        summary = escape_markdown(table.caption or "Table") + f" Show all {len(table.rows)} rows."
        out += ["<details>", f"<summary>{summary}</summary>", ""]
    elif table.caption:
        out += [f"*{escape_markdown(table.caption)}*", ""]
    out.append("| " + " | ".join(escape_markdown(h) for h in table.headers) + " |")
    out.append("|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.headers))) + "|")
    for r, row in enumerate(table.rows):
        tone = table.row_tones[r] if r < len(table.row_tones) else Tone.NORMAL
        cells = [escape_markdown(c) for c in row]
        if tone is Tone.WARNING and cells:
            cells[0] = f"**{cells[0]}**"
        out.append("| " + " | ".join(cells) + " |")
    if table.folded:
        out += ["", "</details>"]
    return out
