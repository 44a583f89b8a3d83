"""The direct-scrape recorder: ``pdcensus record`` for a box with no Prometheus.

It scrapes each endpoint's ``/metrics`` every interval, as Prometheus would (``up`` 1 on a
good scrape, 0 with no other sample on a failed one; ``job`` from ``--job``, ``instance`` =
the URL's host:port), and appends one block per scrape to a journal
(:mod:`pdcensus.sources.recorder_journal`): written with one ``write``, then ``fsync``, so
kill -9 or a power cut never damages what was already written, and running the same
command again resumes the file. A full disk (ENOSPC, EDQUOT, or EFBIG from a file-size
limit) cuts the half-written block off again and stops with a one-line error; the file
still loads. ``load_record_journal`` reads the file, finished or in progress.

A redirect is followed only within the target's origin and a ``Retry-After`` on a 429/503
holds that target's next scrape back, by the rule every HTTP reader here shares
(:mod:`pdcensus.sources.http_hops`): a scrape that reads another server's data under this
target's ``instance``, or one that hammers a server that asked for a pause, is worse than a
failed scrape that says why.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import itertools
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

import httpx

from pdcensus.errors import CensusError, DataError, RecordWriteError, UsageError
from pdcensus.sources.http_hops import (
    MAX_SCRAPE_PAUSE_SECONDS,
    RedirectRefused,
    asked_to_wait,
    next_hop,
    said_retry_after,
)
from pdcensus.sources.limits import MAX_SCRAPE_ENV, max_scrape_bytes, read_capped
from pdcensus.sources.recorder_journal import (
    JOURNAL_SUFFIX,
    MAGIC,
    ScrapeHeader,
    count_samples,
    encode_block,
    is_record_journal,
    load_record_journal,
    parse_exposition,
    scan_journal,
)

__all__ = [
    "JOURNAL_SUFFIX",
    "JournalWriter",
    "RecordWriteError",
    "ScrapeOutcome",
    "Target",
    "is_record_journal",
    "load_record_journal",
    "parse_target",
    "record",
]

# Prefer 0.0.4 text (what every engine serves); OpenMetrics is parsed too if that is what comes.
ACCEPT = "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"
DEFAULT_JOB = "pdcensus-record"
MAX_SCRAPE_SECONDS = 10.0  # a scrape's whole deadline is the interval, within these bounds
MIN_SCRAPE_SECONDS = 0.5
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


@dataclass(frozen=True)
class Target:
    """One endpoint to scrape: the URL and the instance label it gets (host:port)."""

    url: str
    instance: str


def parse_target(url: str) -> Target:
    """``http://host:port[/path]`` -> Target; a bare ``host:port`` or an empty path gets ``/metrics``.

    A bare word without a scheme must name its port (``notaurl`` is refused, not scraped as
    ``http://notaurl:80/metrics``); a port out of range is refused too.
    """
    text = url if "://" in url else f"http://{url}"
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = -1
    if (parts.scheme not in ("http", "https") or not parts.hostname or port == -1
            or ("://" not in url and port is None)):
        raise UsageError(f"not an endpoint URL: {url!r}; use e.g. http://127.0.0.1:7770/metrics or HOST:PORT")
    if parts.username or parts.password:
        raise UsageError(f"credentials in the endpoint URL are refused: {parts.hostname!r}")
    port = port or (443 if parts.scheme == "https" else 80)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return Target(urlunsplit((parts.scheme, f"{host}:{port}", path, parts.query, "")), f"{host}:{port}")


@dataclass(frozen=True)
class ScrapeOutcome:
    """What one scrape gave, for the progress line."""

    round: int
    target: Target
    time: float
    up: int
    samples: int
    duration_seconds: float
    error: str
    file_bytes: int


class JournalWriter:
    """Appends blocks to a journal: creates it, or resumes it after cutting a torn tail."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.blocks = 0  # committed scrape blocks in the file
        self.dropped_bytes = 0  # bytes of a torn tail cut off on resume
        self.resumed = False
        if self.path.exists() and not self.path.is_file():
            raise UsageError(f"--out {str(self.path)!r} is not a regular file (a journal is appended, fsynced and "
                             f"cut back on a torn tail); give a file path, e.g. run{JOURNAL_SUFFIX}")
        size = self.path.stat().st_size if self.path.exists() else 0
        # a file cut inside the magic line (a crash while creating it) is started afresh
        partial_magic = 0 < size < len(MAGIC) and MAGIC.startswith(self.path.read_bytes())
        exists = size > 0 and not partial_magic
        if exists and not is_record_journal(self.path):
            raise UsageError(
                f"{str(self.path)!r} exists and is not a pdcensus recording journal; "
                f"choose another --out (e.g. a new *{JOURNAL_SUFFIX} file)"
            )
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot open {str(self.path)!r} for writing: {exc.strerror}") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise UsageError(f"another recorder is writing {str(self.path)!r}") from None
        try:
            if exists:
                scan = scan_journal(self.path)
                self.blocks, self.dropped_bytes = len(scan.blocks), scan.torn_bytes
                self.resumed = True
                self.size = scan.good_bytes
                if scan.torn_bytes:
                    os.ftruncate(self._fd, self.size)
                    os.fsync(self._fd)
            else:
                self.size = 0
                os.ftruncate(self._fd, 0)
                self._append(MAGIC)
                _fsync_dir(self.path)
        except OSError as exc:
            self.close()
            raise RecordWriteError(f"{self.path}: cannot prepare the journal "
                                   f"({errno.errorcode.get(exc.errno or 0, '?')}: {exc.strerror})") from None
        except CensusError:
            self.close()
            raise

    def _append(self, data: bytes) -> None:
        """Write ``data`` at the committed end and fsync; on failure cut back and raise."""
        start = self.size
        try:
            view = memoryview(data)
            offset = start
            while view:
                written = os.pwrite(self._fd, view, offset)
                view, offset = view[written:], offset + written
            os.fsync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, start)
                os.fsync(self._fd)
            except OSError:
                pass  # the reader ignores a torn tail anyway
            what = "disk full" if exc.errno in _DISK_FULL else "write failed"
            raise RecordWriteError(
                f"{self.path}: {what} ({errno.errorcode.get(exc.errno or 0, '?')}: {exc.strerror}); "
                f"{self.blocks} scrape(s) kept and the file still loads; free space and run "
                "the same command again to resume"
            ) from None
        self.size = start + len(data)

    def append(self, header: ScrapeHeader, body: bytes) -> None:
        self._append(encode_block(header, body))
        self.blocks += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path.parent if str(path.parent) else ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def scrape_once(
    client: httpx.AsyncClient, target: Target, job: str, timeout_seconds: float
) -> tuple[ScrapeHeader, bytes, int, float | None]:
    """One scrape: ``(header, body, sample count, Retry-After seconds)``; a failure is ``up`` 0 with no body.

    ``timeout_seconds`` bounds the whole scrape (connect, headers, redirects, the whole body),
    not each read, and the body is refused past :func:`pdcensus.sources.limits.max_scrape_bytes`.
    A redirect is followed within the target's origin only (:mod:`pdcensus.sources.http_hops`);
    the last element is what a 429/503 asked to wait, None when it asked nothing.
    """
    started = time.time()
    t0 = time.perf_counter()
    error, body, content_type, samples = "", b"", "", 0
    asked: float | None = None
    base = httpx.URL(target.url)
    try:
        async with asyncio.timeout(timeout_seconds):
            request = client.build_request("GET", base, headers={"Accept": ACCEPT}, timeout=timeout_seconds)
            for hop in itertools.count(1):
                resp = await client.send(request, stream=True, follow_redirects=False)
                try:
                    after = next_hop(base, request.url, resp.status_code, resp.reason_phrase,
                                     resp.headers.get("Location"), hop)
                    if after is None and resp.status_code != 200:
                        error = f"HTTP {resp.status_code} {resp.reason_phrase}"
                        asked = asked_to_wait(resp.status_code, resp.headers.get("Retry-After"), time.time())
                        if asked is not None:
                            error += f", with {said_retry_after(resp.headers.get('Retry-After'), asked)}"
                    elif after is None:
                        body = await read_capped(resp.aiter_bytes(), max_scrape_bytes(), "the answer", MAX_SCRAPE_ENV)
                        content_type = resp.headers.get("content-type", "")
                finally:
                    await resp.aclose()
                if after is None:
                    break
                request = client.build_request("GET", after, headers={"Accept": ACCEPT}, timeout=timeout_seconds)
        if not error:
            samples = count_samples(parse_exposition(body, content_type, started, job, target.instance))
    except RedirectRefused as refused:
        error = f"{refused}; give the URL the endpoint serves its metrics at"
    except (TimeoutError, httpx.TimeoutException):
        error = f"no answer within {timeout_seconds:g}s (the deadline for the whole scrape)"
    except httpx.TransportError as exc:
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    except DataError as exc:
        error = str(exc) if "over the limit" in str(exc) else (
            f"the answer does not parse as metrics text: {str(exc)[:200]}")
    except CensusError as exc:
        error = f"the answer does not parse as metrics text: {str(exc)[:200]}"
    duration = time.perf_counter() - t0
    if error:
        body, content_type, samples = b"", "", 0
    header = ScrapeHeader(
        time=started, job=job, instance=target.instance, up=0 if error else 1, body_bytes=len(body),
        content_type=content_type, duration_seconds=duration, error=error,
    )
    return header, body, samples, asked


def _paused_slot(resume: float, began: float, interval_seconds: float) -> int:
    """The first slot at or after ``resume`` (monotonic): where a target told to wait scrapes next."""
    return math.ceil((resume - began) / interval_seconds)


def _retry_pause(asked: float | None, began: float, interval_seconds: float, duration_seconds: float | None
                 ) -> tuple[float | None, str]:
    """Where a Retry-After puts the target's next scrape (monotonic; None: on schedule), and what to add to its error.

    The wait is at most :data:`~pdcensus.sources.http_hops.MAX_SCRAPE_PAUSE_SECONDS`; one that
    runs past the recording's end means no further scrape of that target.
    """
    if asked is None or asked <= 0:
        return None, ""
    pause = min(asked, MAX_SCRAPE_PAUSE_SECONDS)
    resume = time.monotonic() + pause
    next_slot = _paused_slot(resume, began, interval_seconds)
    if duration_seconds is not None and next_slot * interval_seconds >= duration_seconds:
        return resume, ": no further scrape of this target, as that wait runs past the recording's end"
    capped = f" (the most a Retry-After holds a target back; it asked {asked:g}s)" if pause < asked else ""
    return resume, f": the next scrape of this target waits {pause:g}s{capped}"


async def record(
    targets: Sequence[Target],
    out: str | Path,
    *,
    interval_seconds: float = 15.0,
    duration_seconds: float | None = None,
    job: str = DEFAULT_JOB,
    on_scrape: Callable[[ScrapeOutcome], None] | None = None,
    on_start: Callable[[JournalWriter], None] | None = None,
    stop: asyncio.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> int:
    """Scrape ``targets`` every interval into the journal ``out`` until ``duration`` or ``stop``.

    Each target keeps its own schedule, and each scrape its own deadline (the interval, at
    most 10 s, as Prometheus's scrape_timeout): a target that trickles its answer or hangs misses its own slots, never the
    others' (an interval under 0.5 s still gives each scrape 0.5 s: the target then skips
    slots, and only its own). A 429 or 503 with a ``Retry-After`` puts that target's next scrape
    at least that far off (:func:`_retry_pause`), its error saying so; a redirect is followed
    within the target's origin only, one elsewhere is a failed scrape naming where it points.
    Returns the most scrapes any target made. Raises RecordWriteError on a full
    disk (the file keeps every earlier scrape) and UsageError on bad arguments.
    """
    if interval_seconds <= 0:
        raise UsageError(f"--interval must be positive, got {interval_seconds:g}s")
    if duration_seconds is not None and duration_seconds <= 0:
        raise UsageError(f"--duration must be positive, got {duration_seconds:g}s")
    if not targets:
        raise UsageError("give at least one endpoint URL to scrape")
    seen: dict[str, str] = {}
    for t in targets:
        if t.instance in seen:
            raise UsageError(f"two URLs share the instance {t.instance!r}: {seen[t.instance]!r} and {t.url!r}")
        seen[t.instance] = t.url
    stop = stop or asyncio.Event()
    timeout = min(MAX_SCRAPE_SECONDS, max(MIN_SCRAPE_SECONDS, interval_seconds))
    max_scrape_bytes()  # a bad $PDCENSUS_MAX_SCRAPE is a usage error before the first scrape
    with JournalWriter(out) as writer:
        if on_start:
            on_start(writer)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=len(targets))
        async with httpx.AsyncClient(transport=transport, follow_redirects=False, limits=limits) as client:
            began = time.monotonic()

            async def scrape_target(target: Target) -> int:
                slot = made = 0
                while not stop.is_set():
                    header, body, samples, asked = await scrape_once(client, target, job, timeout)
                    resume, note = _retry_pause(asked, began, interval_seconds, duration_seconds)
                    if note:
                        header = replace(header, error=header.error + note)
                    writer.append(header, body)
                    made += 1
                    if on_scrape:
                        on_scrape(ScrapeOutcome(made - 1, target, header.time, header.up, samples,
                                                header.duration_seconds, header.error, writer.size))
                    slot += 1
                    now = time.monotonic()
                    if now > began + slot * interval_seconds:  # a slow scrape: skip missed slots, as Prometheus does
                        slot = int((now - began) // interval_seconds) + 1
                    if resume is not None:  # told to wait: the first slot after the wait, as asked
                        slot = max(slot, _paused_slot(resume, began, interval_seconds))
                    if duration_seconds is not None and slot * interval_seconds >= duration_seconds:
                        break
                    next_at = began + slot * interval_seconds
                    try:
                        await asyncio.wait_for(stop.wait(), timeout=max(0.0, next_at - time.monotonic()))
                    except asyncio.TimeoutError:
                        pass
                return made

            tasks = [asyncio.create_task(scrape_target(t)) for t in targets]
            try:
                made = await asyncio.gather(*tasks)  # a full disk stops every target
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    return max(made)
