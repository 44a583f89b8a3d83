"""The glossary of the report's terms of art, read from the text the package ships.

The report speaks the runbook's words (ledger, chunk step, held step, shape, MAD, M/M/1,
family-wise ...); each has one entry in ``pdcensus/data/glossary.md``, which ships inside the
package so ``pdcensus explain TERM`` answers from a wheel with no checkout beside it.
``docs/glossary.md`` is the same text (a test compares the two), and the HTML and Markdown
reports append the entries of the terms they use.

An entry is a ``## term`` heading and the paragraph under it; a term is looked up
case-insensitively, with ``-`` and ``_`` read as spaces and a trailing plural ``s`` dropped
(``held-steps`` finds ``held step``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

__all__ = ["Entry", "entries", "glossary_text", "lookup", "normalise", "terms_in"]

DOCS_PATH = "docs/glossary.md"  # where the repository keeps the same text


@dataclass(frozen=True)
class Entry:
    """One term and its explanation (plain text, paragraphs joined by spaces)."""

    term: str
    text: str

    @property
    def anchor(self) -> str:
        return "term-" + re.sub(r"[^a-z0-9]+", "-", self.term.lower()).strip("-")


def glossary_text() -> str:
    """The glossary as shipped (Markdown)."""
    return files("pdcensus").joinpath("data", "glossary.md").read_text(encoding="utf-8")


@cache
def entries() -> tuple[Entry, ...]:
    """Every entry, in the file's order."""
    out: list[Entry] = []
    for chunk in re.split(r"^## ", glossary_text(), flags=re.M)[1:]:
        head, _, body = chunk.partition("\n")
        out.append(Entry(head.strip(), " ".join(body.split())))
    return tuple(out)


def normalise(term: str) -> str:
    """``Held-Steps`` -> ``held step``: the form terms are compared in."""
    words = re.sub(r"[-_\s]+", " ", term.strip().lower()).split(" ")
    if words and len(words[-1]) > 3 and words[-1].endswith("s") and not words[-1].endswith("ss"):
        words[-1] = words[-1][:-1]
    return " ".join(words)


def lookup(term: str) -> Entry | None:
    """The entry for ``term``, or None."""
    want = normalise(term)
    return next((e for e in entries() if normalise(e.term) == want), None)


def terms_in(text: str) -> tuple[Entry, ...]:
    """The entries whose term appears in ``text`` (as a word, any case), in glossary order."""
    low = " ".join(re.sub(r"[-_]", " ", text.lower()).split())
    return tuple(e for e in entries()
                 if re.search(r"(?<![a-z0-9])" + re.escape(e.term.lower().replace("-", " ")) + r"(?![a-z0-9])", low))
