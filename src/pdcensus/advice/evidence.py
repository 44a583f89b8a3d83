"""Side-channel evidence that advice reads: the process argv and the boot ledger.

- argv: ``/proc/PID/cmdline``, a saved copy of it (NUL-separated), or a sim output
  directory's ``cmdline``. The runbook: a deploy is not evidence, the flag in argv is.
- boot ledger: the engine's start-up log lines. The prefill stager's smallest pass (the
  floor for ``--busy-prefill-chunk``), the KV pool and the arena have no metric at all and
  are read from here. Lines are matched loosely (``smallest pass 512 tokens``,
  ``smallest_pass=512``), since each build words them a little differently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pdcensus.errors import UsageError


@dataclass(frozen=True)
class Argv:
    """A process's argv and where it was read from."""

    args: tuple[str, ...]
    origin: str

    def flags(self, *, short: bool = False) -> dict[str, str]:
        return flags_from_argv(self.args, short=short)

    def text(self) -> str:
        return " ".join(self.args)


def _is_flag(arg: str, short: bool) -> bool:
    """``--flag``; with ``short``, also a short flag such as llama.cpp's ``-b`` / ``-np`` (``-1`` is a value)."""
    return arg.startswith("--") and len(arg) > 2 or (short and len(arg) > 1 and arg[0] == "-" and arg[1].isalpha())


def flags_from_argv(args: Sequence[str], *, short: bool = False) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` pairs (a bare ``--flag`` maps to ``""``).

    ``short``: short flags too (``-b 512``), for engines whose knobs have short spellings (llama.cpp).
    """
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        arg = args[i]
        if _is_flag(arg, short):
            if arg.startswith("--") and "=" in arg:
                flag, value = arg.split("=", 1)
                out[flag] = value
            elif i + 1 < len(args) and not _is_flag(args[i + 1], short):
                out[arg] = args[i + 1]
                i += 1
            else:
                out[arg] = ""
        i += 1
    return out


def parse_cmdline(data: bytes, origin: str) -> Argv:
    """NUL-separated argv (``/proc/PID/cmdline``); a text file of one line is split on spaces."""
    if b"\0" in data:
        parts = data.split(b"\0")
    else:
        parts = data.split()
    args = tuple(p.decode("utf-8", errors="replace") for p in parts if p)
    if not args:
        raise UsageError(f"{origin}: empty argv")
    return Argv(args, origin)


def read_argv(cmdline: str | Path | None = None, pid: int | None = None) -> Argv:
    """argv from ``/proc/PID/cmdline``, a saved cmdline file, or a sim output dir's ``cmdline``."""
    if (cmdline is None) == (pid is None):
        raise UsageError("give exactly one of --cmdline PATH or --pid PID")
    if pid is not None:
        path = Path(f"/proc/{int(pid)}/cmdline")
        try:
            return parse_cmdline(path.read_bytes(), str(path))
        except OSError as exc:
            raise UsageError(f"cannot read argv of pid {pid} ({path}): {exc.strerror or exc}") from None
    assert cmdline is not None
    path = Path(cmdline)
    if path.is_dir():
        path = path / "cmdline"
    try:
        return parse_cmdline(path.read_bytes(), str(path))
    except OSError as exc:
        raise UsageError(f"cannot read cmdline {str(cmdline)!r}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class BootLedger:
    """What the boot ledger says about the side channels (None: not found)."""

    stager_smallest_pass_tokens: int | None = None
    kv_capacity_tokens: int | None = None
    arena_tokens: int | None = None
    expert_slab_experts: int | None = None
    flags: Mapping[str, str] | None = None


_NUMBER = r"(\d[\d_,]*)"
_PATTERNS = {
    "stager_smallest_pass_tokens": re.compile(
        r"(?i)stager.*?smallest[ _-]?pass\D{0,24}?" + _NUMBER),
    "kv_capacity_tokens": re.compile(
        r"(?i)kv\b.*?(?:capacity|pool)\D{0,24}?" + _NUMBER + r"\s*tokens"),
    "arena_tokens": re.compile(r"(?i)arena\D{0,40}?" + _NUMBER + r"\s*tokens"),
    "expert_slab_experts": re.compile(r"(?i)expert[ _-]?slab\D{0,40}?" + _NUMBER + r"\s*experts"),
}


def _int(text: str) -> int:
    return int(text.replace("_", "").replace(",", ""))


def parse_boot_ledger(text: str) -> BootLedger:
    """The first value of each known quantity in a boot log, and flags echoed as ``--x=v``."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        for name, pattern in _PATTERNS.items():
            if name not in found:
                m = pattern.search(line)
                if m:
                    found[name] = _int(m.group(1))
    flags = {m.group(1): m.group(2) for m in re.finditer(r"(--[a-z0-9][a-z0-9-]*)[= ]([^\s,;]+)", text)}
    return BootLedger(flags=flags or None, **found)


def read_boot_ledger(path: str | Path) -> BootLedger:
    """A boot log file (or a sim output dir's ``boot.log``)."""
    p = Path(path)
    if p.is_dir():
        p = p / "boot.log"
    try:
        return parse_boot_ledger(p.read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        raise UsageError(f"cannot read boot ledger {str(path)!r}: {exc.strerror or exc}") from None
