"""The server's and the services' log lines: structlog, one canonical line per event with its
context (docs/engineering.md#logging). ``configure_logging`` (``layby.logsetup``) sets the output
when a service starts; the SDK's standard ``logging`` lines share it."""

from __future__ import annotations

import structlog

from layby.logsetup import configure_logging

__all__ = ["configure_logging", "get_logger"]


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A named structlog logger. Until a service configures its output (an in-process test, a
    script that imports a module), lines go to standard error, readable, at info."""
    if not structlog.is_configured():
        configure_logging("console", "info")
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
