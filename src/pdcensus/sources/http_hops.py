"""What an HTTP reader does with a redirect and with ``Retry-After``, decided in one place.

Three readers use it: the Prometheus client (:mod:`pdcensus.sources.prometheus_http`), the
recorder's scrapes (:func:`pdcensus.sources.recorder.scrape_once`, ``pdcensus record``) and
``pdcensus collect`` (:func:`pdcensus.sources.bundle.collect_bundle`). Each sends with
redirects off and asks :func:`next_hop` what to do with every answer.

Redirects. A server behind a reverse proxy may answer ``301``/``302``/``307``/``308`` (a path
prefix, a trailing slash, ``http`` to ``https``, a login page). A reader follows a redirect
only to the same origin (scheme, host and port as the URL it was given), at most
:data:`MAX_REDIRECTS` hops, re-sending the same method and parameters: the Prometheus API is
read-only, and a query is the same question whichever method carries it (dropping the form on
a ``302``, as browsers do, would ask the target an empty question and report its complaint
instead).

A redirect to another origin is refused with one line naming where it points, even without
credentials, because another origin is another server: reading it silently would put its data
(or an SSO login page) under this URL's name (a recording's ``instance``, a bundle's item), and
following it would hand the bearer token, the basic-auth password or the client certificate to
a host nobody named. The user who meant it gives the target as the URL (``http`` to ``https``
is the common case).

Retry-After. A ``429`` or ``503`` may say how long to wait, in seconds or as an HTTP-date
(RFC 9110 section 10.2.3). :func:`retry_after_seconds` reads it and :func:`said_retry_after`
names it in a message. The Prometheus client and ``collect`` wait at least that long before
the next try when it fits in the request's deadline, and stop at once, naming the
``Retry-After``, when it does not; the recorder puts that target's next scrape at least that
far off (never past the recording's end, at most :data:`MAX_SCRAPE_PAUSE_SECONDS`) and says
so in the scrape's error.
"""

from __future__ import annotations

import email.utils
import math
from datetime import timezone
from urllib.parse import urlsplit, urlunsplit

import httpx

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
RETRY_AFTER_STATUSES = frozenset({429, 503})  # where the recorder and collect read a Retry-After
MAX_SCRAPE_PAUSE_SECONDS = 600.0  # the longest a Retry-After holds a recorder's target back
_MAX_RETRY_AFTER_SECONDS = 10 * 365 * 86400.0


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (0 for a date past), or None if absent or unreadable.

    ``now`` is the wall clock (``time.time()``), for the HTTP-date form.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), _MAX_RETRY_AFTER_SECONDS) if len(text) < 12 else _MAX_RETRY_AFTER_SECONDS
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a date without a zone is read as GMT too
        when = when.replace(tzinfo=timezone.utc)
    try:
        seconds = when.timestamp() - now
    except (OverflowError, OSError, ValueError):
        return None
    return min(max(0.0, seconds), _MAX_RETRY_AFTER_SECONDS) if math.isfinite(seconds) else None


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    """Same scheme, host and port (a default port and no port are the same)."""
    default = {"http": 80, "https": 443}
    return (a.scheme, a.host, a.port or default.get(a.scheme)) == (b.scheme, b.host, b.port or default.get(b.scheme))


def redirect_refusal(base: httpx.URL, target: httpx.URL, hops: int) -> str:
    """Why a redirect to ``target`` (the ``hops``-th, from 1) is not followed, or '' to follow it."""
    if not same_origin(base, target):
        return "it points to another origin; nothing is sent there, credentials included"
    if hops > MAX_REDIRECTS:
        return f"more than {MAX_REDIRECTS} redirects in a row"
    return ""


def asked_to_wait(status: int, value: str | None, now: float) -> float | None:
    """The seconds a 429/503 answer's ``Retry-After`` asks to wait; None for another status or no readable header."""
    return retry_after_seconds(value, now) if status in RETRY_AFTER_STATUSES else None


def said_retry_after(value: str | None, seconds: float) -> str:
    """``Retry-After '30' (30s)``: the header as sent (cut at 40 characters) and as read, for a message."""
    return f"Retry-After {(value or '').strip()[:40]!r} ({seconds:g}s)"


def display_url(url: str) -> str:
    """The URL without userinfo and query string: safe to print."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class RedirectRefused(Exception):
    """A redirect not followed; the message is one line: ``HTTP 302 Found: a redirect to URL, not followed (why)``."""


def next_hop(base: httpx.URL, current: httpx.URL, status: int, reason: str, location: str | None,
             hops: int) -> httpx.URL | None:
    """Where the ``hops``-th redirect (from 1) leads, to be asked next; None if the answer is not a redirect.

    ``base`` is the URL the reader was given, ``current`` the one just asked. Raises
    :class:`RedirectRefused` for another origin, a hop past :data:`MAX_REDIRECTS` or a
    ``Location`` that is not a URL. A 3xx without a ``Location`` is the caller's to report.
    """
    if status not in REDIRECT_STATUSES or location is None:
        return None
    try:
        target = current.join(location)
    except httpx.InvalidURL:
        target = httpx.URL()
    why = redirect_refusal(base, target, hops) if target.host else "its Location is not a URL"
    if why:
        where = display_url(str(target)) if target.host else repr(location[:200])
        raise RedirectRefused(f"HTTP {status} {reason}: a redirect to {where}, not followed ({why})")
    return target
