"""One span per door request, when tracing is on (docs/tracing.md#the-spans).

Named by method and route template (``POST /api/interactions/{interaction_id}/answer``), never
by the path itself, so names stay few. A request that carries a W3C ``traceparent`` continues
that trace; otherwise the span is a new root. Long-lived streams (SSE) and the probes get no
span: a span as long as a connection, or one per probe, says nothing useful.

A route whose handler makes its request's span itself says so with ``opt={OWN_SPAN: True}``:
the answer and callback doors, whose span continues the question's trace instead of starting
one (``layby_server.observability.tracing.joining``), so one answer costs one span.
"""

from __future__ import annotations

from typing import Any

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from layby_server.observability import tracing

_UNTRACED = ("/stream", "/healthz", "/readyz")
OWN_SPAN = "layby_own_span"
"""The ``opt`` key of a route handler that makes its request's span itself."""


class RequestSpans:
    """ASGI middleware: the request's span, with its route, method and response status."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or not tracing.enabled():
            await self._app(scope, receive, send)
            return
        route = str(scope.get("path_template") or "")
        handler = scope.get("route_handler")
        if route.endswith(_UNTRACED) or (handler is not None and handler.opt.get(OWN_SPAN)):
            await self._app(scope, receive, send)
            return
        method = str(scope.get("method", "GET"))
        status = [0]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        attributes: dict[str, Any] = {"http.request.method": method, "http.route": route}
        with tracing.span(
            f"{method} {route}",
            parent=request_trace(scope),
            kind=tracing.SpanKind.SERVER,
            attributes=attributes,
        ) as span:
            await self._app(scope, receive, sending)
            if span is not None and status[0]:
                span.set_attribute("http.response.status_code", status[0])
                if status[0] >= 500:
                    tracing.failed_status(span, f"HTTP {status[0]}")


def request_trace(scope: Scope) -> dict[str, str]:
    """The request's W3C trace headers (an empty carrier: the span is a new root)."""
    carrier: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        if name in (b"traceparent", b"tracestate"):
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    return carrier
