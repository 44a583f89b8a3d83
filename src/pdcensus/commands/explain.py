"""`pdcensus explain [TERM]`: a term of the report, from the glossary the package ships.

Without TERM it lists the terms. An unknown term is a usage error (exit 2) that names the
known ones, so the answer to a typo is the list to pick from.
"""

from __future__ import annotations

import textwrap
from typing import Annotated, Optional

import typer

from pdcensus.commands.base import app
from pdcensus.errors import UsageError


@app.command()
def explain(
    term: Annotated[Optional[list[str]], typer.Argument(
        metavar="TERM", help="A term of the report, e.g. 'chunk step' or held-step.")] = None,
) -> None:
    """What a term of the report means (the glossary, docs/glossary.md)."""
    from pdcensus.report.glossary import entries, lookup

    known = ", ".join(e.term for e in entries())
    if not term:
        typer.echo(f"terms: {known}")
        typer.echo("pdcensus explain TERM prints one; all of them: docs/glossary.md")
        return
    asked = " ".join(term)
    entry = lookup(asked)
    if entry is None:
        raise UsageError(f"no glossary entry for {asked!r}; known terms: {known}")
    typer.echo(entry.term)
    typer.echo(textwrap.fill(entry.text, width=88, initial_indent="  ", subsequent_indent="  "))
