"""Caller asks' entries and visits, decided without I/O and run on the in-memory event store
(docs/caller-asks.md#parks-on-the-subject, #resume-take-and-cancel, #waiting-outcomes, #expiry)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from layby_contracts.commands import Explicit
from layby_contracts.doors import DoorSpec, Entry, Outcome
from layby_contracts.errors import BadInput, Conflict, NotFound
from layby_contracts.events import (
    EXPIRY_ANSWER,
    DoorSaved,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionSettled,
    InteractionTaken,
)
from layby_contracts.subjects import Names
from layby_domain.caller import (
    Parked,
    decide_deadline,
    decide_drop,
    decide_resume,
    decide_settle,
    decide_take,
    entry_of,
)
from layby_domain.clock import ManualClock
from layby_server.auth import Principal
from layby_server.store.memstore import MemoryEventStore
from layby_server.write.parked import Entries, settle_visit
from layby_server.write.visits import Visitor
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
IX = "0b0c5d4e-6f70-4a81-92a3-b4c5d6e7f801"
RUN = "1a2b3c4d-5e6f-4a81-92a3-b4c5d6e7f801"
OPS = Principal(identity="ops", role="operator")


def asked(*, payload: object = None, on_expiry: str = "kill", ix: str = IX) -> InteractionAsked:
    return interaction_asked(
        ix,
        NOW,
        group_id=ix,
        question="proceed?",
        answer_format="confirm",
        timeout_at=NOW + timedelta(minutes=5),
        asked_by="alice",
        mode="async",
        expiry_at=NOW + timedelta(minutes=5),
        run_id=RUN,
        call=0,
        to="caller",
        subject="s",
        payload=payload,
        on_expiry=on_expiry,
        chain=["agent", "tool"],
    )


def test_an_asking_entry_shows_its_question_and_leaves_unset_fields_absent() -> None:
    """Given a caller ask with no payload, its entry carries its addressing and question, and no
    ``payload`` key at all (absent, never null)."""
    entry = entry_of(asked(), asked())
    assert entry is not None
    assert msgspec.to_builtins(entry) == {
        "id": IX,
        "status": "asking",
        "to": "caller",
        "asked_by": ["agent", "tool"],
        "question": "proceed?",
        "answer_format": "confirm",
        "group_id": IX,
    }


def test_an_entry_moves_from_asking_to_running_to_a_waiting_outcome_and_then_leaves() -> None:
    """Given an entry, a resume makes it running, a settled result a finished waiting outcome that
    shows only its id and status, and a take removes it from the subject."""
    ask = asked(payload={"n": 1})
    resumed = decide_resume(Parked(ask, ask, 1), IX, payload=True, by="door:x", visit="v", now=NOW)
    assert (resumed.answer, resumed.visit, resumed.to) == (True, "v", "caller")
    assert entry_of(ask, resumed) == Entry(id=IX, status="running")
    settled = decide_settle(
        Parked(ask, resumed, 2), visit="v", outcome=Outcome(status="finished", result=7), now=NOW
    )
    assert settled is not None and settled.result == 7
    assert entry_of(ask, settled) == Entry(id=IX, status="finished")
    taken = decide_take(Parked(ask, settled, 3), IX, by="door:x", visit="w", now=NOW)
    assert entry_of(ask, taken) is None


def test_only_an_asking_entry_can_be_resumed_and_only_a_waiting_outcome_taken() -> None:
    """Resuming a running entry, or taking an asking one, is refused naming the entry's state."""
    ask = asked()
    running = InteractionAnswered(
        interaction_id=IX, group_id=IX, answered_by="x", answered_at=NOW, to="caller"
    )
    with pytest.raises(Conflict, match=f"entry {IX} is running; only an asking entry can be resumed"):
        decide_resume(Parked(ask, running, 2), IX, payload=1, by="x", visit="v", now=NOW)
    with pytest.raises(Conflict, match=f"entry {IX} is asking; only a finished or failed waiting outcome"):
        decide_take(Parked(ask, ask, 1), IX, by="x", visit="v", now=NOW)
    with pytest.raises(NotFound, match="is not parked on this subject"):
        decide_take(None, IX, by="x", visit="v", now=NOW)


def test_a_visit_settles_only_the_entries_it_resumed() -> None:
    """An outcome settles an entry only when that visit resumed it (another visit's resume, or
    one settled already, is left alone)."""
    ask = asked()
    by_other = InteractionAnswered(
        interaction_id=IX, group_id=IX, answered_by="x", answered_at=NOW, to="caller", visit="other"
    )
    assert (
        decide_settle(Parked(ask, by_other, 2), visit="v", outcome=Outcome(status="parked"), now=NOW) is None
    )


def test_a_deadline_kills_by_default_and_resumes_with_the_marker_on_request() -> None:
    """At ``expiry_at`` an asking entry is removed (``kill``) or answered with the reserved expiry
    marker (``resume``); before it, or once resumed, nothing happens."""
    late = NOW + timedelta(minutes=6)
    killed = decide_deadline(Parked(asked(), asked(), 1), now=late)
    assert isinstance(killed, InteractionRemoved) and (killed.reason, killed.to) == ("timeout", "caller")
    resumed = decide_deadline(Parked(asked(on_expiry="resume"), asked(on_expiry="resume"), 1), now=late)
    assert isinstance(resumed, InteractionAnswered) and resumed.answer == EXPIRY_ANSWER
    assert decide_deadline(Parked(asked(), asked(), 1), now=NOW) is None


def test_a_waiting_outcome_is_dropped_by_an_event_only_past_retention() -> None:
    """A waiting outcome older than the retention is dropped by ``interaction.removed`` with
    reason ``dropped``; a younger one, or a parked settlement, is kept."""
    ask = asked()
    settled = InteractionSettled(interaction_id=IX, group_id=IX, outcome="finished", settled_at=NOW)
    week = timedelta(days=7)
    assert decide_drop(Parked(ask, settled, 3), now=NOW + timedelta(days=6), retention=week) is None
    dropped = decide_drop(Parked(ask, settled, 3), now=NOW + timedelta(days=8), retention=week)
    assert isinstance(dropped, InteractionRemoved) and dropped.reason == "dropped"


@pytest.fixture
def store() -> MemoryEventStore:
    return MemoryEventStore(Names("mem"), clock=ManualClock(NOW))


async def park(store: MemoryEventStore, entries: Entries, ix: str = IX) -> None:
    await store.append(store.names.ix(ix), asked(ix=ix), msg_id=f"a-{ix}", expected_seq=0)
    await entries.add("s", ix)


async def test_of_visits_racing_to_resume_one_entry_exactly_one_wins(store: MemoryEventStore) -> None:
    """Given one asking entry, when several visits resume it at once, exactly one records the
    answer and the others are refused; the log holds one answer."""
    entries = Entries(store, lambda: NOW)
    await park(store, entries)
    visitor = Visitor(store, entries, lambda: NOW)
    results = await asyncio.gather(
        *(
            visitor.visit(
                visit_id=f"v{i}",
                kind="tool",
                by=OPS,
                subject="s",
                explicit=Explicit(resumes=[{"id": IX, "payload": i}]),
            )
            for i in range(5)
        ),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    assert len(won) == 1
    assert all(isinstance(r, Conflict | BadInput) for r in results if isinstance(r, BaseException))
    last = await store.last(store.names.ix(IX))
    assert last is not None and isinstance(last.event, InteractionAnswered)


async def test_a_waiting_outcome_is_taken_once_and_then_leaves_the_subject(store: MemoryEventStore) -> None:
    """Given a resumed entry whose visit settled with a result, the next visit takes it (getting
    the result) and a second take finds nothing to take."""
    entries = Entries(store, lambda: NOW)
    await park(store, entries)
    visitor = Visitor(store, entries, lambda: NOW)
    await visitor.visit(
        visit_id="v1", kind="tool", by=OPS, subject="s", explicit=Explicit(resumes=[{"id": IX, "payload": 1}])
    )
    await settle_visit(entries, "v1", Outcome(status="finished", result={"ok": True}))
    assert await entries.entries("s") == [Entry(id=IX, status="finished")]
    took = await visitor.visit(visit_id="v2", kind="tool", by=OPS, subject="s", explicit=Explicit(takes=[IX]))
    assert [msgspec.to_builtins(t) for t in took.taken] == [
        {"id": IX, "status": "finished", "result": {"ok": True}}
    ]
    last = await store.last(store.names.ix(IX))
    assert last is not None and isinstance(last.event, InteractionTaken)
    with pytest.raises(BadInput, match="not parked on this subject"):
        await visitor.visit(visit_id="v3", kind="tool", by=OPS, subject="s", explicit=Explicit(takes=[IX]))


async def test_a_door_with_no_start_expr_starts_its_default_kwargs(store: MemoryEventStore) -> None:
    """Given a hook with ``kwargs`` and no programs, a visit starts the target on those kwargs,
    on the door's subject, carrying the visit to the run's next outcome."""
    entries = Entries(store, lambda: NOW)
    spec = DoorSpec(kind="hook", target="agent", kwargs={"a": 1})
    door = DoorSaved(name="deploys", spec=spec, by="ops", saved_at=NOW)
    result = await Visitor(store, entries, lambda: NOW).visit(
        visit_id="v", kind="hook", by=OPS, door=door, input={}
    )
    assert result.action == "start" and result.subject == "door:deploys"
    assert result.run_id is not None
    started = await store.first(store.names.run(result.run_id))
    assert started is not None
    assert msgspec.structs.asdict(started.event)["input"] == {"a": 1}
    assert msgspec.structs.asdict(started.event)["visits"] == ["v"]
