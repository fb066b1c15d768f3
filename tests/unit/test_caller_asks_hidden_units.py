"""Caller asks are hidden from people: the answer door's decision and the stream's frames, without I/O
(docs/caller-asks.md#hidden-from-the-inbox)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from layby_contracts import events
from layby_contracts.doors import Outcome
from layby_contracts.errors import NotFound
from layby_domain.interaction import (
    NOT_FOUND,
    Append,
    Interaction,
    decide_answer,
    decide_expire,
    decide_remove,
    evolve,
    of_caller_ask,
)
from layby_server.auth import Principal
from layby_server.store.eventstore import Stored
from layby_server.write.resolve import state_of
from layby_services.door.cache import AskedCache
from layby_services.door.routes.stream import frame
from tests import samples

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
IX = "0b0c5d4e-6f70-4a81-92a3-b4c5d6e7f801"
RUN = "5c3e2f10-0000-4000-8000-000000000001"
OPS = Principal("ops", "operator")


def asked(**overrides: Any) -> events.InteractionAsked:
    return samples.caller_ask(
        overrides.pop("interaction_id", IX), NOW, group_id="g-1", run_id=RUN, **overrides
    )


def answered(to: Any = "caller") -> events.InteractionAnswered:
    return samples.answered(asked(to=to), NOW)


def removed(to: Any = "caller") -> events.InteractionRemoved:
    return samples.removed(asked(to=to), "cancelled", NOW)


def settled(outcome: Any = "finished") -> events.InteractionSettled:
    return samples.settled(asked(), outcome, NOW, result=1)


def taken() -> events.InteractionTaken:
    return samples.taken(asked(), NOW)


def answer(state: Interaction) -> Any:
    return decide_answer(state, by="ops", restricted=False, answer="gold", now=NOW, via="inbox")


def test_the_answer_door_refuses_a_pending_caller_ask_as_not_found() -> None:
    """A pending caller ask is refused exactly as an unknown id is: NotFound, the same message."""
    with pytest.raises(NotFound) as unknown:
        answer(Interaction())
    with pytest.raises(NotFound) as caller:
        answer(evolve(Interaction(), asked(), 1))
    assert caller.value.message == unknown.value.message == NOT_FOUND
    assert caller.value.field == unknown.value.field


@pytest.mark.parametrize("last", [answered(), removed(), settled(), settled("parked"), taken()])
def test_the_answer_door_refuses_a_caller_ask_in_any_later_state_as_not_found(last: events.Event) -> None:
    """Whatever a caller ask's last event (resumed, removed, settled, taken), a person's answer gets the
    same not-found refusal, never the already-answered conflict that would reveal it exists."""
    with pytest.raises(NotFound, match=f"^{NOT_FOUND}$"):
        answer(state_of(Stored(seq=7, event=last)))


def test_an_ordinary_question_is_still_answered() -> None:
    """The refusal is for caller asks only: the same question addressed to a person is answered."""
    decision = answer(evolve(Interaction(), asked(to=None), 1))
    assert isinstance(decision, Append)
    assert isinstance(decision.event, events.InteractionAnswered)
    assert decision.event.to is None


def test_resolutions_decided_on_a_caller_ask_stay_marked_as_the_caller_s() -> None:
    """A removal or an expiry decided on a caller ask carries to='caller', so it stays hidden too."""
    state = evolve(Interaction(), asked(), 1)
    for decision in (decide_remove(state, reason="cancelled", now=NOW), decide_expire(state, now=NOW)):
        assert isinstance(decision, Append)
        assert decision.event.to == "caller"
        assert of_caller_ask(decision.event)


@pytest.mark.parametrize(
    "event", [asked(), answered(), removed(), settled(), settled("failed"), settled("parked"), taken()]
)
def test_no_stream_frame_for_any_event_of_a_caller_ask(event: events.Event) -> None:
    """The stream sends no frame for a caller ask's asked, answered, removed, settled or taken event."""
    assert of_caller_ask(event)
    assert frame(5, events.encode_event(event), OPS) is None
    assert frame(5, events.encode_event(event), Principal("alice", "user")) is None


@pytest.mark.parametrize(
    "event",
    [
        events.SubjectIndexed(subject="orders-42", ids=[IX], changed_at=NOW),
        events.DoorDeleted(name="orders", by="ops", deleted_at=NOW),
        events.ScheduleFired(name="nightly", tick=NOW, visit_id="v-1", fired_at=NOW),
        events.VisitSettled(visit_id="v-1", outcome=Outcome(status="finished", result=1), settled_at=NOW),
    ],
)
def test_no_stream_frame_for_door_visit_or_subject_events(event: events.Event) -> None:
    """Door, visit and subject events are no part of the interactions stream."""
    assert frame(5, events.encode_event(event), OPS) is None


def test_ordinary_questions_keep_their_frames() -> None:
    """The same events without to='caller' still make their add, answered and removed frames."""
    sample = [asked(to=None), answered(to=None), removed(to=None)]
    names = [frame(5, events.encode_event(ev), OPS) for ev in sample]
    assert [out.split(b"\n")[1] if out else None for out in names] == [
        b"event: interaction.add",
        b"event: interaction.answered",
        b"event: interaction.removed",
    ]


def test_the_door_never_caches_a_caller_ask() -> None:
    """The answer door's asked-event cache skips caller asks: they are never answered there."""
    cache = AskedCache()
    cache.observe([Stored(seq=1, event=asked()), Stored(seq=2, event=asked(interaction_id="other", to=None))])
    assert cache.get(IX) is None
    assert cache.get("other") is not None
