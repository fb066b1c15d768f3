"""Sample events for tests: the fields a test does not care about filled in once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from layby_contracts.channels import ChannelDelivery
from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionSettled,
    InteractionTaken,
)


def interaction_asked(interaction_id: str, created_at: datetime, **fields: Any) -> InteractionAsked:
    """Question ``interaction_id`` asked at ``created_at``: unless ``fields`` say otherwise, a text
    question "q" in group "g", asked by ops, timing out at once."""
    asked = InteractionAsked(
        interaction_id=interaction_id,
        group_id="g",
        question="q",
        answer_format="text",
        created_at=created_at,
        timeout_at=created_at,
        asked_by="ops",
    )
    return msgspec.structs.replace(asked, **fields)


def caller_ask(interaction_id: str, created_at: datetime, **fields: Any) -> InteractionAsked:
    """A caller ask as the ask service records it (docs/caller-asks.md): unless ``fields`` say
    otherwise, "Which plan?" asked by ops at ``created_at`` as call 0 of a new run, an async park on
    subject orders-42 that times out and expires an hour later."""
    an_hour_later = created_at + timedelta(hours=1)
    defaults: dict[str, Any] = {
        "question": "Which plan?",
        "timeout_at": an_hour_later,
        "expiry_at": an_hour_later,
        "mode": "async",
        "run_id": str(uuid.uuid4()),
        "call": 0,
        "to": "caller",
        "subject": "orders-42",
    }
    return interaction_asked(interaction_id, created_at, **(defaults | fields))


def answered(asked: InteractionAsked, at: datetime, **fields: Any) -> InteractionAnswered:
    """``asked`` answered "gold" at ``at`` by its asker, addressed as the question was (to the caller
    for a caller ask), unless ``fields`` say otherwise."""
    event = InteractionAnswered(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        answered_by=asked.asked_by,
        answered_at=at,
        answer="gold",
        to=asked.to,
    )
    return msgspec.structs.replace(event, **fields)


def settled(asked: InteractionAsked, outcome: Any, at: datetime, **fields: Any) -> InteractionSettled:
    """The run that ``asked`` parked ended with ``outcome`` at ``at``."""
    event = InteractionSettled(
        interaction_id=asked.interaction_id, group_id=asked.group_id, outcome=outcome, settled_at=at
    )
    return msgspec.structs.replace(event, **fields)


def taken(asked: InteractionAsked, at: datetime) -> InteractionTaken:
    """The waiting outcome of ``asked`` taken by its asker at ``at``."""
    return InteractionTaken(
        interaction_id=asked.interaction_id, group_id=asked.group_id, by=asked.asked_by, taken_at=at
    )


def removed(asked: InteractionAsked, reason: Any, at: datetime, **fields: Any) -> InteractionRemoved:
    """``asked`` removed for ``reason`` at ``at``, addressed as the question was."""
    event = InteractionRemoved(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        reason=reason,
        removed_at=at,
        to=asked.to,
    )
    return msgspec.structs.replace(event, **fields)


def channel_delivery(answer_format: str = "text", **fields: Any) -> ChannelDelivery:
    """A question in ``answer_format`` as the delivery service hands it to a chat channel: unless
    ``fields`` say otherwise, "Deploy now?" with a fresh id and a callback ticket, timing out a day
    from now (far enough off for a delivery built when the tests are collected)."""
    base: dict[str, Any] = {
        "interaction_id": str(uuid.uuid4()),
        "question": "Deploy now?",
        "answer_format": answer_format,
        "callback_url": "https://layby.example/api/interactions/callback/tkt",
        "timeout_at": datetime.now(UTC) + timedelta(days=1),
    }
    return ChannelDelivery(**(base | fields))
