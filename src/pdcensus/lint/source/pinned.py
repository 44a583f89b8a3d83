"""The pinned source from where it lives: a file, a directory, a git repository at a ref, a tarball.

The runbook's rule is to read ``core/config.cpp`` (help table + validator) in the PINNED image
source. People keep that source in several shapes, and each is read without building or
executing anything from it:

* a file: C++ (``core/config.cpp``-shaped) or an engine's ``--help`` text;
* a directory holding ``core/config.cpp`` (a source tree) or ``config.cpp`` (a simulator
  output directory). A directory that is a git work tree is read only when the file has no
  uncommitted change: an edited copy is not the pinned source (give ``--ref``);
* a git repository plus ``--ref TAG``: the blob is read with ``git show REF:core/config.cpp``
  (no checkout, argv lists only, the repository's hooks and fsmonitor switched off); a ref
  that does not name a commit, or a ``git describe --dirty`` name, is refused;
* a source tarball (``.tar``, ``.tar.gz``, ``.tgz``, ...): the member ending in
  ``core/config.cpp`` is read from the archive, never extracted.

:func:`load_pinned` returns the schema and a description naming the source and ref it read.
"""

from __future__ import annotations

import re
import subprocess
import tarfile
from dataclasses import dataclass, replace
from pathlib import Path

from pdcensus.lint.source.cpp_text import TokenKind, tokenize
from pdcensus.lint.source.flags import (
    FlagSchema, FlagSpec, SchemaKind, _argument_members, _DEFAULT, _members_and_integer, enum_lists,
    parse_config_source,
)
from pdcensus.errors import DataError, UsageError

_CPP_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inc", ".ipp"}
_IN_TREE = ("core/config.cpp", "config.cpp")
_MAX_SOURCE_BYTES = 16 * 1024 * 1024
_GIT_SAFE = ["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat"]
_HELP_LINE = re.compile(
    r"^\s{0,12}(?:-[A-Za-z0-9],?\s+)?(--[a-z0-9][a-z0-9-]*[a-z0-9])"
    r"(?:[ =]((?:\{[^}]*\}|<[^>]*>|\[[^\]]*\]|[^\s]+)))?(?:\s{2,}(.*)|\s*$)"
)


@dataclass(frozen=True)
class PinnedSource:
    """The schema read from a pinned source, and where exactly it was read."""

    schema: FlagSchema
    description: str
    ref: str | None = None
    commit: str | None = None


def parse_help_text(text: str, source: str = "<--help>") -> FlagSchema:
    """The schema in an engine's ``--help`` output (argparse or hand-aligned style)."""
    rows: dict[str, FlagSpec] = {}
    current: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        m = _HELP_LINE.match(raw)
        if m:
            name, argument, help_text = m.group(1), m.group(2) or "", m.group(3) or ""
            rows[name] = FlagSpec(name, argument.strip("<>[]") if argument.startswith("<")
                                  else argument, help_text.strip(), number)
            current = name
            continue
        if current is not None and raw.strip() and raw[:1].isspace() and not raw.lstrip().startswith("-"):
            spec = rows[current]
            rows[current] = replace(spec, help=(spec.help + " " + raw.strip()).strip())
        elif not raw.strip() or not raw[:1].isspace():
            current = None
    for name, spec in rows.items():
        members, integer = _argument_members(spec.argument)
        origin = f"--help line {spec.line}"
        if not members:
            from_help = enum_lists(spec.help)
            if from_help:
                members, more = _members_and_integer(from_help[0])
                integer = integer or more
        default_m = _DEFAULT.search(spec.help)
        rows[name] = replace(spec, choices=members, choices_origin=origin if members else "",
                             accepts_integer=integer,
                             default=default_m.group(1).strip() if default_m else None)
    if not rows:
        raise DataError(f"{source}: no flag found (expected lines such as '  --flag ARG  help')")
    return FlagSchema(dict(sorted(rows.items())), source, SchemaKind.HELP_TEXT)


def parse_source_text(text: str, name: str) -> FlagSchema:
    """C++ or ``--help`` text, told apart by the name's suffix and by ``"--flag`` literals.

    A C++ source may print its usage from one string (``R"(  --prefill-interleave N  ...)"``):
    such a string is read as ``--help`` text, and what the code declares wins over it."""
    text = text.replace("\r\n", "\n")
    suffix = Path(name).suffix.lower()
    looks_cpp = suffix in _CPP_SUFFIXES or (
        suffix not in {".txt", ".help"} and re.search(r'"--[a-z]', text) is not None)
    if not looks_cpp:
        return parse_help_text(text, name)
    usage = [t.text for t in tokenize(text) if t.kind is TokenKind.STRING
             and sum(bool(_HELP_LINE.match(line)) for line in t.text.splitlines()) >= 2]
    try:
        schema = parse_config_source(text, name)
    except DataError:
        if not usage:
            raise
        schema = FlagSchema({}, name, SchemaKind.CPP_SOURCE)
    if not usage:
        return schema
    printed = parse_help_text("\n".join(usage), name).flags
    flags = dict(printed)
    for flag, spec in schema.flags.items():
        old = printed.get(flag)
        flags[flag] = spec if old is None else replace(
            spec, argument=spec.argument or old.argument, help=spec.help or old.help,
            choices=spec.choices or old.choices, choices_origin=spec.choices_origin or "usage text",
            accepts_integer=spec.accepts_integer or old.accepts_integer, default=spec.default or old.default)
    return replace(schema, flags=dict(sorted(flags.items())))


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *_GIT_SAFE, "-C", str(repo), *args], capture_output=True,
                              timeout=60, check=False)
    except FileNotFoundError:
        raise UsageError("--ref needs git on PATH to read the pinned commit") from None
    except subprocess.TimeoutExpired:
        raise DataError(f"git in {str(repo)!r} did not answer within 60 s") from None


def _from_git(repo: Path, ref: str) -> PinnedSource:
    if ref.startswith("-") or not ref.strip():
        raise UsageError(f"--ref {ref!r} is not a git ref")
    if ref.endswith("-dirty"):
        raise UsageError(f"--ref {ref!r} names a work tree with uncommitted changes (git describe "
                         "--dirty), not a pinned commit; give the tag or commit the image was built from")
    if _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise UsageError(f"--source {str(repo)!r} is not a git repository (needed with --ref)")
    done = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", ref + "^{commit}")
    if done.returncode != 0:
        raise UsageError(f"--ref {ref!r} does not name a commit in {str(repo)!r}")
    commit = done.stdout.decode().strip()
    for path in _IN_TREE:
        shown = _git(repo, "show", "--no-textconv", "--end-of-options", f"{commit}:{path}")
        if shown.returncode == 0:
            text = shown.stdout[:_MAX_SOURCE_BYTES].decode("utf-8", errors="replace")
            description = f"{path} at {ref} (commit {commit[:12]}) of {repo}"
            return PinnedSource(replace(parse_source_text(text, path), source=description),
                                description, ref, commit)
    raise UsageError(f"{ref!r} in {str(repo)!r} has no {' or '.join(_IN_TREE)}")


def _from_directory(directory: Path) -> PinnedSource:
    found = next((directory / p for p in _IN_TREE if (directory / p).is_file()), None)
    if found is None:
        raise UsageError(f"{str(directory)!r} is a directory without core/config.cpp or config.cpp; "
                         "give the pinned source file (C++ or --help text)")
    if (directory / ".git").exists():
        rel = str(found.relative_to(directory))
        status = _git(directory, "--no-optional-locks", "status", "--porcelain", "--", rel)
        if status.returncode == 0 and status.stdout.strip():
            raise UsageError(f"{rel} in {str(directory)!r} has uncommitted changes, so it is not the "
                             "pinned source; give --ref TAG to read the pinned commit")
    return _from_file(found)


def _from_tarball(path: Path) -> PinnedSource:
    try:
        with tarfile.open(path) as archive:
            members = [m for m in archive.getmembers() if m.isfile()
                       and (m.name.endswith("/core/config.cpp") or m.name in _IN_TREE)]
            if not members:
                raise UsageError(f"{str(path)!r} holds no core/config.cpp")
            member = min(members, key=lambda m: m.name.count("/"))
            handle = archive.extractfile(member)
            data = handle.read(_MAX_SOURCE_BYTES) if handle is not None else b""
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"cannot read source tarball {str(path)!r}: {exc}") from None
    description = f"{member.name} in {path}"
    schema = parse_source_text(data.decode("utf-8", errors="replace"), member.name)
    return PinnedSource(replace(schema, source=description), description)


def _from_file(path: Path) -> PinnedSource:
    try:
        with path.open("rb") as handle:
            text = handle.read(_MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read pinned source {str(path)!r}: {exc.strerror or exc}") from None
    return PinnedSource(parse_source_text(text, str(path)), str(path))


def load_pinned(source: str, ref: str | None = None) -> PinnedSource:
    """The schema of a pinned source given as a file, directory, git repository + ref or tarball."""
    path = Path(source)
    if ref is not None:
        if not path.is_dir():
            raise UsageError(f"--ref needs --source to be a git repository, got {source!r}")
        return _from_git(path, ref)
    if path.is_dir():
        return _from_directory(path)
    if not path.exists():
        raise UsageError(f"cannot read pinned source {source!r}: No such file or directory")
    if path.is_file() and tarfile.is_tarfile(path):
        return _from_tarball(path)
    return _from_file(path)


def load_schema(path: str | Path) -> FlagSchema:
    """The schema of a pinned source file or directory (see :func:`load_pinned`)."""
    return load_pinned(str(path)).schema
