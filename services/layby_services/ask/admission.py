"""Atomic reserve-and-check for ``INTERACTIONS_MAX_CONCURRENT`` (docs/asking.md#concurrency-cap).

Asks are admitted in batches: one transaction takes an advisory lock, counts the live
reservations and inserts as many new ones as fit. Replicas serialize on the lock, so a burst of
N > cap asks across any number of replicas admits exactly ``cap``. Reservations whose deadline
has passed (abandoned waiters) no longer count.
"""

from __future__ import annotations

import asyncio
import zlib
from datetime import datetime

import asyncpg

from layby_domain.clock import Clock
from layby_server.logs import get_logger

log = get_logger("layby.ask.admission")
BATCH_MAX = 512


class Admitter:
    def __init__(self, pool: asyncpg.Pool, *, cap: int | None, clock: Clock, namespace: str) -> None:
        self._pool = pool
        self._cap = cap
        self._clock = clock
        self._lock_key = zlib.crc32(f"layby-admission-{namespace}".encode())
        self._queue: asyncio.Queue[tuple[str, datetime, asyncio.Future[bool]]] = asyncio.Queue()

    @property
    def cap(self) -> int | None:
        return self._cap

    async def admit(self, interaction_id: str, deadline: datetime) -> bool:
        """True when a slot was reserved (or already held by this id)."""
        if self._cap is None:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        await self._queue.put((interaction_id, deadline, fut))
        return await fut

    async def release(self, interaction_id: str) -> None:
        """Give back a slot whose append failed."""
        if self._cap is None:
            return
        async with self._pool.acquire() as conn:
            await conn.execute("DELETE FROM admissions WHERE interaction_id = $1", interaction_id)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                first = await asyncio.wait_for(self._queue.get(), timeout=0.5)
            except TimeoutError:
                continue
            batch = [first]
            while len(batch) < BATCH_MAX and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                results = await self._decide(batch)
            except Exception as exc:  # noqa: BLE001 - every waiter must hear back, whatever failed
                log.error("admission.failed", error=repr(exc), size=len(batch))
                for _, _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, _, fut), ok in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(ok)

    async def _decide(self, batch: list[tuple[str, datetime, asyncio.Future[bool]]]) -> list[bool]:
        assert self._cap is not None
        now = self._clock.now()
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            ids = [iid for iid, _, _ in batch]
            held = {
                r["interaction_id"]
                for r in await conn.fetch(
                    "SELECT interaction_id FROM admissions WHERE interaction_id = ANY($1::text[])", ids
                )
            }
            live = await conn.fetchval("SELECT count(*) FROM admissions WHERE deadline > $1", now)
            free = self._cap - int(live)
            results: list[bool] = []
            rows: list[tuple[str, datetime]] = []
            for iid, deadline, _ in batch:
                if iid in held:
                    results.append(True)
                elif free > 0:
                    free -= 1
                    rows.append((iid, deadline))
                    held.add(iid)
                    results.append(True)
                else:
                    results.append(False)
            if rows:
                await conn.executemany(
                    "INSERT INTO admissions (interaction_id, deadline) VALUES ($1, $2) "
                    "ON CONFLICT DO NOTHING",
                    rows,
                )
            # Expired reservations are garbage; drop a few each pass so the table stays small.
            await conn.execute(
                "DELETE FROM admissions WHERE ctid IN "
                "(SELECT ctid FROM admissions WHERE deadline <= $1 LIMIT 100)",
                now,
            )
        return results
