"""Evidence bundles: what the runbook says to read on the endpoint's host, in one archive.

The arena, the expert slab, the heat engine and the prefill stager have no metric: they
are read from the boot ledger, ``/stats`` and ``/diagnostics``; and an arm is verified by
the flag reaching argv (``/proc/PID/cmdline``). ``collect_bundle`` gathers those, plus one
``/metrics`` scrape, into a ``.tar.gz`` with a ``manifest.json`` saying what was collected
and what failed and why (a failed item never stops the others). ``read_bundle`` reads it
back (or a simulator output directory, which uses the same file names) for the census.
An HTTP item follows redirects within the ``--url``'s origin only and waits out a
``Retry-After`` that fits its ``--timeout`` (:mod:`pdcensus.sources.http_hops`).

The log command is split with shlex and run WITHOUT a shell as the invoking user. A
leading ``sudo`` (or doas/su/pkexec/run0) is refused: rootless container logs belong to
the deploy user, and ``sudo podman logs`` reads root's container store instead.

Reading never extracts: members are read in memory, only regular files with the known
names are accepted, and links, devices, absolute paths and ``..`` are refused.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import socket
import subprocess
import tarfile
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pdcensus.errors import DataError, UsageError
from pdcensus.sources.http_hops import RedirectRefused, asked_to_wait, display_url, next_hop, said_retry_after
from pdcensus.sources.limits import DEFAULT_MAX_SCRAPE, MAX_SCRAPE_ENV, capped_chunks, load_json, max_scrape_bytes

SCHEMA = "pdcensus/bundle/v1"
FILES = {
    "argv": "cmdline",
    "stats": "stats.json",
    "diagnostics": "diagnostics.json",
    "metrics": "metrics.prom",
    "boot_log": "boot.log",
}
HTTP_ITEMS = ("stats", "diagnostics", "metrics")  # what collect asks the endpoint's URL for
MANIFEST = "manifest.json"
ALLOWED_MEMBERS = frozenset({MANIFEST, *FILES.values()})
PRIVILEGE_COMMANDS = frozenset({"sudo", "doas", "su", "pkexec", "run0"})
MAX_ITEM_BYTES = DEFAULT_MAX_SCRAPE  # the head of a boot log kept; HTTP items: limits.max_scrape_bytes
LOG_TIMEOUT_SECONDS = 60.0
HTTP_TRIES = 4  # an item asked again after a Retry-After, at most this many times in all


@dataclass(frozen=True)
class ItemResult:
    """One item of the bundle: collected (with its file) or failed (with why)."""

    name: str
    ok: bool
    source: str
    file: str = ""
    bytes: int = 0
    error: str = ""
    note: str = ""
    unreachable: bool = False  # no answer at all (connection refused, timeout), not a bad answer

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ok" if self.ok else "failed", "source": self.source}
        if self.ok:
            out.update(file=self.file, bytes=self.bytes)
        else:
            out["error"] = self.error
        if self.unreachable:
            out["unreachable"] = True
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Bundle:
    """A bundle read back: each part is None (or empty) where it was not collected."""

    source: str
    manifest: dict[str, Any]
    argv: tuple[str, ...] | None
    stats: Any | None
    diagnostics: Any | None
    metrics_text: str | None
    boot_lines: tuple[str, ...] = field(default=())

    def failures(self) -> dict[str, str]:
        """Item name -> why it was not collected, from the manifest."""
        items = self.manifest.get("items", {})
        return {k: str(v.get("error", "")) for k, v in items.items() if v.get("status") != "ok"}


def find_process(name: str) -> int:
    """The one pid whose comm or argv[0] basename is ``name`` (UsageError if none or several)."""
    me = os.getpid()
    hits: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
        except OSError:
            continue
        if name in (comm, os.path.basename(argv0)):
            hits.append(int(entry.name))
    if not hits:
        raise UsageError(f"no process named {name!r} (looked at /proc/*/comm and argv[0]); give --pid")
    if len(hits) > 1:
        raise UsageError(f"{len(hits)} processes named {name!r}: pids {', '.join(map(str, sorted(hits)))}; pick one with --pid")
    return hits[0]


def split_log_command(command: str) -> list[str]:
    """shlex-split the log command; refuse an empty one and a privilege-raising first word."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"cannot split --log-cmd {command!r}: {exc}") from None
    if not argv:
        raise UsageError("--log-cmd is empty; give e.g. 'podman logs SVC'")
    if os.path.basename(argv[0]) in PRIVILEGE_COMMANDS:
        raise UsageError(
            f"refusing --log-cmd {command!r}: run it as the deploy user, without {argv[0]!r}. Rootless "
            "container logs belong to that user; under sudo podman reads root's container store, "
            "not the service's (use e.g. 'podman logs SVC')"
        )
    return argv


def _read_argv(pid: int) -> tuple[ItemResult, bytes]:
    source = f"/proc/{pid}/cmdline"
    try:
        raw = Path(source).read_bytes()
    except FileNotFoundError:
        return ItemResult("argv", False, source, error=f"no process with pid {pid}"), b""
    except OSError as exc:
        return ItemResult("argv", False, source, error=f"cannot read: {exc.strerror}"), b""
    if not raw:
        return ItemResult("argv", False, source, error="empty cmdline (a kernel thread or a zombie?)"), b""
    return ItemResult("argv", True, source, FILES["argv"], len(raw)), raw


def _http_item(client: httpx.Client, name: str, url: str, want_json: bool, timeout_seconds: float
               ) -> tuple[ItemResult, bytes]:
    """GET one item within ``timeout_seconds`` for the whole answer, refused past the scrape cap."""
    late = ItemResult(name, False, url, error=f"no complete answer within {timeout_seconds:g}s", unreachable=True)
    try:
        body, error, note = _get(client, httpx.URL(url), time.monotonic() + timeout_seconds, timeout_seconds)
    except RedirectRefused as refused:
        return ItemResult(name, False, url, error=f"{refused}; give the URL the endpoint answers at as --url"), b""
    except httpx.TimeoutException:
        return late, b""
    except httpx.TransportError as exc:
        return ItemResult(name, False, url, error=f"{type(exc).__name__}: {exc}", unreachable=True), b""
    except DataError as exc:
        return ItemResult(name, False, url, error=str(exc)), b""
    if body is None:
        return (ItemResult(name, False, url, error=error) if error else late), b""
    if want_json:
        try:
            json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return ItemResult(name, False, url, error=f"not JSON: {exc}"), b""
        except RecursionError:
            return ItemResult(name, False, url, error="not JSON pdcensus reads: nested too deep"), b""
    return ItemResult(name, True, url, FILES[name], len(body), note=note), body


def _get(client: httpx.Client, base: httpx.URL, deadline: float, timeout_seconds: float
         ) -> tuple[bytes | None, str, str]:
    """``(body, '', how it came)``, or ``(None, why not, '')``; ``(None, '', '')`` when the deadline passed.

    The deadline covers the redirects (same origin only) and any ``Retry-After`` waited out
    (:mod:`pdcensus.sources.http_hops`); a wait past it fails the item at once, naming it.
    """
    target, hops, tries, notes = base, 0, 0, list[str]()
    while (left := deadline - time.monotonic()) > 0:
        wait, why = None, ""
        with client.stream("GET", target, timeout=left) as resp:
            tries += 1
            after = next_hop(base, target, resp.status_code, resp.reason_phrase, resp.headers.get("Location"), hops + 1)
            if after is None and resp.status_code == 200:
                parts: list[bytes] = []
                for chunk in capped_chunks(resp.iter_bytes(), max_scrape_bytes(), "the answer", MAX_SCRAPE_ENV):
                    if time.monotonic() > deadline:  # a trickle: each read is in time, the whole is not
                        return None, "", ""
                    parts.append(chunk)
                return b"".join(parts), "", "; ".join(notes)
            if after is None:
                wait, why = _retry_after(resp, tries, deadline, timeout_seconds)
        if after is not None:
            hops, target = hops + 1, after
            notes.append(f"redirected to {display_url(str(after))}")
        elif wait is None:
            return None, why, ""
        else:
            notes.append(f"waited: {why}")
            time.sleep(wait)
    return None, "", ""


def _retry_after(resp: httpx.Response, tries: int, deadline: float, timeout_seconds: float
                 ) -> tuple[float | None, str]:
    """``(seconds to wait, what the answer said)`` for an answer not 200; no wait: the item fails.

    Only a 429/503 with a readable ``Retry-After`` that ends before the deadline is asked again.
    """
    why = f"HTTP {resp.status_code} {resp.reason_phrase}"
    said = resp.headers.get("Retry-After")
    asked = asked_to_wait(resp.status_code, said, time.time())
    if asked is None:
        return None, why
    why = f"{why}, with {said_retry_after(said, asked)}"
    attempts = f"{tries} attempt{'s' if tries != 1 else ''}"
    left = deadline - time.monotonic()
    if asked >= left:
        return None, (f"{why}, past the {max(0.0, left):.1f}s left of the --timeout of {timeout_seconds:g}s; "
                      f"not retried (after {attempts})")
    if tries >= HTTP_TRIES:
        return None, f"{why}, still after {attempts}"
    return asked, why


def _run_log_command(argv: list[str]) -> tuple[ItemResult, bytes]:
    source = shlex.join(argv)
    try:
        proc = subprocess.run(  # no shell: argv as split, as the invoking user
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            timeout=LOG_TIMEOUT_SECONDS, check=False,
        )
    except FileNotFoundError:
        return ItemResult("boot_log", False, source, error=f"no such command: {argv[0]!r}"), b""
    except PermissionError:
        return ItemResult("boot_log", False, source, error=f"not executable: {argv[0]!r}"), b""
    except subprocess.TimeoutExpired:
        return ItemResult("boot_log", False, source, error=f"still running after {LOG_TIMEOUT_SECONDS:g}s"), b""
    out = proc.stdout or b""
    if proc.returncode != 0:
        tail = out[-300:].decode(errors="replace").strip().replace("\n", " | ")
        return ItemResult("boot_log", False, source, error=f"exit status {proc.returncode}: {tail}"), b""
    note = ""
    if len(out) > MAX_ITEM_BYTES:  # the boot ledger is at the start: keep the head
        out, note = out[:MAX_ITEM_BYTES], f"kept the first {MAX_ITEM_BYTES} bytes"
    return ItemResult("boot_log", True, source, FILES["boot_log"], len(out), note=note), out


def collect_bundle(
    out: str | Path,
    *,
    pid: int | None = None,
    process_name: str | None = None,
    url: str = "http://127.0.0.1:7770",
    log_cmd: str | None = None,
    timeout_seconds: float = 10.0,
    skip: Collection[str] = (),
) -> dict[str, Any]:
    """Collect the evidence into the tar.gz ``out``; returns the manifest (also in the archive).

    ``skip`` names HTTP items not to ask for (an engine that serves no ``/stats`` or
    ``/diagnostics``, such as vLLM): every item asked for is a requested channel, and
    ``collect`` exits non-zero when one fails.
    """
    if pid is not None and process_name is not None:
        raise UsageError("give --pid or --process-name, not both")
    unknown = sorted(set(skip) - set(HTTP_ITEMS))
    if unknown:
        raise UsageError(f"cannot skip {', '.join(map(repr, unknown))}: expected one of: {', '.join(HTTP_ITEMS)}")
    log_argv = split_log_command(log_cmd) if log_cmd is not None else None
    max_scrape_bytes()  # a bad $PDCENSUS_MAX_SCRAPE is a usage error before anything is asked
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"--url must be http(s)://HOST:PORT, got {url!r}")
    if process_name is not None:
        pid = find_process(process_name)
    items: list[tuple[ItemResult, bytes]] = []
    if pid is not None:
        items.append(_read_argv(pid))
    with httpx.Client(timeout=timeout_seconds, follow_redirects=False) as client:
        for name in HTTP_ITEMS:
            if name not in skip:
                items.append(_http_item(client, name, f"{base}/{name}", name != "metrics", timeout_seconds))
    if log_argv is not None:
        items.append(_run_log_command(log_argv))
    manifest: dict[str, Any] = {
        "schema": SCHEMA,
        "created": round(time.time(), 3),
        "host": socket.gethostname(),
        "pid": pid,
        "url": base,
        "items": {r.name: r.to_dict() for r, _ in items},
    }
    _write_archive(Path(out), manifest, [(r.file, data) for r, data in items if r.ok])
    return manifest


def _write_archive(path: Path, manifest: dict[str, Any], files: list[tuple[str, bytes]]) -> None:
    tmp = path.with_name(path.name + ".part")
    now = time.time()
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for name, data in [(MANIFEST, json.dumps(manifest, indent=2).encode()), *files]:
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.mtime = len(data), 0o644, int(now)
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"cannot write the bundle {str(path)!r}: {exc.strerror}") from None


def _members_from_tar(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar.getmembers():
                name = member.name
                if name.startswith("/") or ".." in Path(name).parts or "\\" in name:
                    raise DataError(f"{path}: refusing member {name!r}: a path outside the bundle")
                if not member.isreg():
                    raise DataError(f"{path}: refusing member {name!r}: not a regular file (link or device)")
                if name not in ALLOWED_MEMBERS:
                    continue  # a newer bundle's extra item: not ours to read
                if name in out:
                    raise DataError(f"{path}: member {name!r} appears twice")
                if member.size > MAX_ITEM_BYTES:
                    raise DataError(f"{path}: member {name!r} is {member.size} bytes, over {MAX_ITEM_BYTES}")
                fh = tar.extractfile(member)
                out[name] = fh.read() if fh else b""
    except (tarfile.TarError, EOFError, OSError) as exc:
        why = " ".join(str(exc).split())  # tarfile lists each method tried on its own line: one line here
        raise DataError(f"{path}: not a readable bundle (.tar.gz): {why}") from None
    return out


def _members_from_dir(path: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name in ALLOWED_MEMBERS:
        member = path / name
        if member.is_symlink() or not member.is_file():
            continue  # never follow a link out of the directory
        out[name] = member.read_bytes()
    return out


def find_side_channels(source: str | Path | None) -> Path | None:
    """A directory beside a recording that holds side channels (a sim output dir), if any."""
    if source is None:
        return None
    p = Path(source)
    for candidate in (p, p.parent):
        if candidate.is_dir() and any((candidate / n).exists() for n in ("cmdline", "boot.log", "stats.json")):
            return candidate
    return None


def read_bundle(path: str | Path) -> Bundle:
    """A bundle (``.tar.gz`` from ``collect``, or a simulator output directory) as a Bundle."""
    p = Path(path)
    if not p.exists():
        raise DataError(f"no such bundle: {str(p)!r}")
    members = _members_from_dir(p) if p.is_dir() else _members_from_tar(p)
    if not members:
        raise DataError(f"{p}: no bundle item found (looked for {', '.join(sorted(ALLOWED_MEMBERS))})")

    def parsed(name: str) -> Any | None:
        if name not in members:
            return None
        return load_json(members[name], f"{p}: {name}")

    manifest = parsed(MANIFEST) or {}
    raw_argv = members.get(FILES["argv"]) or b""
    # NUL-separated as /proc/PID/cmdline; a saved command line of text (no NUL) is split on whitespace
    parts = raw_argv.rstrip(b"\0").split(b"\0") if b"\0" in raw_argv else raw_argv.split()
    argv = tuple(a.decode(errors="replace") for a in parts) if raw_argv else None
    metrics = members.get(FILES["metrics"])
    boot = members.get(FILES["boot_log"], b"").decode(errors="replace")
    return Bundle(
        source=str(p),
        manifest=manifest if isinstance(manifest, dict) else {},
        argv=argv,
        stats=parsed(FILES["stats"]),
        diagnostics=parsed(FILES["diagnostics"]),
        metrics_text=metrics.decode(errors="replace") if metrics is not None else None,
        boot_lines=tuple(boot.splitlines()),
    )
