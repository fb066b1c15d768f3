"""Pruning of abandoned sync questions, shared by the sweeper and the list door
(docs/doors/list.md#pending-questions-only, docs/aggregates/interaction.md#abandoned-sync-questions).

An abandoned question is a pending sync question whose deadline passed and whose waiter is
gone. The Removed append expects the Asked event's sequence, so it loses cleanly to an answer
and concurrent pruners never double-prune.
"""

from __future__ import annotations

from datetime import timedelta

import asyncpg

from layby_domain.clock import Clock
from layby_domain.interaction import Facts, Interaction, decide_remove
from layby_server.observability import tracing
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore
from layby_server.write.resolve import resolve

log = get_logger("layby_server.write.prune")
SWEEP_BATCH = 500


async def prune_abandoned(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, grace_seconds: float, limit: int = SWEEP_BATCH
) -> int:
    """One pass: remove every pending sync question whose deadline + grace has passed."""
    cutoff = clock.now() - timedelta(seconds=grace_seconds)
    rows = await pool.fetch(
        "SELECT interaction_id, group_id, audience, asked_seq, routed_seq FROM interactions "
        "WHERE status = 'pending' AND mode = 'sync' AND asked_seq = last_seq AND timeout_at <= $1 "
        "ORDER BY timeout_at LIMIT $2",
        cutoff,
        limit,
    )
    pruned = 0
    for row in rows:
        facts = Facts(
            interaction_id=row["interaction_id"], group_id=row["group_id"], audience=row["audience"]
        )
        # A trace of its own (the sweeper read the row, not the question's event), which the
        # removal's readers continue.
        with tracing.span("sweeper remove abandoned", parent={}, attributes=_attributes(facts)):
            resolved = await resolve(
                store,
                facts.interaction_id,
                lambda s: decide_remove(s, reason="abandoned", now=clock.now()),
                # A routed question's state is on the log (its steps follow the asked event).
                seed=None if row["routed_seq"] else Interaction.pending(facts, row["asked_seq"]),
                retry=False,  # answered or pruned meanwhile: the log decided
            )
        pruned += resolved.appended is not None
    if pruned:
        log.info("prune.abandoned", count=pruned)
    return pruned


def _attributes(facts: Facts) -> dict[str, str]:
    return {"layby.interaction_id": facts.interaction_id} if tracing.enabled() else {}
