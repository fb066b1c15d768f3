"""The timed part of routing (docs/routing.md#escalation): escalations and reminders when due.

The projection keeps, for every pending routed question, when its next step is due
(``route_at``). Each pass takes the due ones and decides on the log with
``layby_domain.interaction.decide_route``; the append expects the sequence of the state it was
decided on, so two sweeper replicas, or a pass that overlaps the previous one's projection lag,
take each step once: the loser reads again and finds it taken.
"""

from __future__ import annotations

import asyncio

import asyncpg

from layby_domain.clock import Clock
from layby_domain.interaction import decide_route
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore
from layby_server.write.resolve import resolve

log = get_logger("layby.sweeper")
ROUTE_BATCH = 1000
ROUTE_PARALLEL = 64


async def route_due(pool: asyncpg.Pool, store: EventStore, clock: Clock, *, limit: int = ROUTE_BATCH) -> int:
    """One pass: take every due escalation or reminder; returns how many rows were due."""
    rows = await pool.fetch(
        "SELECT interaction_id FROM interactions "
        "WHERE status = 'pending' AND route_at IS NOT NULL AND route_at <= $1 "
        "ORDER BY route_at LIMIT $2",
        clock.now(),
        limit,
    )
    if not rows:
        return 0
    slots = asyncio.Semaphore(ROUTE_PARALLEL)

    async def step(interaction_id: str) -> int:
        taken = 0
        async with slots:
            # Several steps may be due at once (a sweeper that was down): one append each.
            for _ in range(4):
                resolved = await resolve(store, interaction_id, lambda s: decide_route(s, now=clock.now()))
                if resolved.appended is None:
                    break
                taken += 1
        return taken

    taken = sum(await asyncio.gather(*(step(row["interaction_id"]) for row in rows)))
    if taken:
        log.info("sweeper.routed", steps=taken)
    return len(rows)
