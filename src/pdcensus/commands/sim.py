"""`pdcensus sim` command(s)."""

from __future__ import annotations

from pdcensus.cli import app  # noqa: F401
