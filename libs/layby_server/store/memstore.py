"""An in-memory twin of the JetStream event store, for fast unit tests of the services' rules.

``MemoryEventStore`` implements ``layby_server.store.eventlog.EventLog`` as ``EventStore`` does (mypy
checks both) and keeps the streams of ``EventStore.provision`` (the event log, the step streams
and the side streams) (docs/architecture.md, "Streams and subjects") with
the append rules JetStream enforces on them, so a rule that holds here holds against NATS:

- each stream numbers its messages with one sequence, shared by all its subjects;
- an expected last subject sequence must equal the subject's last stored sequence (0: the
  subject must be empty), or the append is refused (``Conflict``, as JetStream's wrong last
  sequence);
- a ``Nats-Msg-Id`` the stream stored within its duplicate window is not stored again, on any
  subject of the stream: the answer names the first message's sequence. The pinned server
  (nats-server 2.15) checks the expected sequence first, so a retry of an append that landed
  fails on the sequence; NATS 2.9 de-duplicates first (``dedupe_first=True``), which is where
  ``append``'s special case of a duplicate expecting a non-zero sequence comes from;
- at most one message per subject where the stream says so (secrets, continuations, media,
  tickets), and messages older than the stream's max age (secrets: the idle TTL, media: the
  retention, continuations: 30 days, the event log and tickets: their optional bound) are
  gone. Time is read from the injected clock;
- a subject outside every stream is refused (``Transient``: nothing stores it).

Events are kept encoded (``encode_event``) and decoded on every read, so an event that does not
encode fails here too and a reader never shares an object with the writer. Every call yields to
the event loop once before it acts, as a round trip would, so concurrent resolutions interleave
and race. Clustering (``leader``, replicas) and storage limits are not modelled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import msgspec

from layby_contracts.errors import Conflict, Unavailable
from layby_contracts.events import Event, decode_event, encode_event
from layby_contracts.subjects import STEP_SHARDS, Names
from layby_domain.clock import Clock, SystemClock
from layby_server.store.eventlog import EventLog
from layby_server.store.eventstore import DUPLICATE_WINDOW, Stored
from layby_server.store.sealing import Sealer, new_key, open_secret, sealer_of
from layby_server.store.streams import CONTINUATION_MAX_AGE


class _WrongLastSequence(Exception):
    """JetStream's error 10071: the subject's last sequence is not the expected one."""


@dataclass(frozen=True, slots=True)
class _Msg:
    seq: int
    subject: str
    data: bytes
    at: datetime
    headers: dict[str, str]


@dataclass(slots=True)
class _Stream:
    """One stream: its subjects' filter, its limits, its messages by sequence (in order)."""

    filter: str
    max_age: timedelta | None = None
    max_per_subject: int | None = None
    dedupe_first: bool = False
    last_seq: int = 0
    msgs: dict[int, _Msg] = field(default_factory=dict)
    by_subject: dict[str, list[int]] = field(default_factory=dict)
    msg_ids: dict[str, tuple[int, datetime]] = field(default_factory=dict)

    def expire(self, now: datetime) -> None:
        if self.max_age is None:
            return
        for msg in list(self.msgs.values()):
            if now - msg.at < self.max_age:
                break
            self._remove(msg)

    def _remove(self, msg: _Msg) -> None:
        del self.msgs[msg.seq]
        seqs = self.by_subject[msg.subject]
        seqs.remove(msg.seq)
        if not seqs:
            del self.by_subject[msg.subject]

    def get(self, subject: str, now: datetime, index: int = -1) -> _Msg | None:
        """The subject's last message (``index`` 0: its first), or None when it has none."""
        self.expire(now)
        seqs = self.by_subject.get(subject)
        return self.msgs[seqs[index]] if seqs else None

    def store(
        self,
        subject: str,
        data: bytes,
        now: datetime,
        *,
        msg_id: str | None,
        expected: int | None,
        headers: dict[str, str] | None,
    ) -> tuple[int, bool]:
        """Store one message as JetStream would; (sequence, de-duplicated)."""
        self.expire(now)
        seen = self.msg_ids.get(msg_id) if msg_id is not None else None
        if seen is not None and now - seen[1] >= DUPLICATE_WINDOW:
            seen = None
        if seen is not None and self.dedupe_first:
            return seen[0], True
        if expected is not None:
            last = self.get(subject, now)
            if (last.seq if last else 0) != expected:
                raise _WrongLastSequence(f"wrong last sequence: {last.seq if last else 0}")
        if seen is not None:
            return seen[0], True
        self.last_seq += 1
        msg = _Msg(self.last_seq, subject, data, now, dict(headers or {}))
        self.msgs[msg.seq] = msg
        seqs = self.by_subject.setdefault(subject, [])
        seqs.append(msg.seq)
        if self.max_per_subject is not None:
            while len(seqs) > self.max_per_subject:
                self._remove(self.msgs[seqs[0]])
        if msg_id is not None:
            self.msg_ids[msg_id] = (msg.seq, now)
        return msg.seq, False


def _matches(filter_: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, a trailing ``>`` one or more."""
    want, got = filter_.split("."), subject.split(".")
    for i, part in enumerate(want):
        if part == ">":
            return len(got) > i
        if i >= len(got) or part not in ("*", got[i]):
            return False
    return len(want) == len(got)


def _age(seconds: float | None) -> timedelta | None:
    return None if seconds is None else timedelta(seconds=seconds)


async def _round_trip() -> None:
    await asyncio.sleep(0)


class MemoryEventStore:
    """``EventStore``'s public surface over dictionaries (see the module docstring)."""

    def __init__(
        self,
        names: Names | None = None,
        *,
        clock: Clock | None = None,
        idle_ttl_seconds: float = 86400.0,
        media_retention_seconds: float = 30 * 86400.0,
        events_max_age_seconds: float | None = None,
        tickets_max_age_seconds: float | None = None,
        dedupe_first: bool = False,
        sealer: Sealer | None = None,
    ) -> None:
        self.sealer: Sealer | None = sealer or Sealer(new_key())
        """Sensitive answers are sealed here too (a fresh key per store unless one is given)."""
        self.names = names or Names()
        self.clock: Clock = clock or SystemClock()
        self.dedupe_first = dedupe_first
        self._idle_ttl = idle_ttl_seconds
        self.media_retention = media_retention_seconds
        self._events_max_age = _age(events_max_age_seconds)
        self._tickets_max_age = _age(tickets_max_age_seconds)
        self._streams: dict[str, _Stream] = {}
        self._configure()

    def _configure(self) -> None:
        n = self.names
        limits: dict[str, tuple[str, timedelta | None, int | None]] = {
            n.events_stream: (n.events_all, self._events_max_age, None),
            n.secrets_stream: (n.secrets_all, timedelta(seconds=self._idle_ttl), 1),
            n.continuations_stream: (n.continuations_all, CONTINUATION_MAX_AGE, 1),
            n.media_stream: (n.media_all, timedelta(seconds=self.media_retention), 1),
            n.tickets_stream: (n.tickets_all, self._tickets_max_age, 1),
            **{n.steps_stream(shard): (n.steps_all(shard), None, None) for shard in range(STEP_SHARDS)},
        }
        for name, (filter_, max_age, max_per_subject) in limits.items():
            stream = self._streams.setdefault(name, _Stream(filter_))
            stream.max_age, stream.max_per_subject = max_age, max_per_subject
            stream.dedupe_first = self.dedupe_first

    async def provision(self) -> None:
        """The streams exist from construction; this re-applies their limits, keeping contents."""
        await _round_trip()
        self._configure()

    @property
    def replicated(self) -> bool:
        """One copy in memory: a read is always the leader's."""
        return False

    async def detect_replicas(self) -> None:
        await _round_trip()

    def _publish(
        self,
        subject: str,
        data: bytes,
        *,
        msg_id: str | None = None,
        expected: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bool]:
        for stream in self._streams.values():
            if _matches(stream.filter, subject):
                now = self.clock.now()
                return stream.store(subject, data, now, msg_id=msg_id, expected=expected, headers=headers)
        raise Unavailable(f"publish to {subject} failed: no stream stores it")

    def last_payload(self, subject: str) -> bytes | None:
        """The raw last message of ``subject`` in whichever stream stores it (for tests that look
        at what was published, e.g. a continuation)."""
        for name, stream in self._streams.items():
            if _matches(stream.filter, subject):
                found = self._get(name, subject)
                return found.data if found is not None else None
        return None

    def _get(self, stream: str, subject: str) -> _Msg | None:
        return self._streams[stream].get(subject, self.clock.now())

    async def append(self, subject: str, event: Event, *, msg_id: str, expected_seq: int | None) -> int:
        """Append one event; ``Conflict`` when ``expected_seq`` is not the subject's last sequence."""
        data = encode_event(event)
        await _round_trip()
        try:
            seq, duplicate = self._publish(subject, data, msg_id=msg_id, expected=expected_seq)
        except _WrongLastSequence:
            raise Conflict(f"{subject} moved on past sequence {expected_seq}") from None
        if duplicate and expected_seq:
            raise Conflict(f"{subject}: duplicate of an earlier append")
        if duplicate and expected_seq == 0:
            firsts = [s.msgs.get(seq) for s in self._streams.values() if _matches(s.filter, subject)]
            if any(m is not None and m.subject == subject and m.data != data for m in firsts):
                raise Conflict(f"{subject} moved on past sequence 0")  # another writer's first message
        return seq

    async def last(self, subject: str, *, leader: bool = False, stream: str | None = None) -> Stored | None:
        """The last event on a subject of the event log (or of ``stream``), ``None`` when empty."""
        await _round_trip()
        msg = self._get(stream or self.names.events_stream, subject)
        return None if msg is None else Stored(seq=msg.seq, event=decode_event(msg.data))

    async def last_steps(self, run_id: str, generation: int, *, leader: bool = False) -> Stored | None:
        """The last ``StepRecorded`` of a run's generation (it holds all the generation's steps)."""
        stream = self.names.steps_stream(self.names.step_shard(run_id))
        return await self.last(self.names.steps(run_id, generation), leader=leader, stream=stream)

    async def first(self, subject: str) -> Stored | None:
        """The first event on a subject."""
        await _round_trip()
        msg = self._streams[self.names.events_stream].get(subject, self.clock.now(), 0)
        return None if msg is None else Stored(seq=msg.seq, event=decode_event(msg.data))

    async def bounds(self) -> tuple[int, int]:
        """(first, last) sequence of the event log; (0, 0) while it is empty."""
        await _round_trip()
        stream = self._streams[self.names.events_stream]
        stream.expire(self.clock.now())
        if stream.msgs:
            return next(iter(stream.msgs)), stream.last_seq
        return (stream.last_seq + 1 if stream.last_seq else 0), stream.last_seq

    async def publish_once(self, subject: str, payload: bytes, *, msg_id: str) -> bool:
        """Publish to an empty subject of the continuations stream; False when it was there."""
        await _round_trip()
        try:
            _, duplicate = self._publish(subject, payload, msg_id=msg_id, expected=0)
        except _WrongLastSequence:
            return False
        return not duplicate

    async def put_media(self, media_id: str, mime: str, payload: bytes) -> None:
        await _round_trip()
        self._publish(
            self.names.media(media_id), payload, msg_id=f"media-{media_id}", headers={"Content-Type": mime}
        )

    async def get_media(self, media_id: str) -> tuple[str, bytes, datetime] | None:
        """(MIME type, bytes, stored at) of an inline image, or None when unknown or expired."""
        await _round_trip()
        msg = self._get(self.names.media_stream, self.names.media(media_id))
        if msg is None:
            return None
        return msg.headers.get("Content-Type", "application/octet-stream"), msg.data, msg.at

    async def put_ticket(
        self, ticket_hash: str, interaction_id: str, expires_at: datetime, *, new: bool
    ) -> bool:
        """Record (``new``: only if the hash is unused) or refresh a ticket; False if it was taken."""
        await _round_trip()
        payload = f'{{"interaction_id":"{interaction_id}","expires_at":"{expires_at.isoformat()}"}}'.encode()
        try:
            self._publish(self.names.ticket(ticket_hash), payload, expected=0 if new else None)
        except _WrongLastSequence:
            return False
        return True

    async def get_ticket(self, ticket_hash: str) -> tuple[str, datetime] | None:
        """(interaction id, expires at) of a ticket hash, or None; the caller judges the expiry."""
        await _round_trip()
        msg = self._get(self.names.tickets_stream, self.names.ticket(ticket_hash))
        if msg is None:
            return None
        body = msgspec.json.decode(msg.data)
        return body["interaction_id"], datetime.fromisoformat(body["expires_at"])

    async def put_secret(self, interaction_id: str, ref: str, payload: bytes) -> None:
        await _round_trip()
        subject = self.names.secret(interaction_id, ref)
        self._publish(subject, sealer_of(self).seal(payload, bound_to=subject))

    async def get_secret(self, interaction_id: str, ref: str | None) -> bytes | None:
        if ref is None:
            return None
        await _round_trip()
        subject = self.names.secret(interaction_id, ref)
        msg = self._get(self.names.secrets_stream, subject)
        return None if msg is None else open_secret(self, msg.data, subject)


if TYPE_CHECKING:
    _: type[EventLog] = MemoryEventStore  # mypy checks the twin against the interface
