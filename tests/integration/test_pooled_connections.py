"""What a pooled PostgreSQL connection carries from one use to the next
(docs/performance.md#postgresql-round-trips): the schema it was opened for, and no transaction;
the pool skips the reset query because Layby leaves no other session state behind."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from layby_server.projection.projector import PROJECTOR_LOCK, run_projector
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.helpers import eventually

pytestmark = pytest.mark.integration


async def _backend(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        pid: int = await conn.fetchval("SELECT pg_backend_pid()")
        return pid


async def test_a_transaction_left_open_is_rolled_back_before_the_connection_is_used_again(
    db: asyncpg.Pool, settings: Settings
) -> None:
    first = await _backend(db)
    async with db.acquire() as conn:
        assert await conn.fetchval("SELECT pg_backend_pid()") == first  # the same connection again
        await conn.execute("CREATE TABLE IF NOT EXISTS pooled_probe (n int)")
        await conn.execute("BEGIN")
        await conn.execute("INSERT INTO pooled_probe VALUES (1)")
        # released with the transaction open
    async with db.acquire() as conn:
        assert await conn.fetchval("SELECT pg_backend_pid()") == first
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT count(*) FROM pooled_probe") == 0
        assert await conn.fetchval("SELECT current_schema()") == settings.db_schema
        await conn.execute("DROP TABLE pooled_probe")


_PROJECTOR_LOCK_HOLDERS = (
    "SELECT count(*) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.granted "
    "AND l.objid::bigint = (hashtext(current_schema())::bigint & 4294967295)"
)


async def test_no_projector_lock_stays_with_a_pooled_connection_after_the_projector_stops(
    db: asyncpg.Pool, store: EventStore
) -> None:
    stop = asyncio.Event()
    projector = asyncio.create_task(run_projector(db, store, stop, standby=0.1))
    await eventually(
        lambda: db.fetchval(_PROJECTOR_LOCK_HOLDERS, PROJECTOR_LOCK), "the projector to lead", until=bool
    )
    stop.set()
    await asyncio.wait_for(projector, 15)
    assert await db.fetchval(_PROJECTOR_LOCK_HOLDERS, PROJECTOR_LOCK) == 0
