"""Parked entries on subjects, read and changed on the log (docs/caller-asks.md).

One module for every service that touches entries: the ask service lists them and resumes,
takes or cancels them for a visit; the resume service settles them when the chain a visit
resumed reaches its next outcome, keeps each subject's index, and tears chains down; the sweeper
drops waiting outcomes nobody took. Each change is decided by ``layby_domain.caller`` and appended
expecting the entry's (or the index's, or the visit's) last sequence, so the log decides every
race.

A subject's *index* (``<ns>.ev.subj.<subject>``) is its last ``SubjectIndexed``: the ids of the
entries on it. An entry's own state is its interaction's log (``<ns>.ev.ix.<id>``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from layby_contracts.doors import Entry, Outcome
from layby_contracts.errors import InteractionLimitError
from layby_contracts.events import (
    ConversationReplied,
    Event,
    InteractionAsked,
    InteractionSettled,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunStarted,
    SubjectIndexed,
    VisitRecorded,
    VisitSettled,
)
from layby_domain.caller import Parked, decide_settle, entry_of
from layby_domain.run import Run
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog, as_event, decide_and_append, kept_changing

log = get_logger("layby.parked")
MAX_ENTRIES_PER_SUBJECT = 1000
"""A subject's index is one message: its ids are bounded so it stays small."""
ASKED_CACHE = 20_000


@dataclass(frozen=True, slots=True)
class Index:
    seq: int = 0
    ids: tuple[str, ...] = ()


class Entries:
    """Reads of entries and indexes, with each caller ask's ``InteractionAsked`` kept once read
    (it never changes)."""

    def __init__(self, store: EventLog, now: Callable[[], datetime]) -> None:
        self._store = store
        self._now = now
        self._asked: OrderedDict[str, InteractionAsked] = OrderedDict()

    @property
    def store(self) -> EventLog:
        return self._store

    def now(self) -> datetime:
        return self._now()

    def remember(self, asked: InteractionAsked) -> None:
        self._asked[asked.interaction_id] = asked
        if len(self._asked) > ASKED_CACHE:
            self._asked.popitem(last=False)

    async def asked(self, ix: str) -> InteractionAsked | None:
        found = self._asked.get(ix)
        if found is not None:
            return found
        first = await self._store.first(self._store.names.ix(ix))
        if first is None or not isinstance(first.event, InteractionAsked) or first.event.to != "caller":
            return None
        self.remember(first.event)
        return first.event

    async def read(self, ix: str, *, leader: bool = True) -> Parked | None:
        """An entry's caller ask and last event (None: not a caller ask)."""
        asked = await self.asked(ix)
        if asked is None:
            return None
        last = await self._store.last(self._store.names.ix(ix), leader=leader)
        if last is None:
            return None
        return Parked(asked=asked, last=last.event, seq=last.seq)

    async def index(self, subject: str, *, leader: bool = True) -> Index:
        last = await self._store.last(self._store.names.subject_index(subject), leader=leader)
        if last is None or not isinstance(last.event, SubjectIndexed):
            return Index(seq=last.seq if last is not None else 0)
        return Index(seq=last.seq, ids=tuple(last.event.ids))

    async def on_subject(self, subject: str) -> list[Parked]:
        """Every entry on ``subject``, in the order they were parked."""
        index = await self.index(subject)
        reads = await asyncio.gather(*(self.read(ix) for ix in index.ids))
        return [p for p in reads if p is not None and p.entry is not None]

    async def entries(self, subject: str) -> list[Entry]:
        return [e for p in await self.on_subject(subject) if (e := p.entry) is not None]

    async def add(self, subject: str, ix: str) -> None:
        """Put ``ix`` on its subject's index (idempotent); refused past the per-subject bound."""

        def decide(index: Index) -> SubjectIndexed | None:
            if ix in index.ids:
                return None
            if len(index.ids) >= MAX_ENTRIES_PER_SUBJECT:
                raise InteractionLimitError(
                    f"ask_user(to='caller') refused: subject {subject} already holds "
                    f"{MAX_ENTRIES_PER_SUBJECT} parked entries"
                )
            return SubjectIndexed(subject=subject, ids=[*index.ids, ix], changed_at=self._now())

        await self._change_index(subject, decide)

    async def remove(self, subject: str, ix: str) -> None:
        """Take ``ix`` off its subject's index (idempotent)."""

        def decide(index: Index) -> SubjectIndexed | None:
            if ix not in index.ids:
                return None
            return SubjectIndexed(
                subject=subject, ids=[i for i in index.ids if i != ix], changed_at=self._now()
            )

        await self._change_index(subject, decide)

    async def _change_index(self, subject: str, decide: Callable[[Index], SubjectIndexed | None]) -> None:
        async def read(leader: bool) -> Index:
            return await self.index(subject, leader=leader)

        outcome = await decide_and_append(
            self._store,
            self._store.names.subject_index(subject),
            read=read,
            decide=decide,
            event_of=as_event,
            msg_id=lambda _: f"index-{uuid.uuid4().hex}",
            attempts=20,
        )
        if outcome.lost:
            raise kept_changing(f"the index of subject {subject}")


async def first_of(store: EventLog, subject: str) -> Event | None:
    first = await store.first(subject)
    return first.event if first is not None else None


@dataclass(frozen=True, slots=True)
class _Last:
    """A subject's last event and its sequence (0 and None: nothing recorded)."""

    seq: int = 0
    event: Event | None = None


async def _last(store: EventLog, subject: str, leader: bool) -> _Last:
    last = await store.last(subject, leader=leader)
    return _Last(last.seq, last.event) if last is not None else _Last()


async def settle_visit(entries: Entries, visit_id: str, outcome: Outcome) -> bool:
    """Record the next outcome of what a visit resumed or started (once: a visit settles with its
    first outcome), settle every entry it resumed that is still running, and tell a
    conversation's receiver (with the chat its message came from, where the delivery service
    posts the reply). True when this call recorded the outcome."""
    store = entries.store
    subject = store.names.visit(visit_id)
    recorded = await first_of(store, subject)
    if not isinstance(recorded, VisitRecorded):
        log.warning("visit.unknown", visit_id=visit_id)
        return False
    now = entries.now()
    before = await _last(store, subject, True)
    if isinstance(before.event, VisitSettled):
        outcome = before.event.outcome  # settled before (a redelivery): finish its work
    # The entries first: whoever is told the visit's outcome then finds them settled already.
    for ix in recorded.resumed:
        await settle_entry(entries, ix, visit_id, outcome)
    settled = VisitSettled(visit_id=visit_id, outcome=outcome, settled_at=now)

    async def read(leader: bool) -> _Last:
        return await _last(store, subject, leader)

    result = await decide_and_append(
        store,
        subject,
        read=read,
        decide=lambda last: None if isinstance(last.event, VisitSettled) else settled,
        event_of=as_event,
        msg_id=lambda _: f"settled-{visit_id}",
        seed=before,
    )
    if result.lost:
        raise kept_changing(f"visit {visit_id}")
    if recorded.kind == "conversation":
        reply = ConversationReplied(
            subject=recorded.subject,
            visit_id=visit_id,
            run_id=outcome.run_id,
            outcome=outcome,
            replied_at=now,
            channel=recorded.channel,
            chat=recorded.chat,
        )
        await store.append(
            store.names.conversation(recorded.subject), reply, msg_id=f"reply-{visit_id}", expected_seq=None
        )
    return result.event is not None


async def settle_entry(entries: Entries, ix: str, visit_id: str, outcome: Outcome) -> None:
    """A resumed entry takes its visit's outcome: a waiting outcome (finished/failed), or gone
    (parked again)."""
    store = entries.store

    async def read(_leader: bool) -> Parked | _Missing:
        found = await entries.read(ix)
        return found if found is not None else _Missing()

    def decide(parked: Parked | _Missing) -> InteractionSettled | None:
        if isinstance(parked, _Missing):
            return None
        return decide_settle(parked, visit=visit_id, outcome=outcome, now=entries.now())

    done = await decide_and_append(
        store,
        store.names.ix(ix),
        read=read,
        decide=decide,
        event_of=as_event,
        msg_id=lambda _: f"settled-{ix}-{uuid.uuid4().hex}",
    )
    if done.lost:
        raise kept_changing(f"entry {ix}")


@dataclass(frozen=True, slots=True)
class _Missing:
    seq: int = 0


def outcome_of(event: RunEvent, asks: list[Entry] | None = None) -> Outcome | None:
    """The outcome a run event reports to the visits waiting on its execution (None: not an
    outcome — a park on calls alone carries the visits on to the resume)."""
    match event:
        case RunFinished():
            return Outcome(status="finished", run_id=event.run_id, result=event.result)
        case RunFailed():
            return Outcome(status="failed", run_id=event.run_id, error=event.error)
        case RunCancelled():
            return Outcome(status="failed", run_id=event.run_id, error="the run was cancelled")
        case RunParked():
            if all(a.kind == "call" for a in event.asks):
                return None
            return Outcome(status="parked", run_id=event.run_id, asks=asks or None)
        case _:
            return None


def executing_visits(state: Run) -> list[str]:
    """The visits waiting on the execution a run's last event says is running (or parked on
    calls alone)."""
    last = state.last
    if isinstance(last, RunStarted):
        return list(last.visits)
    if last is None or not hasattr(last, "visits"):
        return []
    return list(last.visits)


async def caller_entries(entries: Entries, park: RunParked) -> list[Entry]:
    """The caller asks a park is waiting on, as entries."""
    found: list[Entry] = []
    for ask in park.asks:
        if ask.kind == "call":
            continue
        asked = await entries.asked(ask.interaction_id)
        if asked is not None:
            entry = entry_of(asked, asked)
            if entry is not None:
                found.append(entry)
    return found
