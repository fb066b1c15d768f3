"""The asker's trace context on the commands the SDK sends (docs/tracing.md#from-the-asker).

The SDK makes no spans of its own and needs no OpenTelemetry package. When the application uses
``opentelemetry-api`` and a span is current as it asks, the command carries that span's context
in its headers (W3C ``traceparent``/``tracestate``, through the application's configured
propagator), and the ask service's span — with everything after it: the answer, the wake, the
resume — joins the application's trace. Without the package, or without a current span,
commands go out exactly as before: no headers.

A worker executes a continuation inside the context the resume service published it under, so
the commands of that execution (its next ask, its park, its end) continue the same trace.

Nothing here imports OpenTelemetry up front: an application that has a current span has
imported ``opentelemetry.trace`` already, so until it has, there is nothing to send and
``import layby`` costs nothing more.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping

__all__ = ["command_headers", "continued"]

TRACEPARENT = "traceparent"


def command_headers() -> dict[str, str] | None:
    """The current span's context as NATS headers, or None (no OpenTelemetry, no current span)."""
    if "opentelemetry.trace" not in sys.modules:
        return None  # nothing has made or attached a span in this process
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return None
    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers or None


@contextlib.contextmanager
def continued(headers: Mapping[str, str] | None) -> Iterator[None]:
    """Make the trace context of a received message (a continuation) current for the block; a
    message without one, or a process without ``opentelemetry-api``, changes nothing."""
    if not headers or TRACEPARENT not in headers:
        yield
        return
    try:
        from opentelemetry import context, propagate
    except ImportError:  # the SDK stays light: OpenTelemetry is the application's choice
        yield
        return
    token = context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        context.detach(token)
