"""The log output of the programs Layby runs itself: the ``layby`` command and the services.

structlog, JSON in production or console for humans, on standard error; context bound once. The
SDK's standard ``logging`` lines (the ``layby`` logger, ``layby.logs``) are rendered by the same
renderer, so one program writes one kind of line. Nothing here runs on import: a program calls
``configure_logging`` once when it starts. An application that only uses the SDK never imports
this module (docs/engineering.md#logging).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

import structlog

from layby.logs import ROOT, event_of, promote

_HANDLER_NAME = "layby.output"


class _Stderr:
    """Whatever ``sys.stderr`` is when a line is written (a test may replace it after logging
    was configured)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _Threshold(logging.Filter):
    """The program's level; the events it ``shows`` count as info even when the SDK logs them
    at debug (what ``layby ask`` waits for is its own output, not the SDK's routine)."""

    def __init__(self, level: int, shown: frozenset[str]) -> None:
        super().__init__()
        self.level = level
        self.shown = shown

    def filter(self, record: logging.LogRecord) -> bool:
        levelno = record.levelno
        if event_of(record) in self.shown:
            levelno = max(levelno, logging.INFO)
        return levelno >= self.level


def _sdk_event(shown: frozenset[str]) -> structlog.typing.Processor:
    """An SDK record as a structlog event: its event name, fields and level."""

    def processor(
        _logger: object, _method: str, event_dict: structlog.typing.EventDict
    ) -> structlog.typing.EventDict:
        record: logging.LogRecord = event_dict["_record"]
        event_dict["event"] = event_of(record)
        if event_dict["event"] in shown and record.levelno < logging.INFO:
            event_dict["level"] = "info"
        return event_dict

    return processor


def configure_logging(
    fmt: str = "json",
    level: str = "info",
    *,
    shown: Iterable[str] = (),
    extra: Iterable[structlog.typing.Processor] = (),
) -> None:
    """Write this program's structlog lines and the SDK's lines to standard error, as ``fmt``
    (json or console), from ``level`` up; the SDK events named in ``shown`` count as info.
    ``extra`` processors add fields to every line (the services' trace ids)."""
    threshold: int = getattr(logging, level.upper())
    shown_events = frozenset(shown)
    shared: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        *extra,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=False)
        if fmt == "console"
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(_Stderr())
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(_Threshold(threshold, shown_events))
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, _sdk_event(shown_events), structlog.stdlib.ExtraAdder()],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    sdk = logging.getLogger(ROOT)
    for old in [h for h in sdk.handlers if h.get_name() == _HANDLER_NAME]:
        sdk.removeHandler(old)
    sdk.addHandler(handler)
    # This program decides where Layby's lines go: not also to a root handler that a framework
    # installed (Litestar's), which would print each line twice.
    sdk.propagate = False
    promote(shown_events)  # logged at info: the logger stays at the program's level
    sdk.setLevel(threshold)
