"""HTTP bodies of the doors. They are not events (docs/engineering.md#http-bodies-are-not-events)."""

from __future__ import annotations


def terminal_frame(interaction_id: str, group_id: str) -> dict[str, str]:
    """``interaction.answered`` / ``interaction.removed`` data: exactly these two keys."""
    return {"interaction_id": interaction_id, "group_id": group_id}
