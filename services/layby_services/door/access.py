"""Every door request: its request id, its latency histogram and its access-log line
(docs/observability.md#request-ids, docs/observability.md#the-access-log).

Plain ASGI around the whole application, so requests no route matched (404, 405) and requests a
middleware refused (429) are measured and logged too.

- **Request id.** An inbound ``X-Request-Id`` is kept when it is 1 to 128 characters of
  ``[A-Za-z0-9._-]``; anything else is replaced by a fresh one, so a log line never carries what a
  client wrote unchecked. The id is returned in the response's ``X-Request-Id`` and bound into
  structlog's context for every line logged while the request runs.
- **Route template, never the path.** Callback tickets are bearer secrets inside paths, and ids
  would make a series per question: the histogram and the log name the route's template
  (``/api/interactions/callback/{ticket:str}``), or ``unmatched``. The query string is never read.
- **One line per request** (``http.request``): method, route, status, duration in ms, the request
  id and, once a door authenticated it, the caller's identity name. ``LAYBY_ACCESS_LOG=off``
  drops the line; the histogram stays.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from time import perf_counter

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from layby_server.observability.logs import get_logger
from layby_server.observability.metrics import ServiceMetrics

__all__ = ["IDENTITY_KEY", "REQUEST_ID_HEADER", "AccessMiddleware", "request_id_of"]

log = get_logger("layby.door.access")
REQUEST_ID_HEADER = b"x-request-id"
IDENTITY_KEY = "layby.identity"
"""Where a door leaves the authenticated caller's identity name in the request's scope state."""
UNMATCHED = "unmatched"
_SAFE_ID = re.compile(rb"[A-Za-z0-9._-]{1,128}")


def request_id_of(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The request's own id when it is short and safe, else a fresh one (16 hex characters)."""
    for name, value in headers:
        if name == REQUEST_ID_HEADER:
            if _SAFE_ID.fullmatch(value):
                return value
            break
    return os.urandom(8).hex().encode("ascii")


class AccessMiddleware:
    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, *, access_log: bool = True) -> None:
        self._app = app
        self._metrics = metrics
        self._log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self._app(scope, receive, send)
            return
        rid = request_id_of(scope["headers"])
        status = 500  # what the client gets when the application fails before it answers

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (REQUEST_ID_HEADER, rid)]
            await send(message)

        request_id = rid.decode("ascii")
        tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        start = perf_counter()
        try:
            await self._app(scope, receive, send_with_id)
        finally:
            took = perf_counter() - start
            route: str = scope.get("path_template") or UNMATCHED
            method = scope["method"]
            self._metrics.http_request(route, method, status).observe(took)
            if self._log:
                identity = scope.get("state", {}).get(IDENTITY_KEY)
                log.info(
                    "http.request",
                    method=method,
                    route=route,
                    status=status,
                    duration_ms=round(took * 1000, 2),
                    **({"identity": identity} if identity else {}),
                )
            structlog.contextvars.reset_contextvars(**tokens)
