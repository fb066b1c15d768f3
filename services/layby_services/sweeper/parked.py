"""The sweeper's passes over parked entries (docs/caller-asks.md#expiry,
docs/caller-asks.md#waiting-outcomes).

- A caller ask still asking at its ``expiry_at`` is resolved by its ``on_expiry``: ``resume``
  answers it with the reserved expiry marker (its run takes its expiry branch), ``kill`` removes
  it (the resume service then tears its whole chain down).
- A waiting outcome nobody took within ``LAYBY_WAITING_OUTCOME_RETENTION`` is dropped by an
  ``interaction.removed`` event with reason ``dropped`` (logged at warning level too): never
  silently.

Both read the due rows from the park-on-subject view and decide each on the entry's log, with
the entry's last sequence expected: a visit that resumes or takes the entry first wins, and
sweeper replicas never act twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta

import asyncpg

from layby_contracts.events import InteractionAnswered, InteractionRemoved
from layby_domain.caller import Parked, decide_deadline, decide_drop
from layby_domain.clock import Clock
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog, as_event, decide_and_append
from layby_server.store.eventlog import Outcome as Decided
from layby_server.write.parked import Entries

log = get_logger("layby.sweeper")
BATCH = 500
PARALLEL = 32

_DUE = """
SELECT interaction_id FROM parked_entries
WHERE status = 'asking' AND expiry_at <= $1 ORDER BY expiry_at LIMIT $2
"""
_WAITING = """
SELECT interaction_id FROM parked_entries
WHERE status IN ('finished', 'failed') AND settled_at <= $1 ORDER BY settled_at LIMIT $2
"""


Decision = InteractionAnswered | InteractionRemoved


async def _each(
    store: EventLog, entries: Entries, ids: list[str], decide: Callable[[Parked], Decision | None]
) -> int:
    slots = asyncio.Semaphore(PARALLEL)

    async def one(ix: str) -> bool:
        async with slots:
            found = await entries.read(ix)
            if found is None:
                return False

            async def read(_leader: bool) -> Parked:
                again = await entries.read(ix)
                return again if again is not None else found

            done: Decided[Parked, Decision] = await decide_and_append(
                store,
                store.names.ix(ix),
                read=read,
                decide=decide,
                event_of=as_event,
                msg_id=lambda e: f"{type(e).__name__}-{ix}-{uuid.uuid4().hex}",
                seed=found,
                retry=False,  # a visit won the race: the log decided; the next pass looks again
            )
        if isinstance(done.event, InteractionRemoved) and done.event.reason == "dropped":
            log.warning("caller.outcome_dropped", interaction_id=ix, detail=done.event.detail)
        return done.event is not None

    return sum(await asyncio.gather(*(one(ix) for ix in ids)))


async def expire_caller_asks(pool: asyncpg.Pool, store: EventLog, entries: Entries, clock: Clock) -> int:
    """One pass over caller asks past their ``expiry_at``."""
    now = clock.now()
    rows = await pool.fetch(_DUE, now, BATCH)
    return await _each(
        store, entries, [r["interaction_id"] for r in rows], lambda p: decide_deadline(p, now=now)
    )


async def drop_waiting_outcomes(
    pool: asyncpg.Pool, store: EventLog, entries: Entries, clock: Clock, retention_seconds: float
) -> int:
    """One pass over waiting outcomes nobody took within the retention horizon."""
    now = clock.now()
    retention = timedelta(seconds=retention_seconds)
    rows = await pool.fetch(_WAITING, now - retention, BATCH)
    return await _each(
        store,
        entries,
        [r["interaction_id"] for r in rows],
        lambda p: decide_drop(p, now=now, retention=retention),
    )
