"""The door's ear for resolutions (docs/doors/asks.md#the-outcome): one core-NATS subscription on
``<ns>.wake.>`` per door process, started by the first long poll, shared by every long poll.

The resume service publishes a ``Wake`` for each question asked outside a run once its
resolution is in the log; the subject's last token is the question's id. A wake only tells a
waiting poll to look again: what the poll reports is read from the log, never from the wake."""

from __future__ import annotations

import asyncio
from collections import defaultdict

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from layby_contracts.subjects import Names


class WakeHub:
    def __init__(self, nc: NATS, names: Names) -> None:
        self._nc = nc
        self._names = names
        self._sub: Subscription | None = None
        self._lock = asyncio.Lock()
        self._waiting: defaultdict[str, set[asyncio.Future[None]]] = defaultdict(set)

    async def _start(self) -> None:
        async with self._lock:
            if self._sub is None:
                self._sub = await self._nc.subscribe(f"{self._names.namespace}.wake.>", cb=self._on_wake)
                await self._nc.flush()

    async def _on_wake(self, msg: Msg) -> None:
        interaction_id = msg.subject.rpartition(".")[2]
        for woken in self._waiting.pop(interaction_id, ()):
            if not woken.done():
                woken.set_result(None)

    async def listen(self, interaction_id: str) -> asyncio.Future[None]:
        """A future that completes on the next wake of ``interaction_id``; listening starts
        before this returns, so a resolution the caller has not read yet is never missed."""
        if self._sub is None:
            await self._start()
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[interaction_id].add(woken)
        return woken

    def forget(self, interaction_id: str, woken: asyncio.Future[None]) -> None:
        waiting = self._waiting.get(interaction_id)
        if waiting is not None:
            waiting.discard(woken)
            if not waiting:
                del self._waiting[interaction_id]

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None
