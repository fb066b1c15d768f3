"""Sample events for tests: the fields a test does not care about filled in once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from layby_contracts.events import InteractionAsked


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
