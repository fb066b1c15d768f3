"""Pruning of abandoned sync questions, shared by the sweeper and the list door (inventory A14.127, A23.208).

An abandoned question is a pending sync question whose deadline passed and whose waiter is
gone. The Removed append expects the Asked event's sequence, so it loses cleanly to an answer
and concurrent pruners never double-prune.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg

from contracts.events import InteractionRemoved
from layby.clock import Clock
from layby.errors import Conflict
from layby.eventstore import EventStore
from layby.logs import get_logger

log = get_logger("layby.prune")
SWEEP_BATCH = 500


async def prune_abandoned(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, grace_seconds: float, limit: int = SWEEP_BATCH
) -> int:
    """One pass: remove every pending sync question whose deadline + grace has passed."""
    cutoff = clock.now() - timedelta(seconds=grace_seconds)
    rows = await pool.fetch(
        "SELECT interaction_id, group_id, audience, asked_seq FROM interactions "
        "WHERE status = 'pending' AND mode = 'sync' AND asked_seq = last_seq AND timeout_at <= $1 "
        "ORDER BY timeout_at LIMIT $2",
        cutoff,
        limit,
    )
    pruned = 0
    for row in rows:
        event = InteractionRemoved(
            interaction_id=row["interaction_id"],
            group_id=row["group_id"],
            audience=row["audience"],
            reason="abandoned",
            removed_at=clock.now(),
        )
        try:
            await store.append(
                store.names.ix(event.interaction_id),
                event,
                msg_id=f"removed-{event.interaction_id}-{uuid.uuid4().hex}",
                expected_seq=row["asked_seq"],
            )
            pruned += 1
        except Conflict:
            continue  # answered or pruned meanwhile: the log decided
    if pruned:
        log.info("prune.abandoned", count=pruned)
    return pruned
