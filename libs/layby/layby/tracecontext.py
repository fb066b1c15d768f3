"""The asker's trace context on the commands the SDK sends (docs/tracing.md#from-the-asker).

The SDK makes no spans of its own and needs no OpenTelemetry package. When the application has
``opentelemetry-api`` installed and a span is current as it asks, the command carries that
span's context in its headers (W3C ``traceparent``/``tracestate``, through the application's
configured propagator), and the ask service's span — with everything after it: the answer, the
wake, the resume — joins the application's trace. Without the package, or without a current
span, commands go out exactly as before: no headers.

A worker executes a continuation inside the context the resume service published it under, so
the commands of that execution (its next ask, its park, its end) continue the same trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

try:
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace

    _AVAILABLE = True
except ImportError:  # the SDK stays light: OpenTelemetry is the application's choice
    _AVAILABLE = False

__all__ = ["command_headers", "continued"]


def command_headers() -> dict[str, str] | None:
    """The current span's context as NATS headers, or None (no OpenTelemetry, no current span)."""
    if not _AVAILABLE:
        return None
    if not _trace.get_current_span().get_span_context().is_valid:
        return None
    headers: dict[str, str] = {}
    _propagate.inject(headers)
    return headers or None


@contextlib.contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Make the trace context of a received message (a continuation) current for the block; a
    message without one, or without OpenTelemetry installed, changes nothing."""
    if not _AVAILABLE or not headers or "traceparent" not in headers:
        yield
        return
    from opentelemetry import context

    token = context.attach(_propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)
