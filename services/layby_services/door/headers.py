"""Header limits at the doors (docs/doors/common.md#header-limits).

A request with more than ``LAYBY_HTTP_MAX_HEADERS`` header fields, or whose header names and
values add up to more than ``LAYBY_HTTP_MAX_HEADER_BYTES``, gets 431 before any door reads it:
no door needs more, and a client sending thousands of headers is probing, not asking.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

_BODY = b'{"error":"request header fields too large"}'


class HeaderLimitMiddleware:
    def __init__(self, app: ASGIApp, max_headers: int, max_bytes: int) -> None:
        self._app = app
        self._max_headers = max_headers
        self._max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            count = size = 0
            for name, value in scope["headers"]:
                count += 1
                size += len(name) + len(value)
            if count > self._max_headers or size > self._max_bytes:
                start: HTTPResponseStartEvent = {
                    "type": "http.response.start",
                    "status": 431,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(_BODY)).encode()),
                        (b"cache-control", b"no-store"),
                        (b"x-content-type-options", b"nosniff"),
                        (b"connection", b"close"),
                    ],
                }
                body: HTTPResponseBodyEvent = {
                    "type": "http.response.body",
                    "body": _BODY,
                    "more_body": False,
                }
                await send(start)
                await send(body)
                return
        await self._app(scope, receive, send)
