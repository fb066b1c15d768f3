"""The messages door's frames (docs/doors/messages.md): inbound chat messages that answered
nothing. A key that does not apply is absent, never null."""

from __future__ import annotations

from typing import Any

from msgspec import UNSET, UnsetType

from layby_contracts.events import MessageFields


class InboundMessage(MessageFields, frozen=True, kw_only=True, omit_defaults=True):
    """One message a person wrote on a chat channel that answered no question: ``late`` (its
    question was already answered, expired or removed), ``mismatch`` (refused by a question that
    bridges mismatches), ``unmatched`` (about no question we know)."""

    text: str | UnsetType = UNSET
    value: Any = UNSET
    sender_name: str | UnsetType = UNSET
    interaction_id: str | UnsetType = UNSET
    notification_id: str | UnsetType = UNSET
    params: dict[str, Any] | UnsetType = UNSET
