"""The event log's interface, and the one decide → append → re-read loop every writer uses.

``EventLog`` is what the services ask of an event store. Two stores honour it: JetStream's
(``layby_server.store.eventstore.EventStore``, production) and its in-memory twin
(``layby_server.store.memstore.MemoryEventStore``, fast unit tests); mypy checks both against it, and
one behaviour suite runs against both (tests/integration/test_eventstore_behaviour.py).

``decide_and_append`` is how an aggregate — an interaction, a run, a run generation's step
record — changes: read its state, decide with a pure function of the domain, append the decision
expecting the sequence the state was read at, and on a lost race (``Conflict``) read again from
the stream leader and decide again. The log, not a lock, decides every race
(docs/architecture.md#the-event-log-decides-every-race).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from layby_contracts.errors import Conflict, LaybyError, Unavailable
from layby_contracts.events import Event
from layby_contracts.subjects import Names

if TYPE_CHECKING:
    pass

ATTEMPTS = 5
"""How many lost races a writer takes before it gives up (``lost``: the caller says what then)."""


class StoredEvent(Protocol):
    """One event read back from the log, with its stream sequence."""

    @property
    def seq(self) -> int: ...
    @property
    def event(self) -> Event: ...


class EventLog(Protocol):
    """What the services need of an event store: the event log (one subject per aggregate), the
    step streams, and the side streams (continuations, media, tickets, sealed secrets)."""

    names: Names

    async def provision(self) -> None: ...
    async def detect_replicas(self) -> None: ...
    async def append(self, subject: str, event: Event, *, msg_id: str, expected_seq: int | None) -> int: ...
    async def last(
        self, subject: str, *, leader: bool = False, stream: str | None = None
    ) -> StoredEvent | None: ...
    async def last_steps(
        self, run_id: str, generation: int, *, leader: bool = False
    ) -> StoredEvent | None: ...
    async def first(self, subject: str) -> StoredEvent | None: ...
    async def bounds(self) -> tuple[int, int]: ...
    async def publish_once(self, subject: str, payload: bytes, *, msg_id: str) -> bool: ...
    async def put_media(self, media_id: str, mime: str, payload: bytes) -> None: ...
    async def get_media(self, media_id: str) -> tuple[str, bytes, datetime] | None: ...
    async def put_ticket(
        self, ticket_hash: str, interaction_id: str, expires_at: datetime, *, new: bool
    ) -> bool: ...
    async def get_ticket(self, ticket_hash: str) -> tuple[str, datetime] | None: ...
    async def put_secret(self, interaction_id: str, ref: str, payload: bytes) -> None: ...
    async def get_secret(self, interaction_id: str, ref: str | None) -> bytes | None: ...


class Appender(Protocol):
    """The one operation ``decide_and_append`` needs of a log."""

    async def append(self, subject: str, event: Event, *, msg_id: str, expected_seq: int | None) -> int: ...


class Sequenced(Protocol):
    """A state read from the log: the sequence it was read at (0: nothing recorded yet)."""

    @property
    def seq(self) -> int: ...


S = TypeVar("S", bound=Sequenced)
D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class Outcome(Generic[S, D]):
    """How a decide-and-append ended: the state of the last decision, the decision and the event
    appended for it (None when the decision was to append nothing), its sequence, and ``lost``
    when every attempt lost its race (or, without ``retry``, the first one did)."""

    state: S
    decision: D | None = None
    event: Event | None = None
    seq: int | None = None
    lost: bool = False


def kept_changing(what: str, during: str = "") -> Unavailable:
    """The error of a writer whose every attempt lost its race: nothing was decided, and a retry
    decides on what the others wrote (503 at the door)."""
    return Unavailable(f"{what} kept changing{f' {during}' if during else ''}; try again")


async def decide_and_append(
    log: Appender,
    subject: str,
    *,
    read: Callable[[bool], Awaitable[S]],
    decide: Callable[[S], D | None],
    event_of: Callable[[D], Awaitable[Event]],
    msg_id: Callable[[Event], str],
    seed: S | None = None,
    trusted: bool = True,
    retry: bool = True,
    attempts: int = ATTEMPTS,
) -> Outcome[S, D]:
    """Read (``read(leader)``), decide, append expecting the state's sequence; after a lost race
    read the leader and decide again.

    ``decide`` returns the decision, ``None`` to append nothing, or raises a refusal (a
    ``LaybyError``). ``event_of`` turns a decision into the event to append (filing what must
    be filed first, e.g. a sensitive answer). ``seed`` is a state already at hand; a seed that is
    not ``trusted`` (a cache) may be stale, so a refusal decided on it is decided again on the log
    before it is raised. ``retry=False`` reports a lost race instead of deciding again (a sweep
    whose next pass will look again).
    """
    state = seed
    leader = False
    for _ in range(attempts):
        from_log = state is None
        if state is None:
            state = await read(leader)
        try:
            decision = decide(state)
        except LaybyError:
            if from_log or trusted:
                raise
            state, leader = None, False  # a cached state may be stale: refuse only on the log's word
            continue
        if decision is None:
            return Outcome(state)
        event = await event_of(decision)
        try:
            seq = await log.append(subject, event, msg_id=msg_id(event), expected_seq=state.seq)
        except Conflict:
            if not retry:
                return Outcome(state, lost=True)
            state, leader = None, True  # another writer won: read what it recorded, from the leader
            continue
        return Outcome(state, decision, event, seq)
    assert state is not None
    return Outcome(state, lost=True)


async def as_event(decision: Event) -> Event:
    """``event_of`` for decisions that are the event itself."""
    return decision
