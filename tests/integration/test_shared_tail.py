"""The stream doors' shared tail against the real JetStream (docs/doors/stream.md#one-shared-tail):
joins, audience filtering, slow clients and the stall guard, driven below HTTP so that each rule
can be pushed hard and deterministically."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
import structlog

from layby_contracts.errors import Unavailable
from layby_contracts.events import InteractionAsked, encode_event
from layby_domain.clock import Clock, ManualClock, SystemClock
from layby_server.store.eventstore import EventStore
from layby_services.door.fanout import SharedTail, Tails
from layby_services.door.listeners import frames
from layby_services.door.routes.stream import InteractionFeed, evicted_frame
from tests.helpers import eventually
from tests.samples import interaction_asked

pytestmark = pytest.mark.integration
NOW = datetime(2026, 1, 1, tzinfo=UTC)
AUDIENCES = (None, "alice", "bob")


def _asked(audience: str | None) -> InteractionAsked:
    iid = uuid.uuid4().hex
    return interaction_asked(iid, NOW, group_id=iid, audience=audience)


@dataclass
class Frame:
    id: int
    event: str


def _parse(chunk: bytes) -> list[Frame]:
    out = []
    for block in chunk.split(b"\n\n"):
        fields = dict(
            line.split(b": ", 1) for line in block.split(b"\n") if line and not line.startswith(b":")
        )
        if b"id" in fields:
            out.append(Frame(int(fields[b"id"]), fields[b"event"].decode()))
    return out


@dataclass
class Log:
    """What the test appended: (sequence, audience) of each question, in order."""

    store: EventStore
    asked: list[tuple[int, str | None]] = field(default_factory=list)
    last: int = 0

    async def ask(self, audience: str | None) -> int:
        ack = await self.store.js.publish(
            self.store.names.ix(uuid.uuid4().hex), encode_event(_asked(audience))
        )
        self.asked.append((ack.seq, audience))
        self.last = ack.seq
        return int(ack.seq)

    async def junk(self) -> None:
        """A message no client sees (it does not decode)."""
        ack = await self.store.js.publish(self.store.names.ix("junk"), b"{not json")
        self.last = ack.seq

    def visible(self, after: int, audience: str | None) -> list[int]:
        return [s for s, a in self.asked if s > after and (audience is None or a == audience)]


@dataclass
class Reader:
    """A stream client as the inbox page is one: it reads its frames and, when dropped, resumes
    from the last id it holds (the eviction frame's included)."""

    tails: Tails
    audience: str | None
    last: int
    ids: list[int] = field(default_factory=list)
    evictions: int = 0

    async def run(self) -> None:
        feed = InteractionFeed()
        names = self.tails.store.names
        while True:
            listener = await self.tails.attach(
                stream=names.events_stream,
                subject=names.ix_all,
                feed=feed,
                start=self.last + 1,
                audience=self.audience,
            )
            async with contextlib.aclosing(frames(listener, 60, evicted_frame)) as chunks:
                async for chunk in chunks:
                    for f in _parse(chunk):
                        self.last = f.id
                        if f.event == "stream.evicted":
                            self.evictions += 1
                        else:
                            self.ids.append(f.id)


def _tails(
    store: EventStore, *, buffer: int = 1000, window: float = 20.0, clock: Clock | None = None
) -> Tails:
    return Tails(store, buffer=buffer, window=window, clock=clock or SystemClock())


def _tail(tails: Tails) -> SharedTail:
    tail = tails.get(tails.store.names.events_stream, tails.store.names.ix_all)
    assert tail is not None
    return tail


async def _finish(readers: list[Reader], tasks: list[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_replay_and_live_join_have_no_gap_or_duplicate_under_concurrent_appends(
    store: EventStore,
) -> None:
    """A client joining at any moment from any Last-Event-ID — ahead of the tail, inside its ring,
    or behind it (read from the log) — gets exactly the events after that id that it may see, each
    once and in order, while appends race the joins (docs/doors/stream.md#joining-the-shared-tail)."""
    rng = random.Random(25)
    log = Log(store)
    tails = _tails(store, buffer=16)  # a small ring: most resumes read their gap from the log
    readers: list[tuple[Reader, int]] = []
    tasks: list[asyncio.Task[None]] = []
    for _ in range(20):
        await log.ask(rng.choice(AUDIENCES))
    for i in range(400):
        if i % 17 == 5:
            await log.junk()
        else:
            await log.ask(rng.choice(AUDIENCES))
        if rng.random() < 0.12:
            seen = log.last if rng.random() < 0.3 else rng.randint(0, log.last)
            reader = Reader(tails, rng.choice(AUDIENCES), seen)
            readers.append((reader, seen))
            tasks.append(asyncio.create_task(reader.run()))
    assert len(readers) >= 30
    try:
        for reader, seen in readers:
            expected = log.visible(seen, reader.audience)
            await eventually(
                lambda r=reader, e=expected: r.ids[-len(e) :] == e if e else True,
                f"a reader from {seen} ({reader.audience}) to get {len(expected)} frames",
                timeout=30,
            )
            assert reader.ids == expected, (seen, reader.audience, reader.evictions)
    finally:
        await _finish([r for r, _ in readers], tasks)
        await tails.aclose()


async def test_audience_filtering_holds_across_many_clients_of_one_tail(store: EventStore) -> None:
    """Of many clients on one tail, an operator gets every frame and each restricted client only
    the frames addressed to its own identity (docs/doors/stream.md#audience-filter)."""
    log = Log(store)
    tails = _tails(store)
    readers = [Reader(tails, AUDIENCES[i % 3], 0) for i in range(150)]
    tasks = [asyncio.create_task(r.run()) for r in readers]
    await eventually(lambda: tails.clients == 150, "every client to join")
    try:
        for i in range(30):
            await log.ask(AUDIENCES[i % 3])
        for reader in readers:
            expected = log.visible(0, reader.audience)
            await eventually(lambda r=reader, e=expected: len(r.ids) >= len(e), "every frame to arrive")
            assert reader.ids == expected
        assert [len(r.ids) for r in readers[:3]] == [30, 10, 10]
    finally:
        await _finish(readers, tasks)
        await tails.aclose()


async def test_a_slow_client_is_evicted_with_a_final_frame_and_its_resume_loses_nothing(
    store: EventStore,
) -> None:
    """A client whose queue is full is dropped: its last frame is ``stream.evicted`` carrying the
    id it has everything up to, its response ends, and resuming from that id brings every later
    frame (docs/doors/stream.md#slow-clients)."""
    log = Log(store)
    tails = _tails(store, buffer=4)
    names = store.names
    _, last = await store.bounds()
    slow = await tails.attach(
        stream=names.events_stream,
        subject=names.ix_all,
        feed=InteractionFeed(),
        start=last + 1,
        audience=None,
    )
    tail = _tail(tails)
    with structlog.testing.capture_logs() as logs:
        seqs = [await log.ask(None) for _ in range(10)]
        await eventually(lambda: tail.next_seq > seqs[-1], "the tail to hand out every event")
    assert [e["through"] for e in logs if e["event"] == "stream.client_evicted"] == [seqs[0] - 1]
    got = [f async for chunk in frames(slow, 60, evicted_frame) for f in _parse(chunk)]
    assert [(f.id, f.event) for f in got] == [(seqs[0] - 1, "stream.evicted")]  # then the response ends
    assert tails.clients == 0
    again = Reader(tails, None, got[0].id)
    task = asyncio.create_task(again.run())
    try:
        await eventually(lambda: len(again.ids) >= len(seqs), "the resumed client to catch up")
        assert again.ids == seqs
    finally:
        await _finish([again], [task])
        await tails.aclose()


async def test_an_evicted_client_that_does_not_take_its_last_frame_is_dropped(store: EventStore) -> None:
    """An evicted client that does not read even its final frame within the keepalive plus the
    grace loses its connection and its slot (docs/doors/stream.md#slow-clients)."""
    log = Log(store)
    tails = _tails(store, buffer=2, window=0.4)
    names = store.names
    _, last = await store.bounds()
    await tails.attach(
        stream=names.events_stream,
        subject=names.ix_all,
        feed=InteractionFeed(),
        start=last + 1,
        audience=None,
    )
    try:
        for _ in range(3):
            await log.ask(None)
        await eventually(lambda: tails.clients == 0, "the stuck client's slot to be freed")
    finally:
        await tails.aclose()


async def test_a_stalled_tail_ends_every_stream_it_feeds_and_the_next_client_starts_a_new_one(
    store: EventStore,
) -> None:
    """No message and no heartbeat for the keepalive plus the grace ends every client's stream
    (after what its queue holds), so each resumes from its last id; the next client starts a new
    tail (docs/doors/stream.md#stall-guard)."""
    log = Log(store)
    clock = ManualClock()
    tails = _tails(store, window=20.0, clock=clock)
    readers = [Reader(tails, audience, 0) for audience in AUDIENCES]
    tasks = [asyncio.create_task(r.run()) for r in readers]
    await eventually(lambda: tails.clients == 3, "every client to join")
    first = _tail(tails)
    try:
        seq = await log.ask(None)
        await eventually(lambda: readers[0].ids == [seq], "the frame to arrive")
        clock.advance(21.0)
        with structlog.testing.capture_logs() as logs:
            assert first.check() is False
        assert [e["reason"] for e in logs if e["event"] == "stream.tail_failed"] == ["stalled"]
        assert first.closed and not first.listeners
        # Every reader's stream ended and it resumed on a new tail from its last id.
        await eventually(
            lambda: tails.get(store.names.events_stream, store.names.ix_all) not in (None, first),
            "a new tail",
        )
        await eventually(lambda: tails.clients == 3, "every client to resume")
        later = await log.ask("alice")
        await eventually(lambda: readers[1].ids == [later], "alice's frame on the new tail")
        assert readers[0].ids == [seq, later]
        assert readers[2].ids == []
    finally:
        await _finish(readers, tasks)
        await tails.aclose()


async def test_heartbeats_keep_an_idle_tail_alive(store: EventStore) -> None:
    """A tail with nothing to hand out still makes progress: the consumer's heartbeats count, so
    an idle log is not a stall (docs/doors/stream.md#stall-guard)."""
    tails = _tails(store, window=0.4)
    reader = Reader(tails, None, 0)
    task = asyncio.create_task(reader.run())
    try:
        await eventually(lambda: tails.clients == 1, "the client to join")
        tail = _tail(tails)
        await eventually(lambda: tail.heartbeats >= 6, "six heartbeats (longer than the stall window)")
        assert not tail.closed and tail.check()
    finally:
        await _finish([reader], [task])
        await tails.aclose()


async def test_a_tail_whose_consumer_vanishes_fails_every_stream(store: EventStore) -> None:
    """When the tail's consumer is gone (deleted, or lost with its server), its heartbeats stop and
    the stall guard ends every client's stream (docs/doors/stream.md#stall-guard)."""
    tails = _tails(store, window=0.4)
    readers = [Reader(tails, None, 0) for _ in range(3)]
    tasks = [asyncio.create_task(r.run()) for r in readers]
    try:
        await eventually(lambda: tails.clients == 3, "every client to join")
        tail = _tail(tails)
        [consumer] = await store.js.consumers_info(store.names.events_stream)
        with structlog.testing.capture_logs() as logs:
            await store.js.delete_consumer(store.names.events_stream, consumer.name)
            await eventually(lambda: tail.closed, "the stall guard to fail the tail")
        assert [e["reason"] for e in logs if e["event"] == "stream.tail_failed"] == ["stalled"]
    finally:
        await _finish(readers, tasks)
        await tails.aclose()


async def test_a_tail_whose_consumer_cannot_be_created_refuses_its_clients(store: EventStore) -> None:
    """When the tail's consumer cannot be created the client is refused before any response (the
    door's 503) and nothing is left behind: no tail, no slot (docs/doors/stream.md#capacity)."""
    tails = _tails(store)
    with pytest.raises(Unavailable):
        await tails.attach(
            stream="NO_SUCH_STREAM", subject="nothing.>", feed=InteractionFeed(), start=1, audience=None
        )
    assert tails.get("NO_SUCH_STREAM", "nothing.>") is None
    assert tails.clients == 0
