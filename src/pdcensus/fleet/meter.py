"""Count what the fleet costs on the wire: requests made and response bytes received, per stage.

An ``httpx`` transport that wraps the ordinary one; each client gets its own (a client closes
its transport when it closes) and all of them add to one :class:`WireCount`. TLS settings go to
the wrapped transport, since a client given a transport does not apply its own ``verify``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import httpx


@dataclass
class WireCount:
    """Requests and response bytes (the body as received, before decompression)."""

    requests: int = 0
    bytes_received: int = 0


class CountingTransport(httpx.AsyncBaseTransport):
    """The default async transport, counting each response's bytes into ``count``."""

    def __init__(self, count: WireCount, verify: ssl.SSLContext | bool = True) -> None:
        self.count = count
        self._inner = httpx.AsyncHTTPTransport(verify=verify)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        raw = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
        await response.aclose()
        self.count.requests += 1
        self.count.bytes_received += len(raw)
        return httpx.Response(response.status_code, headers=response.headers, content=raw,
                              request=request, extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()
