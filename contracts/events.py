"""Events: facts appended to the JetStream log (CONVENTIONS 2, 3).

One frozen Struct per event, an explicit versioned tag, and one union per stream. New fields
get defaults; a change of meaning is a new ``.v2`` tag. Events do not forbid unknown fields.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec


class MediaItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Display-only media on a question (inventory A4, B4)."""

    kind: Literal["image", "document", "video", "audio", "link"]
    url: str
    caption: str | None = None
    filename: str | None = None


class InteractionAsked(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.asked.v1"):
    """A question was validated and recorded by the ask service (inventory B2)."""

    interaction_id: str
    group_id: str
    question: str
    answer_format: str
    format_payload: dict[str, Any] | None = None
    created_at: datetime
    timeout_at: datetime
    sensitive: bool = False
    audience: str | None = None
    asked_by: str
    mode: Literal["sync", "async"] = "sync"
    expiry_at: datetime | None = None
    media: list[MediaItem] | None = None
    channel: str | None = None
    recipient: str | None = None
    origin: str | None = None
    waiter: str | None = None
    """Where a blocked sync asker listens (``<ns>.wake.<waiter>.<id>``); never sent to clients."""


class InteractionAnswered(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.answered.v1"):
    """The first answer won the log-decided race. ``answer`` is absent for sensitive questions."""

    interaction_id: str
    group_id: str
    audience: str | None = None
    answered_by: str
    answered_at: datetime
    sensitive: bool = False
    answer: Any = None
    waiter: str | None = None
    secret_ref: str | None = None
    """For a sensitive question: which ``<ns>.secret.<id>.<ref>`` message holds the answer."""


class InteractionRemoved(msgspec.Struct, frozen=True, kw_only=True, tag="interaction.removed.v1"):
    """A pending question was pruned: sync timeout, cancellation or an abandoned waiter."""

    interaction_id: str
    group_id: str
    audience: str | None = None
    reason: Literal["timeout", "cancelled", "abandoned", "delivery_failed"]
    removed_at: datetime
    waiter: str | None = None


InteractionEvent = InteractionAsked | InteractionAnswered | InteractionRemoved

EVENT_DECODER: msgspec.json.Decoder[InteractionEvent] = msgspec.json.Decoder(InteractionEvent)
ENCODER = msgspec.json.Encoder()


def encode_event(event: InteractionEvent) -> bytes:
    return ENCODER.encode(event)


def decode_event(data: bytes) -> InteractionEvent:
    """Decode one log message; raises ``msgspec.ValidationError``/``DecodeError`` when malformed."""
    return EVENT_DECODER.decode(data)
