"""Atomic reserve-and-check for the concurrency caps (docs/asking.md#concurrency-cap,
docs/caller-asks.md#the-concurrency-cap).

Asks are admitted in batches: one transaction takes an advisory lock, counts the live
reservations and inserts as many new ones as fit. Replicas serialize on the lock, so a burst of
N > cap asks across any number of replicas admits exactly ``cap``. Reservations whose deadline
has passed (abandoned waiters) no longer count.

There are two pools, each an ``Admitter`` over its own table with its own lock: ``admissions``
for ``INTERACTIONS_MAX_CONCURRENT`` (to-user questions) and ``caller_admissions`` for
``INTERACTIONS_MAX_CONCURRENT_CALLER`` (caller asks and the waiting outcomes they leave).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import NamedTuple

import asyncpg

from layby_contracts.errors import InteractionLimitError, Unavailable
from layby_domain.clock import Clock
from layby_domain.tickets import ASYNC_MARGIN_SECONDS
from layby_server.observability.logs import get_logger
from layby_server.projection.caller_slots import CALLER_POOL

__all__ = ["CALLER_POOL", "POOLS", "USER_POOL", "Admitter", "caller_deadline", "caller_limit_error"]

log = get_logger("layby.ask.admission")
BATCH_MAX = 512
USER_POOL = "admissions"
"""The table of the to-user pool's reservations (``INTERACTIONS_MAX_CONCURRENT``)."""
POOLS = (USER_POOL, CALLER_POOL)


def caller_limit_error(cap: int | None) -> InteractionLimitError:
    """The refusal of a caller ask at ``INTERACTIONS_MAX_CONCURRENT_CALLER``: the same kind as a
    to-user ask's at its cap (the SDK raises ``InteractionLimitError``), naming the caller cap."""
    return InteractionLimitError(
        f"ask_user(to='caller') refused: already at the max_concurrent_caller limit ({cap})"
    )


def caller_deadline(expiry_at: datetime) -> datetime:
    """Until when a caller ask's reservation counts if nothing else happens to it: its deadline
    plus the margin a park stays answerable past it (the sweeper resolves it within that margin,
    and the projector then keeps or frees the slot)."""
    return expiry_at + timedelta(seconds=ASYNC_MARGIN_SECONDS)


class _Statements(NamedTuple):
    held: str
    live: str
    insert: str
    purge: str
    release: str


def _statements(table: str) -> _Statements:
    """The pool's statements. ``table`` is one of ``POOLS`` (checked by ``Admitter``), never input."""
    return _Statements(
        held=f"SELECT interaction_id FROM {table} WHERE interaction_id = ANY($1::text[])",  # noqa: S608
        live=f"SELECT count(*) FROM {table} WHERE deadline > $1",  # noqa: S608
        insert=f"INSERT INTO {table} (interaction_id, deadline) VALUES ($1, $2) "  # noqa: S608
        "ON CONFLICT DO NOTHING",
        purge=f"DELETE FROM {table} WHERE ctid IN "  # noqa: S608
        f"(SELECT ctid FROM {table} WHERE deadline <= $1 LIMIT 100)",
        release=f"DELETE FROM {table} WHERE interaction_id = $1",  # noqa: S608
    )


Settled = Callable[[], Awaitable[bool]]
"""Whether the read models hold every event the log held when asked (waiting a bounded time for
the projector): then the reservations are exactly the open questions, and a refusal is true."""


class Admitter:
    """One pool: reservations in ``table`` (one of ``POOLS``), at most ``cap`` live at once.

    ``settled``: asked before any refusal. The projector frees a slot when it applies the
    question's resolution, so reservations can outlive their questions while it is behind (a
    leader change, a hand-over, a PostgreSQL restart). An ask is refused only when the
    reservations are current; when they cannot be made current in time it gets ``Unavailable``
    (try again), never a refusal the state does not justify (docs/asking.md#concurrency-cap).
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        cap: int | None,
        clock: Clock,
        namespace: str,
        table: str = USER_POOL,
        settled: Settled | None = None,
    ) -> None:
        if table not in POOLS:
            raise ValueError(f"table must be one of {', '.join(POOLS)}, got {table!r}")
        self._pool = pool
        self._cap = cap
        self._clock = clock
        self._sql = _statements(table)
        # The to-user pool keeps the key it always had, so replicas of two releases still
        # serialize with each other during a rolling upgrade; every other pool has its own.
        suffix = "" if table == USER_POOL else f"-{table}"
        self._lock_key = zlib.crc32(f"layby-admission-{namespace}{suffix}".encode())
        self._queue: asyncio.Queue[tuple[str, datetime, asyncio.Future[bool]]] = asyncio.Queue()
        self._settled = settled

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
            await conn.execute(self._sql.release, interaction_id)

    async def run(self, stop: asyncio.Event) -> None:
        """Decide queued admissions in batches until ``stop`` (which ends the wait at once)."""
        stopping = asyncio.ensure_future(stop.wait())
        getting: asyncio.Future[tuple[str, datetime, asyncio.Future[bool]]] | None = None
        try:
            while not stop.is_set():
                getting = asyncio.ensure_future(self._queue.get())
                await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not getting.done():
                    break  # stopping: the cancelled get below takes nothing off the queue
                await self._admit(getting.result())
        finally:
            stopping.cancel()
            if getting is not None and not getting.done():
                getting.cancel()

    async def _admit(self, first: tuple[str, datetime, asyncio.Future[bool]]) -> None:
        """Decide ``first`` and whatever else is queued, in one transaction."""
        batch = [first]
        while len(batch) < BATCH_MAX and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        try:
            results: list[bool | Exception] = list(await self._decide(batch))
            if self._settled is not None and not all(results):
                results = await self._decide_settled(batch, results, self._settled)
        except Exception as exc:  # noqa: BLE001 - every waiter must hear back, whatever failed
            log.error("admission.failed", error=repr(exc), size=len(batch))
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, _, fut), ok in zip(batch, results, strict=True):
            if fut.done():
                continue
            if isinstance(ok, Exception):
                fut.set_exception(ok)
            else:
                fut.set_result(ok)

    async def _decide_settled(
        self,
        batch: list[tuple[str, datetime, asyncio.Future[bool]]],
        results: list[bool | Exception],
        settled: Settled,
    ) -> list[bool | Exception]:
        """Decide the refused asks of ``batch`` again once the reservations are current."""
        refused = [i for i, ok in enumerate(results) if ok is False]
        if not await settled():
            log.warning("admission.projection_behind", refused=len(refused))
            behind = Unavailable(
                "the count of open questions is behind the event log (the projector is catching "
                "up); nothing was recorded, try again"
            )
            for i in refused:
                results[i] = behind
            return results
        again = await self._decide([batch[i] for i in refused])
        for i, ok in zip(refused, again, strict=True):
            results[i] = ok
        return results

    async def _decide(self, batch: list[tuple[str, datetime, asyncio.Future[bool]]]) -> list[bool]:
        assert self._cap is not None
        now = self._clock.now()
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", self._lock_key)
            ids = [iid for iid, _, _ in batch]
            held = {r["interaction_id"] for r in await conn.fetch(self._sql.held, ids)}
            live = await conn.fetchval(self._sql.live, now)
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
                await conn.executemany(self._sql.insert, rows)
            # Expired reservations are garbage; drop a few each pass so the table stays small.
            await conn.execute(self._sql.purge, now)
        return results
