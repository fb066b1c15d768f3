"""The pending-question item a client sees: the list door's item and the SSE ``interaction.add``
data (docs/doors/list.md#the-item, docs/doors/stream.md#frames)."""

from __future__ import annotations

from typing import Any

import msgspec

from layby_contracts.events import InteractionAsked
from layby_domain.formats import FORMATS


def add_frame(ev: InteractionAsked) -> dict[str, Any]:
    """Optional keys are absent when unset, never null; what a format shows of itself is the
    format's own (an external question's verifier never leaves the server), and there is never
    a ticket."""
    fmt = FORMATS.get(ev.answer_format)
    shown = fmt.frame(ev.format_payload) if fmt is not None else {"format_payload": ev.format_payload}
    item: dict[str, Any] = {
        "interaction_id": ev.interaction_id,
        "group_id": ev.group_id,
        "question": ev.question,
        "answer_format": ev.answer_format,
        "format_payload": shown["format_payload"],
        "created_at": ev.created_at.isoformat(),
        "timeout_at": ev.timeout_at.isoformat(),
        "sensitive": ev.sensitive,
    }
    if shown.get("server_verified"):
        item["server_verified"] = True
    for key in ("channel", "recipient", "origin", "audience"):
        value = getattr(ev, key)
        if value is not None:
            item[key] = value
    if ev.media:
        item["media"] = [msgspec.to_builtins(m) for m in ev.media]
    if ev.routing is not None:
        # Who decides it (docs/routing.md); its escalation and reminders are the server's business.
        deciders: dict[str, Any] = {"required": ev.routing.required, "veto": ev.routing.veto}
        if ev.routing.voters:
            deciders["voters"] = list(ev.routing.voters)
        item["routing"] = deciders
    return item
