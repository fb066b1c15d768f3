"""Expiry of async parks at their deadline (inventory A7.75-79, A23.205).

When ``expiry_at`` passes with no answer, the park resolves with the reserved expiry marker,
answered by ``system:expiry``, through the same log-decided race as a human answer: the append
expects the Asked event's sequence, so an answer and an expiry arriving together yield exactly
one resolution, and after the expiry wins the answer door gives 409. Until the sweeper's append
lands the park stays answerable, and a real answer then wins.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from contracts.events import EXPIRY_ANSWER, EXPIRY_ANSWERER, InteractionAnswered
from layby.clock import Clock
from layby.errors import Conflict
from layby.eventstore import EventStore
from layby.logs import get_logger

log = get_logger("layby.sweeper")
EXPIRY_BATCH = 1000
EXPIRY_PARALLEL = 64


async def expire_due(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, limit: int = EXPIRY_BATCH
) -> int:
    """One pass: resolve every pending async park whose ``expiry_at`` has passed."""
    now = clock.now()
    rows = await pool.fetch(
        "SELECT interaction_id, group_id, audience, asked_seq, run_id FROM interactions "
        "WHERE status = 'pending' AND mode = 'async' AND asked_seq = last_seq AND timeout_at <= $1 "
        "ORDER BY timeout_at LIMIT $2",
        now,
        limit,
    )
    if not rows:
        return 0
    slots = asyncio.Semaphore(EXPIRY_PARALLEL)

    async def expire(row: asyncpg.Record) -> bool:
        event = InteractionAnswered(
            interaction_id=row["interaction_id"],
            group_id=row["group_id"],
            audience=row["audience"],
            answered_by=EXPIRY_ANSWERER,
            answered_at=clock.now(),
            answer=EXPIRY_ANSWER,
            run_id=row["run_id"],
        )
        async with slots:
            try:
                await store.append(
                    store.names.ix(event.interaction_id),
                    event,
                    msg_id=f"expired-{event.interaction_id}-{uuid.uuid4().hex}",
                    expected_seq=row["asked_seq"],
                )
            except Conflict:
                return False  # answered (or expired by a sibling replica) first: the log decided
        return True

    done = await asyncio.gather(*(expire(row) for row in rows))
    count = sum(done)
    if count:
        log.info("sweeper.expired", count=count)
    return count
