"""One shared tail per door process and stream (docs/doors/stream.md#one-shared-tail).

A stream door's clients (``listeners.Listener``) do not each read the log. One ``SharedTail`` per
(stream, subject) reads it through one ordered push consumer, turns each message into an
``Entry`` once (decoded, the frame encoded, its audience and topic noted) and hands the entry to
every client that may see it: written straight to the connection of a response that waits with
nothing queued, else added to the client's bounded queue. A client that resumes from an id behind
the tail is served the gap first — from the tail's ring of recent entries, or else read from the
log — and then from its queue, which holds exactly the entries after the gap
(docs/doors/stream.md#joining-the-shared-tail).

- A client whose queue is full is dropped with a final ``stream.evicted`` frame and resumes
  (docs/doors/stream.md#slow-clients).
- A tail that makes no progress — no message and no heartbeat within the keepalive plus the grace
  — or whose consumer loses a message ends every client's stream; the next client starts a new
  tail (docs/doors/stream.md#stall-guard).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections import deque
from collections.abc import Coroutine

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from layby_contracts.errors import Unavailable
from layby_domain.clock import Clock
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore
from layby_services.door.listeners import EVICTED, FAILED, OFFERED_ONLY, Entry, Feed, Listener, sees

log = get_logger("layby.door.fanout")
IDLE_TAIL_SECONDS = 30.0
"""A tail with no client left stops after this long (a reconnecting client finds it running)."""
REPLAY_BATCH = 200
"""Messages one step of a client's replay reads from the log before it yields what it has."""
_CONTROL = "100"


class SharedTail:
    """The one reader of ``subject`` on ``stream`` in this process (see the module's docstring)."""

    def __init__(
        self,
        registry: Tails,
        *,
        stream: str,
        subject: str,
        feed: Feed,
        start: int,
        buffer: int,
        window: float,
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._store = registry.store
        self.stream = stream
        self.subject = subject
        self._feed = feed
        self.name = feed.name
        self.next_seq = start
        """Every message before this sequence has been handed out; the consumer starts here."""
        self._buffer = buffer
        self._ring: deque[Entry] = deque(maxlen=buffer)
        self._ring_from = start
        """The ring holds every entry from this sequence up to ``next_seq``."""
        self.listeners: set[Listener] = set()
        self.window = window
        """No message and no heartbeat for this long is a stall."""
        self.heartbeat = max(0.1, min(5.0, window / 4))  # JetStream takes no shorter heartbeat
        self._clock = clock
        self._progress = clock.monotonic()
        self._delivered = 0
        self.heartbeats = 0
        """Control messages received (heartbeats and flow-control requests)."""
        self._sub: Subscription | None = None
        self._consumer: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._idle: asyncio.TimerHandle | None = None
        self.closed = False
        self.opening: asyncio.Task[None] | None = None

    # -- the backing read -------------------------------------------------------------------

    async def open(self) -> None:
        """Subscribe, then create the ordered push consumer that starts at ``next_seq``."""
        nc = self._store.nc
        inbox = nc.new_inbox()
        self._sub = await nc.subscribe(inbox, cb=self._on_msg)
        config = ConsumerConfig(
            deliver_subject=inbox,
            filter_subject=self.subject,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.next_seq,
            ack_policy=AckPolicy.NONE,
            max_deliver=1,
            flow_control=True,
            idle_heartbeat=self.heartbeat,
            mem_storage=True,
            num_replicas=1,
        )
        try:
            info = await self._store.js.add_consumer(self.stream, config)
        except BaseException:
            with contextlib.suppress(nats.errors.Error):
                await self._sub.unsubscribe()
            self._sub = None
            raise
        self._consumer = info.name
        self._progress = self._clock.monotonic()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.heartbeat, self._tick)
        if not self.listeners:
            self._idle = loop.call_later(IDLE_TAIL_SECONDS, self._stop_if_idle)

    async def _on_msg(self, msg: Msg) -> None:
        if self.closed:
            return
        self._progress = self._clock.monotonic()
        headers = msg.headers
        if not msg.data and headers is not None and headers.get("Status") == _CONTROL:
            await self._control(msg, headers)
            return
        meta = msg.metadata
        if meta.sequence.consumer != self._delivered + 1:
            self.fail("lost_message")
            return
        self._delivered += 1
        self.deliver(meta.sequence.stream, msg.data, headers)

    async def _control(self, msg: Msg, headers: dict[str, str]) -> None:
        """A heartbeat or a flow-control request. Every earlier message has been handed out (the
        callback runs them in order), so a flow-control request is answered at once."""
        self.heartbeats += 1
        nc = self._store.nc
        if msg.reply:
            await nc.publish(msg.reply)
        stalled = headers.get("Nats-Consumer-Stalled")
        if stalled:
            await nc.publish(stalled)
        last = headers.get("Nats-Last-Consumer")
        if last is not None and int(last) != self._delivered:
            self.fail("lost_message")

    def _tick(self) -> None:
        self._timer = None
        if self.check():
            self._timer = asyncio.get_running_loop().call_later(self.heartbeat, self._tick)

    def check(self) -> bool:
        """The stall guard: False (and every stream fails) when nothing arrived for ``window``."""
        if self.closed:
            return False
        if self._clock.monotonic() - self._progress > self.window:
            self.fail("stalled")
            return False
        return True

    # -- fan-out ----------------------------------------------------------------------------

    def deliver(self, seq: int, data: bytes, headers: dict[str, str] | None) -> None:
        """Hand one log message to every client: decoded once, each client only filters."""
        if seq < self.next_seq:
            return  # already handed out
        self.next_seq = seq + 1
        entry = self._feed.entry(seq, data, headers, live=True)
        if entry is None:
            return
        ring = self._ring
        if len(ring) == ring.maxlen:
            self._ring_from = ring[0].seq + 1
        ring.append(entry)
        full: list[Listener] | None = None
        audience, topic, buffer, chunk = entry.audience, entry.topic, self._buffer, entry.chunk
        now = asyncio.get_running_loop().time()
        for listener in self.listeners:
            if seq < listener.live_from:
                continue
            if listener.audience is not None and listener.audience != audience:
                others = entry.others
                if others is None or listener.audience not in others:
                    continue
            elif audience is OFFERED_ONLY:
                continue  # an unrestricted client has had this question since it was asked
            if listener.topic is not None and listener.topic != topic:
                continue
            queue = listener.queue
            waiter = listener.waiter
            if waiter is not None and not waiter.done():
                # The response waits with nothing queued: every earlier frame is on the socket.
                direct = listener.direct
                if direct is not None and direct.write(chunk):
                    listener.delivered_at = now
                    continue
                queue.append(entry)
                waiter.set_result(None)
                continue
            if len(queue) >= buffer:
                full = [listener] if full is None else [*full, listener]
                continue
            queue.append(entry)
        for listener in full or ():
            self._evict(listener, entry)

    def _evict(self, listener: Listener, entry: Entry) -> None:
        queue = listener.queue
        if listener.replay >= listener.live_from:
            listener.through = (queue[0].seq if queue else entry.seq) - 1
        queue.clear()
        listener.ended = EVICTED
        self.listeners.discard(listener)
        log.info(f"{self.name}.client_evicted", buffer=self._buffer, through=listener.through)
        listener.wake()
        # A client that does not take even its last frame within the window is dropped.
        if listener.watchdog is not None:
            listener.watchdog.cancel()
        listener.watchdog = asyncio.get_running_loop().call_later(self.window, listener.abandon)

    # -- clients ----------------------------------------------------------------------------

    def join(self, start: int, audience: str | None, topic: str | None) -> Listener:
        """A client from sequence ``start`` on. Synchronous: nothing is handed out between the
        choice of ``live_from`` and the client joining the fan-out, so nothing is lost or doubled."""
        listener = Listener(self, start, audience, topic)
        self.listeners.add(listener)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        return listener

    def leave(self, listener: Listener) -> None:
        self.listeners.discard(listener)
        self._registry.left()
        if not self.listeners and not self.closed and self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(IDLE_TAIL_SECONDS, self._stop_if_idle)

    def _stop_if_idle(self) -> None:
        self._idle = None
        if not self.listeners:
            self.close()

    async def replay(self, listener: Listener) -> bytes:
        """The next frames of the client's gap (``replay`` up to ``live_from``): from the ring when
        it reaches back that far, else a batch read from the log."""
        if listener.replay >= self._ring_from:
            return self._from_ring(listener)
        return await self._from_log(listener)

    def _from_ring(self, listener: Listener) -> bytes:
        ring, end = self._ring, listener.live_from
        out = []
        for i in range(bisect.bisect_left(ring, listener.replay, key=_seq), len(ring)):
            entry = ring[i]
            if entry.seq >= end:
                break
            if sees(entry, listener.audience, listener.topic):
                out.append(entry.frame)
        listener.replay = end
        return b"".join(out)

    async def _from_log(self, listener: Listener) -> bytes:
        seq, end = listener.replay, listener.live_from
        out = []
        for _ in range(REPLAY_BATCH):
            raw = await self._store.next_message(self.stream, self.subject, seq)
            if raw is None or raw.seq is None or raw.seq >= end:
                seq = end
                break
            seq = raw.seq + 1
            entry = self._feed.entry(raw.seq, raw.data or b"", raw.headers, live=False)
            if entry is not None and sees(entry, listener.audience, listener.topic):
                out.append(entry.frame)
            if seq >= self._ring_from:
                break  # the ring has the rest
        listener.replay = seq
        return b"".join(out)

    # -- the end ----------------------------------------------------------------------------

    def fail(self, reason: str) -> None:
        """End every client's stream (they resume from their last id) and stop this tail."""
        if self.closed:
            return
        log.warning(
            f"{self.name}.tail_failed",
            reason=reason,
            clients=len(self.listeners),
            next_seq=self.next_seq,
        )
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for listener in self.listeners:
            listener.ended = FAILED
            listener.wake()
        self.listeners.clear()
        for timer in (self._timer, self._idle):
            if timer is not None:
                timer.cancel()
        self._registry.closed(self)
        self._registry.background(self._stop_reading())

    async def _stop_reading(self) -> None:
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, OSError):
            if self._sub is not None:
                await self._sub.unsubscribe()
            if self._consumer is not None:
                await self._store.js.delete_consumer(self.stream, self._consumer)


def _seq(entry: Entry) -> int:
    return entry.seq


class Tails:
    """The door process's shared tails, one per (stream, subject), and its count of stream clients
    (bounded by LAYBY_SSE_MAX_CLIENTS, docs/doors/stream.md#capacity)."""

    def __init__(self, store: EventStore, *, buffer: int, window: float, clock: Clock) -> None:
        self.store = store
        self._buffer = buffer
        self._window = window
        self._clock = clock
        self._tails: dict[tuple[str, str], SharedTail] = {}
        self._background: set[asyncio.Task[None]] = set()
        self.clients = 0

    def get(self, stream: str, subject: str) -> SharedTail | None:
        return self._tails.get((stream, subject))

    async def attach(
        self,
        *,
        stream: str,
        subject: str,
        feed: Feed,
        start: int,
        audience: str | None,
        topic: str | None = None,
    ) -> Listener:
        """A client of the tail of ``subject`` from ``start`` on, starting the tail (at ``start``)
        when none runs. Raises ``Unavailable`` when the tail's consumer cannot be created."""
        tail = self._tails.get((stream, subject))
        if tail is None:
            tail = SharedTail(
                self,
                stream=stream,
                subject=subject,
                feed=feed,
                start=start,
                buffer=self._buffer,
                window=self._window,
                clock=self._clock,
            )
            self._tails[(stream, subject)] = tail
            tail.opening = asyncio.create_task(tail.open())
        assert tail.opening is not None
        try:
            await asyncio.shield(tail.opening)
        except (nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            self.closed(tail)
            raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
        if tail.closed:
            return await self.attach(
                stream=stream, subject=subject, feed=feed, start=start, audience=audience, topic=topic
            )
        self.clients += 1
        return tail.join(start, audience, topic)

    def left(self) -> None:
        self.clients -= 1

    def closed(self, tail: SharedTail) -> None:
        key = (tail.stream, tail.subject)
        if self._tails.get(key) is tail:
            del self._tails[key]

    def background(self, work: Coroutine[object, object, None]) -> None:
        """Run ``work`` without waiting for it (the door's shutdown does)."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Stop every tail (their clients' streams end) — the door's shutdown."""
        for tail in list(self._tails.values()):
            tail.close()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
