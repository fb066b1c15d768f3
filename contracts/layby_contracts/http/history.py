"""The history door's body (docs/doors/history.md): what ``GET
/api/interactions/{interaction_id}/history`` answers — every recorded step of one question, oldest
first: asked, each routing step (a vote, an escalation, a reminder, a delegation), answered (by
whom, where, the decision), removed, and each delivery attempt of its webhook."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from msgspec import UNSET, Struct, UnsetType

HistoryKind = Literal[
    "asked", "voted", "escalated", "reminded", "delegated", "answered", "removed", "webhook_attempt"
]


class HistoryEntry(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One step: ``kind``, when (``at``), who (``by``) and where (``via``, ``channels``). ``seq`` is
    the event's sequence in the event log (absent for a webhook attempt, kept on its own stream).
    An answer's value is shown unless the question is sensitive; a review's answer is its
    ``decision`` (with ``arguments_sha256`` and ``reason``) as well."""

    kind: HistoryKind
    at: datetime
    seq: int | None = None
    by: str | None = None
    via: str | None = None
    channels: list[str] | None = None
    audience: str | None = None
    answer_format: str | None = None
    answer: Any | UnsetType = UNSET
    decision: str | None = None
    arguments_sha256: str | None = None
    reason: str | None = None
    detail: str | None = None
    result: str | None = None
    status: int | None = None
    attempt: int | None = None
    to: list[str] | None = None
    """escalated: who it was offered to; delegated: who it was handed to (docs/routing.md)."""
    votes: int | None = None
    """answered on a routed question: how many votes it took (each is a ``voted`` entry, the
    deciding one is this)."""


class HistoryBlock(Struct, frozen=True, kw_only=True):
    interaction_id: str
    entries: list[HistoryEntry]


class HistoryView(Struct, frozen=True, kw_only=True):
    data: HistoryBlock


class HistoryLine(HistoryEntry, frozen=True, kw_only=True, omit_defaults=True):
    """One line of the history export (``GET /api/history``): an entry and its question."""

    interaction_id: str
