"""What the Prometheus client does with a redirect and with ``Retry-After``, decided in one place.

Redirects. A server behind a reverse proxy may answer ``301``/``302``/``307``/``308`` (a path
prefix, a trailing slash, ``http`` to ``https``, a login page). The client follows a redirect
only to the same origin (scheme, host and port as the ``--prometheus`` URL), at most
:data:`MAX_REDIRECTS` hops, re-sending the same method and parameters: the API is read-only,
and a query is the same question whichever method carries it (dropping the form on a ``302``,
as browsers do, would ask the target an empty question and report its complaint instead).

A redirect to another origin is refused with one line naming where it points, even without
credentials, because another origin is another server: reading it silently would put its data
(or an SSO login page) under this URL's name, and following it would hand the bearer token,
the basic-auth password or the client certificate to a host nobody named. The user who meant
it gives the target as ``--prometheus`` (``http`` to ``https`` is the common case).

Retry-After. A ``429`` or ``503`` may say how long to wait, in seconds or as an HTTP-date
(RFC 9110 section 10.2.3). :func:`retry_after_seconds` reads it; the client waits at least
that long before the next try when it fits in the request's deadline, and stops at once,
naming the ``Retry-After``, when it does not.
"""

from __future__ import annotations

import email.utils
import math
from datetime import timezone

import httpx

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
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
        return "it points to another origin; neither the credentials nor the query are sent there"
    if hops > MAX_REDIRECTS:
        return f"more than {MAX_REDIRECTS} redirects in a row"
    return ""
