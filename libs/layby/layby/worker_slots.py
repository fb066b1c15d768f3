"""How a worker shares its continuation slots among its flows, and waits on several events
(docs/parks.md#fair-workers)."""

from __future__ import annotations

import asyncio
from collections import deque


class Slots:
    """The continuations a worker may execute at once, shared fairly by its flows
    (docs/parks.md#fair-workers).

    A slot is taken only when a continuation is about to execute, never while a flow's loop
    waits for messages, and slots are handed out first come, first served: a flow whose loop
    releases a slot cannot take it back while another flow's continuation is waiting for one.
    """

    def __init__(self, size: int, flows: int) -> None:
        self.size = size
        self.free = size
        self.share = max(1, -(-size // max(flows, 1)))
        """How many fetched continuations one flow may have waiting for a slot."""
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # the slot was handed over as we were cancelled: pass it on
            raise

    def release(self) -> None:
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # handed straight over: nobody can overtake the queue
                return
        self.free += 1


def after(seconds: float) -> asyncio.Event:
    """An event set ``seconds`` from now."""
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, event.set)
    return event


async def first(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set."""
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
