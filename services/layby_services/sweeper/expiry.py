"""Expiry of async parks at their deadline (docs/aggregates/interaction.md#expiry-of-async-parks).

When ``expiry_at`` passes with no answer, the park resolves with the reserved expiry marker,
answered by ``system:expiry``, through the same log-decided race as a human answer: the append
expects the Asked event's sequence, so an answer and an expiry arriving together yield exactly
one resolution, and after the expiry wins the answer door gives 409. Until the sweeper's append
lands the park stays answerable, and a real answer then wins.
"""

from __future__ import annotations

import asyncio

import asyncpg

from layby_domain.clock import Clock
from layby_domain.interaction import Facts, Interaction, decide_expire
from layby_server.observability import tracing
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore
from layby_server.write.resolve import resolve

log = get_logger("layby.sweeper")
EXPIRY_BATCH = 1000
EXPIRY_PARALLEL = 64


async def expire_due(
    pool: asyncpg.Pool, store: EventStore, clock: Clock, *, limit: int = EXPIRY_BATCH
) -> int:
    """One pass: resolve every pending async park whose ``expiry_at`` has passed."""
    now = clock.now()
    rows = await pool.fetch(
        "SELECT interaction_id, group_id, audience, asked_seq, run_id, routed_seq FROM interactions "
        "WHERE status = 'pending' AND mode = 'async' AND asked_seq = last_seq AND timeout_at <= $1 "
        "ORDER BY timeout_at LIMIT $2",
        now,
        limit,
    )
    if not rows:
        return 0
    slots = asyncio.Semaphore(EXPIRY_PARALLEL)

    async def expire(row: asyncpg.Record) -> bool:
        facts = Facts(
            interaction_id=row["interaction_id"],
            group_id=row["group_id"],
            audience=row["audience"],
            run_id=row["run_id"],
        )
        # A trace of its own (the sweeper read the row, not the question's event): the resume
        # of the park it expires continues it (docs/tracing.md#the-spans).
        async with slots:
            with tracing.span("sweeper expire", parent={}, attributes=_attributes(facts)):
                resolved = await resolve(
                    store,
                    facts.interaction_id,
                    lambda s: decide_expire(s, now=clock.now()),
                    # A routed question's state is on the log (its steps follow the asked event).
                    seed=None if row["routed_seq"] else Interaction.pending(facts, row["asked_seq"]),
                    retry=False,  # answered (or expired by a sibling replica) first: the log decided
                )
        return resolved.appended is not None

    done = await asyncio.gather(*(expire(row) for row in rows))
    count = sum(done)
    if count:
        log.info("sweeper.expired", count=count)
    return count


def _attributes(facts: Facts) -> dict[str, str]:
    if not tracing.enabled():
        return {}
    out = {"layby.interaction_id": facts.interaction_id}
    if facts.run_id:
        out["layby.run_id"] = facts.run_id
    return out
