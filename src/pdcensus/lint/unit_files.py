"""Dockerfiles and systemd units (services and Quadlet ``.container`` files), with their lines.

Both formats are line-oriented with backslash continuations, and both hand the engine an
argv in one of two forms:

* Dockerfile (reference: the Dockerfile reference, "Shell and exec form"): ``CMD`` and
  ``ENTRYPOINT`` in exec form (a JSON array: each element one argv word, located at its
  own column) or shell form (``/bin/sh -c``: read as a script). Within a stage (from one
  ``FROM`` to the next) the last exec-form ``ENTRYPOINT`` is joined with the last ``CMD``,
  as Docker runs them; ``ENV RADIANCE_*=...`` (and the old ``ENV KEY value``) lines are
  the engine's env; ``RUN`` lines are read as shell;
* systemd (``systemd.service(5)``, ``systemd.exec(5)``, ``podman-systemd.unit(5)``):
  ``ExecStart=`` (with its ``-@:+!`` prefixes stripped; ``podman run`` inside it goes to the
  container reader), ``Exec=`` of a Quadlet ``[Container]`` (the argv after the image),
  ``Environment=`` assignments (quoted or not, several per line) as env lines and as
  variables ``$VAR``/``${VAR}`` in the ``Exec`` lines expand to.
"""

from __future__ import annotations

import json
import re

from pdcensus.advice.knobs import flag_for_env_var
from pdcensus.engines.vllm import CLI as VLLM_CLI
from pdcensus.lint.checks import Checker, FlagUse
from pdcensus.lint.deploy import decode_with_offsets
from pdcensus.lint.model import Snippet
from pdcensus.lint.shell import Word, tokenize
from pdcensus.lint.shell import Arg
from pdcensus.lint.shell_read import ShellReader

_JSON_STRING = re.compile(r'"((?:\\.|[^"\\])*)"')


def logical_lines(text: str, comment: str = "#") -> list[tuple[int, str, Snippet]]:
    """``(first line, text, snippet)`` per instruction, its continuation lines included."""
    out: list[tuple[int, str, Snippet]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        first = i
        pieces: list[str] = []
        origins: list[tuple[int, int]] = []
        while True:
            raw = lines[i]
            if pieces and raw.lstrip().startswith(comment):
                i += 1
                if i >= len(lines):
                    break
                continue
            cont = raw.rstrip().endswith("\\")
            pieces.append(raw)  # the backslash stays: the shell tokenizer reads it as a continuation
            origins.append((i + 1, 1))
            i += 1
            if not cont or i >= len(lines):
                break
        joined = "\n".join(pieces)
        out.append((first + 1, joined, Snippet(_PATH_UNSET, joined, tuple(origins))))
    return out


_PATH_UNSET = ""


def _with_path(snippet: Snippet, path: str) -> Snippet:
    return Snippet(path, snippet.text, snippet.origins)


def _exec_form(snippet: Snippet, start: int) -> list[Arg] | None:
    """The words of a JSON-array instruction, each at its own place (None: shell form)."""
    body = snippet.text[start:].strip()
    if not body.startswith("["):
        return None
    try:
        values = json.loads(re.sub(r"\\[ \t]*\n", "\n", body))
    except json.JSONDecodeError:
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    args = []
    for value, m in zip(values, _JSON_STRING.finditer(snippet.text, start)):
        decoded, offsets = decode_with_offsets(m.group(1))
        places = tuple(snippet.position(m.start(1) + o) for o in offsets) or (snippet.position(m.start(1)),)
        args.append(Arg(value, Snippet(snippet.path, decoded, places[:1], places), 0, literal=value))
    return args


def read_dockerfile(text: str, path: str, checker: Checker, shell: ShellReader) -> None:
    """Every stage's engine argv (ENTRYPOINT + CMD), env lines and RUN scripts."""
    entrypoint: list[Arg] | None = None
    cmd: list[Arg] | None = None
    shell_cmd: Snippet | None = None
    env: list[FlagUse] = []
    base = ""  # the stage's FROM image: a CMD without ENTRYPOINT is its entrypoint's argv

    def finish_stage() -> None:
        nonlocal entrypoint, cmd, shell_cmd, env
        if entrypoint is not None:
            shell.command(entrypoint + (cmd or []), env)
        elif cmd is not None and VLLM_CLI in base.lower():
            shell.image_argv(cmd, env, base)  # vllm/vllm-openai: ENTRYPOINT ["vllm", "serve"]
        elif cmd is not None:
            shell.command(cmd, env)
        else:
            for use in env:
                checker.invocation([use])
        if shell_cmd is not None:
            shell.read(shell_cmd)
        entrypoint, cmd, shell_cmd, env = None, None, None, []

    for _, joined, bare in logical_lines(text):
        snippet = _with_path(bare, path)
        m = re.match(r"\s*([A-Za-z]+)\s+", joined)
        if m is None or joined.lstrip().startswith("#"):
            continue
        word, start = m.group(1).upper(), m.end()
        if word == "FROM":
            finish_stage()
            image = re.match(r"\s*FROM\s+(?:--\S+\s+)*(\S+)", joined, re.I)
            base = image.group(1) if image else ""
        elif word in {"CMD", "ENTRYPOINT"}:
            argv = _exec_form(snippet, start)
            if argv is None:
                body = Snippet(path, " " * start + joined[start:], snippet.origins)
                if word == "ENTRYPOINT":
                    entrypoint, cmd = None, None
                shell_cmd = body
            elif word == "ENTRYPOINT":
                entrypoint, shell_cmd = argv, None
            else:
                cmd = argv
                shell_cmd = None if entrypoint is not None or shell_cmd is None else shell_cmd
        elif word == "ENV":
            rest = joined[start:]
            legacy = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s+([^=\s].*)", rest, re.S)
            if legacy and "=" not in legacy.group(1):
                use = checker.env(legacy.group(1), legacy.group(2).strip(), snippet.position(start),
                                  snippet.position(start + legacy.start(2)))
                env.extend([use] if use is not None else [])
                continue
            for w in tokenize(" " * start + rest):
                if isinstance(w, Word) and "=" in w.raw:
                    name, _, value = w.value.partition("=")
                    use = checker.env(name, value, snippet.position(w.start),
                                      snippet.position(w.start + len(name) + 1))
                    env.extend([use] if use is not None else [])
        elif word == "RUN" and _exec_form(snippet, start) is None:
            shell.read(Snippet(path, " " * start + joined[start:], snippet.origins))
    finish_stage()


def read_systemd(text: str, path: str, checker: Checker, shell: ShellReader) -> None:
    """``Environment=`` lines first (they are the Exec lines' variables), then every Exec line."""
    execs: list[tuple[str, Snippet, int]] = []
    env: list[FlagUse] = []
    section, image = "", ""
    for _, joined, bare in logical_lines(text, comment="#"):
        snippet = _with_path(bare, path)
        stripped = joined.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        m = re.match(r"\s*([A-Za-z]+)\s*=\s*", joined)
        if m is None or stripped.startswith((";", "#")):
            continue
        key, start = m.group(1), m.end()
        if key == "Image":
            image = joined[start:].strip()
        if key == "Environment":
            for w in tokenize(" " * start + joined[start:]):
                if not isinstance(w, Word) or "=" not in w.value:
                    continue
                quoted = 1 if w.raw[:1] in "'\"" else 0
                inner = w.raw[quoted:len(w.raw) - quoted]
                name = inner.partition("=")[0]
                if name.startswith("RADIANCE_") and flag_for_env_var(name) in checker.schema:
                    value = inner.partition("=")[2]
                    use = checker.env(name, value, snippet.position(w.start + quoted),
                                      snippet.position(w.start + quoted + len(name) + 1))
                    env.extend([use] if use is not None else [])
                else:
                    shell.command([Arg(inner, snippet, w.start + quoted)])
        elif key in {"ExecStart", "Exec"}:
            while key == "ExecStart" and start < len(joined) and joined[start] in "-@:+!":
                start += 1  # systemd's executable prefixes; Quadlet's Exec= is the image's argv as is
            execs.append((key if section != "Container" else "Exec", snippet, start))
    if not execs:
        for use in env:
            checker.invocation([use])
    for key, snippet, start in execs:
        words = [w for w in tokenize(" " * start + snippet.text[start:]) if isinstance(w, Word)]
        argv = [Arg(w.raw, snippet, w.start) for w in words]
        if key == "Exec":
            shell.image_argv(argv, list(env), image)
        else:
            shell.command(argv, list(env))
