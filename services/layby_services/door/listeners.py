"""The clients of a stream door's shared tail (docs/doors/stream.md#one-shared-tail).

A client is a ``Listener``: a filter, a start, a bounded queue and the future its response waits
on — no task, no NATS object. What the tail hands it is an ``Entry``, made once per log message
by the door's ``Feed``; ``frames`` is the client's response body.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol

from layby_contracts.errors import Unavailable
from layby_server.observability.logs import get_logger

if TYPE_CHECKING:
    from layby_services.door.fanout import SharedTail

log = get_logger("layby.door.fanout")
KEEPALIVE = b": keepalive\n\n"
UNSTARTED_STREAM_SECONDS = 30.0
"""A client whose response never started iterating is released after this long."""
CHUNK = 64
"""At most this many frames go out in one write to a client."""
EVICTED, FAILED = "evicted", "failed"
"""Why a client's stream ends: it was too slow for its queue, or its tail failed."""


class Entry:
    """One log message as every client of a tail sees it: its sequence, who may see it, and its
    frame, encoded once."""

    __slots__ = ("audience", "chunk", "frame", "others", "seq", "topic")

    def __init__(
        self,
        seq: int,
        frame: bytes,
        audience: str | None,
        topic: str | None = None,
        others: list[str] | None = None,
    ) -> None:
        self.seq = seq
        self.frame = frame
        self.chunk = b"%x\r\n%s\r\n" % (len(frame), frame)
        """The frame as one HTTP/1.1 chunk, for clients written to directly (``Writer``)."""
        self.audience = audience
        """A restricted client sees the entry only when this is its own identity."""
        self.topic = topic
        """A client that asked for one topic (the messages door's channel) sees only its entries."""
        self.others = others
        """Identities beyond ``audience`` who see it too (a routed question's, docs/routing.md)."""


class Feed(Protocol):
    """What a stream door tells its tail: how a log message becomes an entry."""

    name: str
    """The door's log prefix (``stream``, ``messages``)."""

    def entry(self, seq: int, data: bytes, headers: dict[str, str] | None, *, live: bool) -> Entry | None:
        """The entry of one log message, or None when no client sees it. ``live``: the message
        comes from the shared tail (once per process), not from one client's replay."""
        ...


class Writer(Protocol):
    """Writes a chunk straight to a client's connection, or refuses (False) when the response's
    own ``send`` must do it (the door's ``protocol.DirectBody``)."""

    def write(self, chunk: bytes) -> bool: ...

    def abort(self) -> None:
        """Drop the connection."""
        ...


OFFERED_ONLY = "\x00offered"
"""The audience of an entry meant only for its ``others`` (a question offered to them later, which
everyone else has had since it was asked): no identity is this, and unrestricted clients skip it."""


def sees(entry: Entry, audience: str | None, topic: str | None) -> bool:
    """Whether a client (``audience`` None: unrestricted; ``topic`` None: every topic) gets ``entry``."""
    if audience is None:
        return entry.audience is not OFFERED_ONLY and (topic is None or entry.topic == topic)
    return (entry.audience == audience or (entry.others is not None and audience in entry.others)) and (
        topic is None or entry.topic == topic
    )


class Listener:
    """One client of a tail: its filter, the sequences it still needs from the log or the ring
    (``replay`` up to ``live_from``), and its bounded queue of live entries. No task, no NATS
    object: the response's own generator (``frames``) reads it."""

    __slots__ = (
        "audience",
        "delivered_at",
        "direct",
        "ended",
        "live_from",
        "queue",
        "released",
        "replay",
        "tail",
        "through",
        "topic",
        "waiter",
        "watchdog",
    )

    def __init__(self, tail: SharedTail, start: int, audience: str | None, topic: str | None) -> None:
        self.tail = tail
        self.audience = audience
        self.topic = topic
        self.replay = start
        """The next sequence to serve from the ring or the log (the gap before ``live_from``)."""
        self.live_from = max(start, tail.next_seq)
        """The first sequence the queue serves: entries before it are the gap's or not wanted."""
        self.queue: deque[Entry] = deque()
        self.waiter: asyncio.Future[None] | None = None
        self.ended: str | None = None
        self.through: int | None = None
        """When evicted: the sequence through which the client has everything it may see (None:
        evicted in the middle of its gap, which it has up to ``replay``)."""
        self.released = False
        self.watchdog: asyncio.TimerHandle | None = None
        self.direct: Writer | None = None
        """Where the tail writes an entry itself while the response waits with nothing queued."""
        self.delivered_at = 0.0
        """When the tail last wrote a frame itself (loop time): it re-arms the keepalive too."""

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self) -> bytes:
        """The next frames of the queue, joined (empty when there is none)."""
        queue = self.queue
        if not queue:
            return b""
        if len(queue) == 1:
            return queue.popleft().frame
        return b"".join([queue.popleft().frame for _ in range(min(len(queue), CHUNK))])

    def abandon(self) -> None:
        """An evicted client that has not taken its last frame: close its connection, free its slot."""
        self.watchdog = None
        if not self.released:
            if self.direct is not None:
                self.direct.abort()
            self.release()

    def started(self) -> None:
        if self.watchdog is not None and self.ended is None:  # an evicted client keeps its deadline
            self.watchdog.cancel()
            self.watchdog = None

    def release(self) -> None:
        """Leave the tail and free the slot, exactly once."""
        if self.released:
            return
        self.released = True
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        self.queue.clear()
        self.tail.leave(self)


async def frames(
    listener: Listener, keepalive: float, evicted: Callable[[int], bytes]
) -> AsyncIterator[bytes]:
    """A client's frames: its gap, then its queue, with ``: keepalive`` after ``keepalive``
    seconds without a frame (docs/doors/stream.md#keepalive); ``evicted`` makes the final frame
    of a dropped client (docs/doors/stream.md#slow-clients). A failed tail's client gets what its
    queue holds, then its response ends. Ending, or a client that leaves, releases the slot."""
    listener.started()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + keepalive
    tail = listener.tail
    try:
        while True:
            ended = listener.ended
            if ended == EVICTED:
                yield evicted(listener.replay - 1 if listener.through is None else listener.through)
                return
            if listener.replay < listener.live_from:
                if ended is not None:
                    return  # failed in the middle of the gap: the client resumes from its last id
                try:
                    chunk = await tail.replay(listener)
                except Unavailable as exc:
                    log.warning(f"{tail.name}.replay_failed", error=str(exc))
                    return
            else:
                chunk = listener.take()
                if not chunk and ended is not None:
                    return
            if chunk:
                yield chunk
                deadline = loop.time() + keepalive  # only a delivered frame re-arms the keepalive
                continue
            deadline = max(deadline, listener.delivered_at + keepalive)  # frames the tail wrote itself
            remaining = deadline - loop.time()
            if remaining <= 0:
                yield KEEPALIVE
                deadline = loop.time() + keepalive
                continue
            if listener.replay < listener.live_from or listener.queue or listener.ended is not None:
                continue  # more of the gap to read, entries queued meanwhile, or the end to send
            waiter = loop.create_future()
            listener.waiter = waiter
            try:
                async with asyncio.timeout(remaining):
                    await waiter
            except TimeoutError:
                pass
            finally:
                listener.waiter = None
    finally:
        listener.release()
