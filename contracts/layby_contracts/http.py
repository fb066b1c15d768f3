"""HTTP bodies of the doors. They are not events (docs/engineering.md#http-bodies-are-not-events)."""

from __future__ import annotations

from typing import Any

import msgspec

from layby_contracts.events import InteractionAsked


def add_frame(ev: InteractionAsked) -> dict[str, Any]:
    """The pending-question item: list item and SSE ``interaction.add`` data (docs/doors/stream.md#frames,
    docs/doors/list.md#the-item).

    Optional keys are absent when unset, never null; ``verifier`` never leaves the server and
    there is never a ticket.
    """
    payload = ev.format_payload
    if payload is not None and "verifier" in payload:
        payload = {k: v for k, v in payload.items() if k != "verifier"}
    item: dict[str, Any] = {
        "interaction_id": ev.interaction_id,
        "group_id": ev.group_id,
        "question": ev.question,
        "answer_format": ev.answer_format,
        "format_payload": payload,
        "created_at": ev.created_at.isoformat(),
        "timeout_at": ev.timeout_at.isoformat(),
        "sensitive": ev.sensitive,
    }
    if ev.format_payload and "verifier" in ev.format_payload:
        item["server_verified"] = True
    for key in ("channel", "recipient", "origin", "audience"):
        value = getattr(ev, key)
        if value is not None:
            item[key] = value
    if ev.media:
        item["media"] = [msgspec.to_builtins(m) for m in ev.media]
    return item


def terminal_frame(interaction_id: str, group_id: str) -> dict[str, str]:
    """``interaction.answered`` / ``interaction.removed`` data: exactly these two keys."""
    return {"interaction_id": interaction_id, "group_id": group_id}
