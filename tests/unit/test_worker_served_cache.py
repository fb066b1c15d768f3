"""The flows live workers serve are read from PostgreSQL at most once a second, and a worker that
reports in to this replica counts at once (docs/parks.md#worker-visibility)."""

from __future__ import annotations

import asyncio
from typing import Any

from layby_contracts.commands import WorkerSeen
from layby_server.auth import Principal
from layby_server.projection.workers import SERVED_CACHE_SECONDS, WorkerRegistry


class _Pool:
    """Counts the reads; a unit test of the memory in front of the table, not of SQL."""

    def __init__(self, flows: list[str]) -> None:
        self.flows = flows
        self.fetches = 0
        self.gate: asyncio.Event | None = None

    async def fetch(self, _sql: str, *_args: Any) -> list[dict[str, Any]]:
        self.fetches += 1
        if self.gate is not None:
            await self.gate.wait()
        return [{"flow": f, "version": 1} for f in self.flows]

    async def execute(self, _sql: str, *_args: Any) -> None:
        return None


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


async def test_served_flows_are_read_at_most_once_per_second() -> None:
    pool, clock = _Pool(["a"]), _Clock()
    reg = WorkerRegistry(pool, monotonic=clock)  # type: ignore[arg-type]
    assert await reg.served() == ["a"]
    pool.flows = ["a", "b"]
    clock.t += SERVED_CACHE_SECONDS / 2
    assert await reg.served() == ["a"]
    assert pool.fetches == 1
    clock.t += SERVED_CACHE_SECONDS
    assert await reg.served() == ["a", "b"]
    assert pool.fetches == 2


async def test_concurrent_run_starts_share_one_read() -> None:
    pool = _Pool(["a"])
    pool.gate = asyncio.Event()
    reg = WorkerRegistry(pool, monotonic=_Clock())  # type: ignore[arg-type]
    waiting = [asyncio.ensure_future(reg.served()) for _ in range(50)]
    await asyncio.sleep(0)
    pool.gate.set()
    assert all(r == ["a"] for r in await asyncio.gather(*waiting))
    assert pool.fetches == 1


async def test_a_worker_reporting_to_this_replica_counts_at_once() -> None:
    pool = _Pool([])
    reg = WorkerRegistry(pool, monotonic=_Clock())  # type: ignore[arg-type]
    assert await reg.served() == []
    who = Principal(identity="ops", role="operator")
    await reg.seen(WorkerSeen(token="t", worker_id="w1", flows=["refund"]), who)
    assert await reg.served() == ["refund"]
    assert pool.fetches == 1
