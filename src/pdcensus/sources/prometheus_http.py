"""The HTTP side of the Prometheus source: auth, TLS, retries and the API's JSON envelope.

Anything that speaks Prometheus's HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics)
answers ``{"status": "success"|"error", "data": ..., "warnings": [...]}``. This module
turns that envelope into data plus warnings, and every failure into one of our errors:

::

    timeout / connection error / 5xx / 429  -> retried with exponential backoff, then
                                               SourceUnreachableError (exit 4)
    401 / 403 / 404                         -> SourceUnreachableError (exit 4), not retried
    400 / 422 with errorType bad_data       -> UsageError (exit 2): the query was refused
    other API error, invalid/truncated JSON -> DataError (exit 3)

Secrets: a bearer token or a basic-auth password is read from an environment variable or
a file named by :class:`AuthConfig`, never taken as a literal. The resolved value lives
only in the request headers of the client; error messages carry the URL without userinfo
or query string and are scrubbed of the secret before they are raised.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pdcensus.errors import CensusError, DataError, SourceUnreachableError, UsageError

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


def display_url(url: str) -> str:
    """The URL without userinfo and query string: safe to print."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


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
        """One API call with retries; returns ``(data, warnings)`` or raises our error."""
        url = display_url(self.base_url + path)
        last = ""
        for attempt in range(self.retry.attempts):
            if attempt:
                await asyncio.sleep(self.retry.delay_seconds(attempt - 1))
            try:
                async with self._semaphore:
                    self.requests_made += 1
                    if post:
                        resp = await self._client.post(path, data=dict(params or {}))
                    else:
                        resp = await self._client.get(path, params=params)
            except httpx.TimeoutException:
                last = f"no answer within {self.timeout_seconds:g}s"
                continue
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                continue
            if resp.status_code in _RETRY_STATUS and _api_error_type(resp) not in _ANSWERED:
                last = f"HTTP {resp.status_code} {resp.reason_phrase}{_api_error_suffix(resp)}"
                continue
            return self._decode(url, resp)
        raise self._fail(
            SourceUnreachableError, f"cannot reach {url}: {last} (after {self.retry.attempts} attempts)"
        )

    def _decode(self, url: str, resp: httpx.Response) -> tuple[Any, list[str]]:
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
        try:
            body = json.loads(resp.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
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
        warnings = [f"{url}: {w}" for w in body.get("warnings") or []]
        if body.get("isPartial"):  # VictoriaMetrics cluster: a storage node did not answer
            warnings.append(f"{url}: partial response (isPartial: a storage node did not answer)")
        warnings += [f"{url}: info: {w}" for w in body.get("infos") or []]
        return body.get("data"), [self._scrub(w) for w in warnings]


def _api_error_type(resp: httpx.Response) -> str:
    try:
        body = json.loads(resp.content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    return str(body.get("errorType", "")) if isinstance(body, dict) and body.get("status") == "error" else ""


def _api_error_suffix(resp: httpx.Response) -> str:
    try:
        body = json.loads(resp.content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""
    if isinstance(body, dict) and body.get("error"):
        return f": {str(body['error'])[:200]}"
    return ""
