"""Header limits at the doors (docs/doors/common.md#header-limits).

A request with more than ``LAYBY_HTTP_MAX_HEADERS`` header fields, or whose header names and
values add up to more than ``LAYBY_HTTP_MAX_HEADER_BYTES``, gets 431 before any door reads it:
no door needs more, and a client sending thousands of headers is probing, not asking.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from layby_services.door.asgi import send_error


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
                await send_error(send, 431, "request header fields too large", (b"connection", b"close"))
                return
        await self._app(scope, receive, send)
