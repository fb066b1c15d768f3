"""structlog set-up: JSON in production, console for humans; context bound once."""

from __future__ import annotations

import logging
import sys

import structlog


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written (a test, or an embedding application,
    may replace it after logging was configured)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(fmt: str = "json", level: str = "info") -> None:
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=False)
        if fmt == "console"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[*processors, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A named logger. An application that has not configured structlog gets Layby's lines on
    standard error, readable, at info: a library never writes to an application's standard output."""
    if not structlog.is_configured():
        configure_logging("console", "info")
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(name)
    return logger
