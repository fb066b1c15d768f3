"""The server's and the services' log lines: structlog, one canonical line per event with its
context (docs/engineering.md#logging). ``configure_logging`` sets the output when a service
starts; the SDK's standard ``logging`` lines share it. A line written inside a span carries the
span's ``trace_id`` and ``span_id`` (docs/tracing.md#logs)."""

from __future__ import annotations

import structlog

from layby.logsetup import configure_logging as _configure
from layby_server.observability.tracing import log_ids

__all__ = ["configure_logging", "get_logger"]


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    """The services' output (``layby.logsetup.configure_logging``), with trace ids."""
    _configure(fmt, level, extra=(log_ids,))


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A named structlog logger. Until a service configures its output (an in-process test, a
    script that imports a module), lines go to standard error, readable, at info."""
    if not structlog.is_configured():
        configure_logging("console", "info")
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
