"""A question's history (docs/doors/history.md): the events on its subject and the attempts of its
webhook, as the entries an operator reads, oldest first. Pure: the door reads, this arranges."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from layby_contracts.events import (
    Event,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionRouted,
)
from layby_contracts.http.history import HistoryEntry
from layby_contracts.webhooks import WebhookAttempt
from layby_domain.formats import known_format
from layby_domain.interaction import channels_of


def history_of(
    events: Iterable[tuple[int, Event]], attempts: Iterable[WebhookAttempt] = ()
) -> list[HistoryEntry]:
    """The entries of a question: each event (with its log sequence) that says what happened to
    it, then its webhook attempts, in time order. A sensitive answer's value never appears."""
    entries: list[HistoryEntry] = []
    asked_format: str | None = None
    for seq, event in events:
        if isinstance(event, InteractionAsked):
            asked_format = event.answer_format
        entry = entry_of(seq, event, asked_format)
        if entry is not None:
            entries.append(entry)
    entries += [
        HistoryEntry(
            kind="webhook_attempt",
            at=a.at,
            attempt=a.attempt,
            result=a.result,
            status=a.status,
            detail=a.error,
        )
        for a in attempts
    ]
    return sorted(entries, key=lambda e: e.at)


def entry_of(seq: int, event: Event, asked_format: str | None) -> HistoryEntry | None:
    """The entry of one event of a question (``asked_format``: its format, which says how an
    answer reads); None for an event that is no step of a question's history."""
    match event:
        case InteractionAsked():
            return HistoryEntry(
                kind="asked",
                at=event.created_at,
                seq=seq,
                by=event.asked_by,
                channels=channels_of(event),
                audience=event.audience,
                answer_format=event.answer_format,
            )
        case InteractionAnswered():
            return _answered(seq, event, asked_format)
        case InteractionRemoved():
            return HistoryEntry(
                kind="removed", at=event.removed_at, seq=seq, reason=event.reason, detail=event.detail
            )
        case InteractionRouted():
            return _routed(seq, event, asked_format)
    return None


def _routed(seq: int, event: InteractionRouted, answer_format: str | None) -> HistoryEntry:
    """A routing step (docs/routing.md): the vote it records, whom an escalation offered the
    question to, a reminder's channels, a delegation's delegate and note."""
    progress = event.progress
    channels = [t.channel for t in event.targets] if event.targets else None
    if event.step == "voted" and progress.votes:
        vote = progress.votes[-1]
        return HistoryEntry(
            kind="voted", at=event.at, seq=seq, by=vote.by, via=vote.via, **_shown(vote.answer, answer_format)
        )
    if event.step == "delegated" and progress.delegations:
        handed = progress.delegations[-1]
        return HistoryEntry(
            kind="delegated", at=event.at, seq=seq, by=handed.by, to=[handed.to], detail=handed.note
        )
    if event.step == "escalated":
        return HistoryEntry(
            kind="escalated",
            at=event.at,
            seq=seq,
            by=event.by,
            to=event.to,
            channels=channels,
        )
    return HistoryEntry(kind="reminded", at=event.at, seq=seq, by=event.by, channels=channels)


def _shown(answer: Any, answer_format: str | None) -> dict[str, Any]:
    """An answer as an entry shows it: the value, and a review's decision beside it."""
    shown: dict[str, Any] = {"answer": answer}
    fmt = known_format(answer_format)
    if fmt is not None and fmt.reviews_an_action and isinstance(answer, dict):
        shown["decision"] = answer.get("decision")
        shown["arguments_sha256"] = answer.get("arguments_sha256")
        shown["reason"] = answer.get("reason")
    return shown


def _answered(seq: int, event: InteractionAnswered, answer_format: str | None) -> HistoryEntry:
    shown = {} if event.sensitive else _shown(event.answer, answer_format)
    if event.votes:
        shown["votes"] = len(event.votes)
    return HistoryEntry(
        kind="answered",
        at=event.answered_at,
        seq=seq,
        by=event.answered_by,
        via=event.via,
        channels=event.channels,
        **shown,
    )
