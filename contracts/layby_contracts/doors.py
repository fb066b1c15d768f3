"""Doors that drive parkable runs, parked entries and visits (docs/caller-asks.md).

A *door* is a saved definition bound to a subject and a target flow: a **hook** (an HTTP
``POST /api/hooks/{name}``), a **schedule** (fired by the sweeper) or a **conversation** route
(messages posted to a conversation subject, or arriving on a chat channel). Each carries up to
four jq programs, the *door contract*, run over the door's input document with the subject's
parked entries bound as ``$parked``. One *visit* of a door runs the contract and acts: cancels
first, then at most one of resume / take / start.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

DoorKind = Literal["hook", "schedule", "conversation"]
EntryStatus = Literal["asking", "running", "finished", "failed"]
Column = Literal["cancel", "resume", "start", "extras"]
COLUMNS: tuple[Column, ...] = ("cancel", "resume", "start", "extras")
"""The contract's programs in the order a visit runs them: cancels first."""


class DoorSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A door definition as saved (``PUT /api/doors/{name}``, ``layby doors put``)."""

    kind: DoorKind
    target: str
    """The registered flow a start runs."""
    subject: str | None = None
    """The subject a hook or a schedule drives (default ``door:<name>``); a conversation's subject
    is the conversation's own."""
    kwargs: dict[str, Any] | None = None
    """What a start runs on when the door has no ``start_expr`` (default ``{}``)."""
    cancel_expr: str | None = None
    resume_expr: str | None = None
    start_expr: str | None = None
    extras_expr: str | None = None
    verifier: dict[str, Any] | None = None
    """Hooks: verify an outside sender with one of the webhook verifiers instead of a bearer token."""
    every_seconds: float | None = None
    """Schedules: fire every this many seconds (at least 1) ..."""
    cron: str | None = None
    """... or on a five-field cron expression (UTC)."""
    input: Any = None
    """Schedules: the input document every fire runs its contract over (default ``{}``)."""
    channel: str | None = None
    """Conversations: take the chat messages of this channel that answer no question."""
    subjects: str | None = None
    """Conversations: a glob of the subjects this route serves (default ``*``)."""


class Door(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    name: str
    spec: DoorSpec
    updated_by: str
    updated_at: str


class Entry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One parked entry on a subject, exactly as ``$parked`` and ``list_parked()`` show it: the
    optional fields are absent, never null."""

    id: str
    status: EntryStatus
    to: Literal["caller"] | None = None
    asked_by: list[str] | None = None
    question: str | None = None
    answer_format: str | None = None
    group_id: str | None = None
    payload: Any = None
    result: Any = None
    error: str | None = None


class Outcome(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The next outcome of what a visit resumed or started: a result, a failure, or a park (with
    the caller asks it parked on)."""

    status: Literal["finished", "failed", "parked"]
    run_id: str | None = None
    result: Any = None
    error: str | None = None
    asks: list[Entry] | None = None


class Taken(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    status: Literal["finished", "failed"]
    result: Any = None
    error: str | None = None


class VisitResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What one visit did: what it cancelled, then its one action, and (when the visitor waited
    for it) the next outcome."""

    visit_id: str
    door: str | None = None
    subject: str
    cancelled: list[str] = []
    action: Literal["resume", "take", "start", "none"] = "none"
    resumed: list[str] = []
    taken: list[Taken] = []
    run_id: str | None = None
    """The run a start started."""
    outcome: Outcome | None = None
    error: str | None = None
    """Why the visit was refused (it did nothing)."""
