"""The glossary: shipped in the package, the same text as docs/glossary.md, and `pdcensus explain`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.report.glossary import DOCS_PATH, entries, glossary_text, lookup, terms_in

ROOT = Path(__file__).resolve().parents[2]
# the terms of art a newcomer met unexplained in the demo's output (issue 27)
JARGON = ("ledger", "chunk step", "held steps", "shape", "MAD", "M/M/1", "family-wise", "confidence", "severity",
          "material", "bucket", "lag test", "arm", "replay", "trap", "TTFT", "ITL", "decode-only step", "runbook")


def test_docs_glossary_is_the_text_the_package_ships() -> None:
    assert (ROOT / DOCS_PATH).read_text(encoding="utf-8") == glossary_text(), (
        "docs/glossary.md differs from src/pdcensus/data/glossary.md: cp src/pdcensus/data/glossary.md docs/glossary.md")


def test_the_glossary_ships_as_package_data() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"data/*"' in pyproject
    assert (ROOT / "src" / "pdcensus" / "data" / "glossary.md").is_file()


@pytest.mark.parametrize("term", JARGON)
def test_every_term_of_art_has_an_entry(term: str) -> None:
    entry = lookup(term)
    assert entry is not None, term
    assert len(entry.text.split()) >= 12  # an explanation, not a stub


def test_terms_are_unique_and_looked_up_in_any_spelling() -> None:
    names = [e.term.lower() for e in entries()]
    assert len(names) == len(set(names))
    assert lookup("Held-Steps") == lookup("held step") is not None
    assert lookup("step_time_sharing") == lookup("step-time sharing") is not None
    assert lookup("no such term") is None


def test_terms_in_finds_whole_words_only() -> None:
    found = {e.term for e in terms_in("the ledger says the chunk step is long; shapes")}
    assert {"ledger", "chunk step"} <= found
    assert "arm" not in {e.term for e in terms_in("a harmless alarm")}


def _explain(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", "explain", *args], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})


def test_explain_prints_the_entry() -> None:
    done = _explain("chunk", "step")
    assert done.returncode == 0, done.stderr
    entry = lookup("chunk step")
    assert entry is not None
    assert done.stdout.splitlines()[0] == "chunk step"
    assert " ".join(done.stdout.split()[2:]) == entry.text


def test_explain_an_unknown_term_exits_2_naming_the_known_ones() -> None:
    done = _explain("flux-capacitor")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: no glossary entry for 'flux-capacitor'; known terms: ")
    assert all(e.term in line for e in entries())
