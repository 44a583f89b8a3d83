"""Which shell tokenizer lint can rely on: bashlex, shlex and ours on the lint tests' shell corpus.

Corpus: every shell file (``*.sh``) and every shell code block (fenced or indented, from
markdown-it-py) of the Markdown files under ``tests/lint/data`` and ``tests/advice/data``,
plus the ``sh -c`` scripts and shell-form lines of the deployment fixtures as lint reads them
(``tests/lint/test_shell.py``'s scripts are not included). For each snippet:

* bashlex: does ``bashlex.parse`` raise? (bashlex is not a dependency; run this script with
  ``--bashlex-python`` naming an interpreter that has it, e.g. a scratch venv);
* shlex (POSIX mode): does ``shlex.split`` raise, and does it cut a ``${X:+...}`` or
  ``$(...)`` word in pieces (words that are not one shell word)?
* ours (:mod:`pdcensus.lint.shell`): never raises; counted for the words it finds.

Run: ``.venv/bin/python bench/lint_shell_corpus.py --bashlex-python /tmp/bashlex-venv/bin/python``
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from markdown_it import MarkdownIt

from pdcensus.lint.shell import Word, tokenize

ROOT = Path(__file__).resolve().parent.parent
_PROBE = """
import json, sys, bashlex
out = []
for text in json.load(sys.stdin):
    try:
        bashlex.parse(text)
        out.append(None)
    except Exception as exc:
        out.append(type(exc).__name__ + ": " + str(exc).splitlines()[0][:80])
print(json.dumps(out))
"""


def corpus() -> list[tuple[str, str]]:
    snippets: list[tuple[str, str]] = []
    for folder in (ROOT / "tests" / "lint" / "data", ROOT / "tests" / "advice" / "data"):
        for path in sorted(folder.rglob("*")):
            if path.suffix == ".sh":
                snippets.append((str(path.relative_to(ROOT)), path.read_text()))
            elif path.suffix == ".md":
                for tok in MarkdownIt("commonmark").parse(path.read_text()):
                    if tok.type in {"fence", "code_block"} and tok.info.strip() in {"", "bash", "sh", "shell"}:
                        snippets.append((f"{path.relative_to(ROOT)}:{tok.map[0] + 1 if tok.map else 0}",
                                         tok.content))
            elif path.suffix in {".yaml", ".service"} or path.name.startswith("Dockerfile"):
                text = path.read_text()
                block = re.search(r"- \|\n((?:\s{14}.*\n)+)", text)
                if block:
                    snippets.append((f"{path.relative_to(ROOT)}:sh -c", re.sub(r"(?m)^\s{14}", "", block.group(1))))
                for m in re.finditer(r"(?m)^(?:CMD|ExecStart=)((?:[^\n]*\\\n)*[^\n]*)", text):
                    if not m.group(1).lstrip().startswith("["):
                        snippets.append((f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}",
                                         m.group(1)))
    return snippets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bashlex-python", help="an interpreter with bashlex installed")
    args = parser.parse_args()
    snippets = corpus()
    texts = [t for _, t in snippets]
    bashlex_errors: list[str | None] = [None] * len(texts)
    if args.bashlex_python:
        done = subprocess.run([args.bashlex_python, "-c", _PROBE], input=json.dumps(texts), text=True,
                              capture_output=True, check=True)
        bashlex_errors = json.loads(done.stdout)
    shlex_raises = shlex_cuts = 0
    for (name, text), error in zip(snippets, bashlex_errors):
        try:
            words = shlex.split(text, comments=True, posix=True)
            cut = any(w.startswith(("${", "$(")) and not w.endswith(("}", ")")) for w in words)
            shlex_cuts += cut
            shlex_note = "cuts an expansion" if cut else "ok"
        except ValueError as exc:
            shlex_raises += 1
            shlex_note = f"raises: {exc}"
        ours = sum(isinstance(t, Word) for t in tokenize(text))
        print(f"{name:55} bashlex: {error or 'ok':45.45} shlex: {shlex_note:18.18} ours: {ours} words")
    failed = sum(e is not None for e in bashlex_errors)
    print(f"\n{len(texts)} snippets; bashlex raised on {failed if args.bashlex_python else 'n/a'}; "
          f"shlex raised on {shlex_raises} and cut an expansion in {shlex_cuts}; ours raised on 0")


if __name__ == "__main__":
    sys.exit(main())
