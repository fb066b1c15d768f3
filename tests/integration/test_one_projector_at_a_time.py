"""One live projector per schema at a time (docs/architecture.md#one-projector-at-a-time): every
door replica runs one, the holder of the schema's advisory lock consumes the log in order, the
others stand by and take over when it stops or loses its connection. Real NATS and PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from layby_server.projection.projector import PROJECTOR_LOCK, run_projector
from layby_server.store.eventstore import EventStore, Stored
from tests.helpers import eventually
from tests.samples import interaction_asked

pytestmark = pytest.mark.integration


class Replica:
    def __init__(self, name: str, db: asyncpg.Pool, store: EventStore) -> None:
        self.name = name
        self.seen: list[int] = []
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(
            run_projector(db, store, self.stop, observe=self.observe, standby=0.1), name=name
        )

    def observe(self, batch: list[Stored]) -> None:
        self.seen.extend(s.seq for s in batch)

    async def close(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 15)  # it ends cleanly, whatever happened to its lock


async def ask(store: EventStore) -> int:
    iid = str(uuid.uuid4())
    now = datetime.now(UTC)
    event = interaction_asked(
        iid,
        now,
        group_id=iid,
        question="who projects?",
        timeout_at=now + timedelta(minutes=10),
        mode="async",
        expiry_at=now + timedelta(minutes=10),
    )
    return await store.append(store.names.ix(iid), event, msg_id=f"asked-{iid}", expected_seq=0)


async def projected(db: asyncpg.Pool, n: int) -> None:
    await eventually(
        lambda: db.fetchval("SELECT count(*) FROM interactions"),
        f"{n} projected questions",
        until=lambda count: count >= n,
    )


_LOCK_HOLDERS = (
    "SELECT {} FROM pg_locks l "
    "WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.granted "
    "AND l.objid::bigint = (hashtext(current_schema())::bigint & 4294967295)"
)


async def test_only_one_replica_projects_and_a_stand_by_takes_over_when_it_stops(
    db: asyncpg.Pool, store: EventStore
) -> None:
    a, b = Replica("a", db, store), Replica("b", db, store)
    try:
        seqs = [await ask(store) for _ in range(20)]
        await projected(db, 20)
        leader, standby = (a, b) if a.seen else (b, a)
        assert sorted(leader.seen) == seqs and standby.seen == []
        await leader.close()
        more = [await ask(store) for _ in range(5)]
        await projected(db, 25)
        await eventually(lambda: set(more) <= set(standby.seen), "the stand-by to apply the later events")
        assert set(more) <= set(standby.seen)
        assert not set(standby.seen) & set(seqs[:-1])  # it resumed where the leader stopped
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_a_projector_whose_lock_connection_is_lost_steps_down(
    db: asyncpg.Pool, store: EventStore
) -> None:
    a, b = Replica("a", db, store), Replica("b", db, store)
    try:
        await ask(store)
        await projected(db, 1)
        leader, standby = (a, b) if a.seen else (b, a)
        # The leader's lock connection dies (a network fault, a restarted PostgreSQL): PostgreSQL
        # frees the lock, and the leader must stop before it projects again.
        holders = _LOCK_HOLDERS.format("array_agg(l.pid)")
        lost = await db.fetchval(holders, PROJECTOR_LOCK)
        killed = await db.fetchval(_LOCK_HOLDERS.format("count(pg_terminate_backend(l.pid))"), PROJECTOR_LOCK)
        assert killed == 1
        await eventually(
            lambda: db.fetchval(holders, PROJECTOR_LOCK),
            "another connection to hold the projector lock",
            until=lambda pids: pids is not None and not set(pids) & set(lost),
        )
        later = [await ask(store) for _ in range(5)]
        await projected(db, 6)
        seen_after: dict[str, Any] = {r.name: set(later) & set(r.seen) for r in (leader, standby)}
        # Whoever projects now holds the lock alone: every later event was applied by one replica.
        assert sum(len(s) for s in seen_after.values()) == len(later)
    finally:
        await asyncio.gather(a.close(), b.close())
