"""The SDK's log lines: standard ``logging`` records under the ``layby`` logger.

The SDK is a library inside someone else's program, so it never configures logging: no handler,
no level, no structlog set-up. The application decides where the lines go (``logging.basicConfig``,
its own handlers, or structlog's standard-library integration). Each line is an event name and
its fields, readable as text (``sdk.waiting interaction_id=... timeout_at=...``) and available to
structured handlers as the record's attributes (``record.interaction_id``). Routine events (one
per ask or per run) are at debug; something an operator must see is a warning or an error
(docs/engineering.md#logging).

The ``layby`` command and the services render these lines with their own structlog output
(``layby.logsetup``).
"""

from __future__ import annotations

import logging

ROOT = "layby"
"""The SDK's top logger: ``layby.sdk``, ``layby.worker`` and ``layby.connection`` sit under it."""

# Attributes every LogRecord has: a field of the same name travels as ``<name>_`` instead.
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class Logger:
    """A ``logging.Logger`` that takes an event name and key=value fields."""

    __slots__ = ("_logger",)

    def __init__(self, name: str) -> None:
        self._logger = logging.getLogger(name)

    @property
    def name(self) -> str:
        return self._logger.name

    def debug(self, event: str, **fields: object) -> None:
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: object) -> None:
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, **fields: object) -> None:
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, **fields: object) -> None:
        self._log(logging.ERROR, event, fields)

    def _log(self, level: int, event: str, fields: dict[str, object]) -> None:
        if level < logging.INFO and event in _promoted:
            level = logging.INFO
        if not self._logger.isEnabledFor(level):
            return
        # The values are the record's arguments, formatted only when a handler writes the line.
        template = event.replace("%", "%%") + "".join(
            f" {key}=%r" if isinstance(value, str) and (not value or " " in value) else f" {key}=%s"
            for key, value in fields.items()
        )
        extra = {f"{key}_" if key in _RESERVED else key: value for key, value in fields.items()}
        self._logger.log(level, template, *fields.values(), extra=extra, stacklevel=3)


_promoted: frozenset[str] = frozenset()
"""The SDK events a program shows as info although the SDK logs them at debug (``promote``)."""


def promote(events: frozenset[str]) -> None:
    """Log ``events`` at info from now on: a program that shows a few of the SDK's routine events
    (``layby ask`` shows ``sdk.waiting``) keeps the SDK's logger at its own level, so every other
    debug line is dropped before a record is made."""
    global _promoted  # noqa: PLW0603 - one program-wide choice, made once at start-up
    _promoted = events


def get_logger(name: str) -> Logger:
    """The logger ``name`` (under ``layby``): nothing is configured by asking for it."""
    return Logger(name)


def event_of(record: logging.LogRecord) -> str:
    """The event name of a record written by a ``Logger`` (its message's first word)."""
    return str(record.msg).partition(" ")[0]
