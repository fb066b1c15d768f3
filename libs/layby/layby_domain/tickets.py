"""Callback tickets (docs/aggregates/interaction.md#tickets): 256-bit bearer capabilities, stored only as a
hash."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta

ASYNC_MARGIN_SECONDS = 60.0
"""An async park's ticket outlives its expiry_at by this much
(docs/aggregates/interaction.md#ticket-lifetime: 2 x the reaper interval)."""


def ticket_hash(ticket: str) -> str:
    return hashlib.sha256(ticket.encode()).hexdigest()


def callback_url(public_base_url: str, ticket: str) -> str:
    return f"{public_base_url.rstrip('/')}/api/interactions/callback/{ticket}"


def ticket_expires_at(created_at: datetime, timeout_at: datetime, mode: str) -> datetime:
    """Sync: ceil(timeout_at - created_at), at least 1 s. Async: ceil(expiry_at - created_at) + margin."""
    seconds = max(1, math.ceil((timeout_at - created_at).total_seconds()))
    margin = ASYNC_MARGIN_SECONDS if mode == "async" else 0.0
    return created_at + timedelta(seconds=seconds + margin)
