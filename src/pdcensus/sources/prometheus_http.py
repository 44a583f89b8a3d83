"""The HTTP side of the Prometheus source: auth, TLS, retries and the API's JSON envelope.

Anything that speaks Prometheus's HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics)
answers ``{"status": "success"|"error", "data": ..., "warnings": [...]}``. This module
turns that envelope into data plus warnings, and every failure into one of our errors:

::

    timeout / connection error / 5xx / 429  -> retried with exponential backoff within the
                                               call's deadline, then SourceUnreachableError (exit 4);
                                               a Retry-After is waited out, or ends the tries at
                                               once if it is past the deadline
    a redirect                              -> followed within the same origin, else
                                               SourceUnreachableError (exit 4) naming its target
                                               (:mod:`pdcensus.sources.http_hops` says why)
    401 / 403 / 404                         -> SourceUnreachableError (exit 4), not retried
    400 / 422 with errorType bad_data       -> UsageError (exit 2): the query was refused
    other API error, invalid/truncated JSON,
    a body over the cap, a wrong shape      -> DataError (exit 3)

A call has one deadline, ``timeout_seconds``, for everything: connect, headers, the whole
body, the retries and their back-off (and the command's ``--deadline`` where it sets one).
The body is read as a stream and refused past :func:`pdcensus.sources.limits.max_body_bytes`.

Secrets: a bearer token or a basic-auth password is read from an environment variable or
a file named by :class:`AuthConfig`, never taken as a literal. The resolved value lives
only in the request headers of the client; error messages carry the URL without userinfo
or query string and are scrubbed of the secret before they are raised.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from pdcensus.errors import CensusError, DataError, SourceUnreachableError, UsageError
from pdcensus.sources.http_hops import RedirectRefused, display_url, next_hop, retry_after_seconds, said_retry_after
from pdcensus.sources.limits import MAX_BODY_ENV, deadline_left, max_body_bytes, read_capped
from pdcensus.sources.prometheus_shapes import api_error_suffix, api_error_type, check_data, notes

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# The API answered that the query itself timed out or failed (Prometheus sends 503 for a query
# timeout): asking again only waits as long again; the caller gets a DataError and may ask less.
_ANSWERED = frozenset({"timeout", "execution"})


@dataclass(frozen=True)
class AuthConfig:
    """Where the credentials come from (names and paths only, never the secrets)."""

    bearer_token_env: str | None = None
    bearer_token_file: Path | None = None
    basic_user: str | None = None
    basic_password_env: str | None = None
    basic_password_file: Path | None = None
    ca_file: Path | None = None
    client_cert_file: Path | None = None
    client_key_file: Path | None = None
    insecure_skip_verify: bool = False

    def describe(self) -> str:
        """Where the credential came from, for error messages (never the value)."""
        if self.bearer_token_env:
            return f"bearer token from ${self.bearer_token_env}"
        if self.bearer_token_file:
            return f"bearer token from {self.bearer_token_file}"
        if self.basic_user is not None:
            return f"basic auth as {self.basic_user!r}"
        return "no credentials"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``attempts`` tries, delays base, 2*base, ... <= max."""

    attempts: int = 4
    base_delay_seconds: float = 0.5
    max_delay_seconds: float = 8.0

    def delay_seconds(self, attempt: int) -> float:
        return float(min(self.max_delay_seconds, self.base_delay_seconds * (2**attempt)))


@dataclass(frozen=True)
class _Credentials:
    headers: dict[str, str] = field(default_factory=dict)
    basic: tuple[str, str] | None = None
    secrets: tuple[str, ...] = ()


def _read_secret(env: str | None, path: Path | None, what: str) -> str:
    if env and path:
        raise UsageError(f"give the {what} from an environment variable or a file, not both")
    if env:
        value = os.environ.get(env)
        if not value:
            raise UsageError(f"the {what} variable ${env} is not set or empty")
        return value.strip()
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UsageError(f"cannot read the {what} file {str(path)!r}: {exc.strerror}") from None
    return ""


def resolve_credentials(auth: AuthConfig) -> _Credentials:
    """Read the secret named by ``auth`` (UsageError if it is missing or ambiguous)."""
    has_bearer = bool(auth.bearer_token_env or auth.bearer_token_file)
    if has_bearer and auth.basic_user is not None:
        raise UsageError("choose bearer-token auth or basic auth, not both")
    if has_bearer:
        token = _read_secret(auth.bearer_token_env, auth.bearer_token_file, "bearer token")
        if not token:
            raise UsageError(f"the bearer token file {str(auth.bearer_token_file)!r} is empty")
        return _Credentials(headers={"Authorization": f"Bearer {token}"}, secrets=(token,))
    if auth.basic_user is not None:
        password = _read_secret(auth.basic_password_env, auth.basic_password_file, "basic-auth password")
        return _Credentials(basic=(auth.basic_user, password), secrets=(password,) if password else ())
    if auth.basic_password_env or auth.basic_password_file:
        raise UsageError("a basic-auth password was given without a user (--basic-user)")
    return _Credentials()


def ssl_verify(auth: AuthConfig) -> ssl.SSLContext | bool:
    """The TLS verification setting httpx wants: a context with the CA and client cert, or False."""
    if auth.insecure_skip_verify:
        if auth.ca_file:
            raise UsageError("--insecure-skip-verify and a CA file contradict each other; pick one")
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            ctx = ssl.create_default_context(cafile=str(auth.ca_file) if auth.ca_file else None)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(f"cannot load the CA file {str(auth.ca_file)!r}: {exc}") from None
    if auth.client_cert_file or auth.client_key_file:
        if not auth.client_cert_file:
            raise UsageError("a client key was given without a client certificate")
        try:
            ctx.load_cert_chain(
                str(auth.client_cert_file), str(auth.client_key_file) if auth.client_key_file else None
            )
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(
                f"cannot load the client certificate {str(auth.client_cert_file)!r}: {exc}"
            ) from None
    return ctx


def check_base_url(base_url: str) -> str:
    """Validate a server URL (scheme, host, no inline credentials); strip a trailing '/'."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"not a server URL: {display_url(base_url)!r}; use http://HOST:PORT or https://HOST:PORT"
        )
    if parts.username or parts.password:
        raise UsageError(
            f"credentials in the URL {display_url(base_url)!r} are refused; pass them with "
            "--bearer-token-env/--bearer-token-file or --basic-user with --basic-password-env/-file"
        )
    return base_url.rstrip("/")


class ApiClient:
    """An async client for one server: GET/POST an API path, get ``(data, warnings)``."""

    def __init__(
        self,
        base_url: str,
        *,
        auth: AuthConfig | None = None,
        timeout_seconds: float = 30.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 8,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise UsageError(f"concurrency must be at least 1, got {concurrency}")
        if timeout_seconds <= 0:
            raise UsageError(f"timeout must be positive, got {timeout_seconds}")
        self.base_url = check_base_url(base_url)
        self.auth = auth or AuthConfig()
        self.timeout_seconds = timeout_seconds
        self.retry = retry or RetryPolicy()
        self.requests_made = 0
        self.max_body_bytes = max_body_bytes()
        creds = resolve_credentials(self.auth)
        self._secrets = creds.secrets
        self._semaphore = asyncio.Semaphore(concurrency)
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=creds.headers,
            auth=httpx.BasicAuth(*creds.basic) if creds.basic else None,
            verify=ssl_verify(self.auth) if self.base_url.startswith("https") else True,
            timeout=httpx.Timeout(timeout_seconds),
            transport=transport,
            limits=httpx.Limits(max_connections=concurrency),
            follow_redirects=False,
        )

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def _fail(self, cls: type[CensusError], text: str) -> CensusError:
        return cls(self._scrub(text))

    async def call(
        self, path: str, params: Mapping[str, Any] | None = None, *, post: bool = False
    ) -> tuple[Any, list[str]]:
        """One API call with retries; returns ``(data, warnings)`` or raises our error.

        The call, retries and back-off included, must finish within ``timeout_seconds`` of
        when it got a connection slot, and within the overall deadline where one is set
        (:func:`pdcensus.sources.limits.overall_deadline`): a server that trickles its answer
        is cut off at the deadline, not at a per-read timeout it never trips.
        """
        url = display_url(self.base_url + path)
        last = ""
        attempts = 0
        began: float | None = None
        asked: float | None = None  # the last answer's Retry-After, in seconds
        for attempt in range(self.retry.attempts):
            if attempt:
                delay = max(self.retry.delay_seconds(attempt - 1), asked or 0.0)
                if began is not None and self._budget(began) <= delay:
                    break  # no time left for another try
                await asyncio.sleep(delay)
            try:
                async with self._semaphore:
                    began = time.monotonic() if began is None else began
                    budget = self._budget(began)
                    if budget <= 0:
                        break
                    attempts += 1
                    self.requests_made += 1
                    async with asyncio.timeout(budget):
                        answer = await self._send(path, params, post, url)
            except (TimeoutError, httpx.TimeoutException):
                last = f"no answer within {self.timeout_seconds:g}s (the --timeout for the whole request)"
                continue
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            if answer.status_code in _RETRY_STATUS and api_error_type(answer.content) not in _ANSWERED:
                last = f"HTTP {answer.status_code} {answer.reason_phrase}{api_error_suffix(answer.content)}"
                asked = retry_after_seconds(answer.retry_after, time.time())
                if asked is not None and began is not None and asked >= self._budget(began):
                    tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
                    raise self._fail(SourceUnreachableError,
                                     f"cannot reach {url}: {last}, with {said_retry_after(answer.retry_after, asked)}, "
                                     f"past the {self._budget_name(began)}; not retried ({tries})")
                continue
            return self._decode(url, answer, path)
        overall = deadline_left()
        if overall is not None and overall[0] <= 0:
            raise self._fail(SourceUnreachableError, f"cannot reach {url}: the --deadline of {overall[1]:g}s for "
                                                     f"all requests ran out ({last or 'waiting for a slot'})")
        tries = f"after {attempts} attempt{'s' if attempts != 1 else ''}"
        raise self._fail(SourceUnreachableError, f"cannot reach {url}: {last or 'no time left'} ({tries})")

    def _budget(self, began: float) -> float:
        left = self.timeout_seconds - (time.monotonic() - began)
        overall = deadline_left()
        return min(left, overall[0]) if overall is not None else left

    def _budget_name(self, began: float) -> str:
        """Which deadline binds now, and what is left of it, for an error message."""
        left = self.timeout_seconds - (time.monotonic() - began)
        overall = deadline_left()
        if overall is not None and overall[0] < left:
            return f"{max(0.0, overall[0]):.1f}s left of the --deadline of {overall[1]:g}s"
        return f"{max(0.0, left):.1f}s left of the --timeout of {self.timeout_seconds:g}s for the whole request"

    def _request(self, target: str | httpx.URL, params: Mapping[str, Any] | None, post: bool) -> httpx.Request:
        if post:
            return self._client.build_request("POST", target, data=dict(params or {}))
        return self._client.build_request("GET", target, params=params)

    async def _send(self, path: str, params: Mapping[str, Any] | None, post: bool, url: str) -> _Answer:
        request = self._request(path, params, post)
        base = httpx.URL(self.base_url)
        redirected = ""
        for hop in itertools.count(1):
            resp = await self._client.send(request, stream=True)
            try:
                target = next_hop(base, request.url, resp.status_code, resp.reason_phrase,
                                  resp.headers.get("Location"), hop)
                if target is None:
                    body = await read_capped(resp.aiter_bytes(), self.max_body_bytes, f"{url}: the answer",
                                             MAX_BODY_ENV)
                    return _Answer(resp.status_code, resp.reason_phrase, body, resp.headers.get("Retry-After"),
                                   redirected)
            except RedirectRefused as refused:
                raise self._fail(SourceUnreachableError,
                                 f"{url}: {refused}; give the URL the API answers at as --prometheus") from None
            finally:
                await resp.aclose()
            redirected = display_url(str(target))
            request = self._request(target, params, post)
        raise AssertionError("unreachable")  # itertools.count never ends; the loop returns or raises

    def _decode(self, url: str, resp: _Answer, path: str) -> tuple[Any, list[str]]:
        code = resp.status_code
        if code in (401, 403):
            raise self._fail(
                SourceUnreachableError,
                f"{url}: HTTP {code} {resp.reason_phrase}: the server refused the credentials "
                f"({self.auth.describe()})",
            )
        if code == 404:
            raise self._fail(
                SourceUnreachableError,
                f"{url}: HTTP 404: no Prometheus HTTP API here; check the base URL "
                "(e.g. http://HOST:9090, plus any path prefix)",
            )
        if resp.redirected:
            url = f"{url} (redirected to {resp.redirected})"
        if 300 <= code < 400:
            raise self._fail(SourceUnreachableError, f"{url}: HTTP {code} {resp.reason_phrase}: a redirect "
                             "without a Location to follow; give the URL the API answers at as --prometheus")
        try:
            body = json.loads(resp.content)
        except RecursionError:
            raise self._fail(DataError, f"{url}: HTTP {code}: the answer's JSON is nested too deep to read") from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer past the digits limit
            raise self._fail(
                DataError,
                f"{url}: HTTP {code}: the answer is not valid JSON ({len(resp.content)} bytes, "
                f"truncated?): {exc}",
            ) from None
        if not isinstance(body, dict) or "status" not in body:
            raise self._fail(DataError, f"{url}: HTTP {code}: not a Prometheus API answer (no 'status')")
        if body["status"] != "success":
            kind = str(body.get("errorType", "error"))
            msg = f"{url}: the server refused the request ({kind}): {body.get('error', '')}"
            raise self._fail(UsageError if kind == "bad_data" else DataError, msg)
        if code >= 300:
            raise self._fail(DataError, f"{url}: HTTP {code} {resp.reason_phrase}")
        check_data(url, path.split("?", 1)[0], body.get("data"))
        warnings = [f"{url}: {w}" for w in notes(body, "warnings", url)]
        if body.get("isPartial"):  # VictoriaMetrics cluster: a storage node did not answer
            warnings.append(f"{url}: partial response (isPartial: a storage node did not answer)")
        warnings += [f"{url}: info: {w}" for w in notes(body, "infos", url)]
        return body.get("data"), [self._scrub(w) for w in warnings]


@dataclass(frozen=True)
class _Answer:
    """One HTTP answer read whole (within the body cap)."""

    status_code: int
    reason_phrase: str
    content: bytes
    retry_after: str | None = None
    redirected: str = ""  # where a same-origin redirect led (display URL), '' if none
