"""The resume service's rules on the in-memory event store, with a manual clock: a park resumes
exactly once, when its last question resolves (docs/aggregates/run.md#resumed-exactly-once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from layby_contracts.commands import Continuation
from layby_contracts.events import (
    EXPIRY_ANSWER,
    InteractionAnswered,
    InteractionRemoved,
    ParkedAsk,
    RunParked,
    RunResumed,
    RunStarted,
)
from layby_domain.clock import ManualClock
from layby_domain.validation import call_interaction_id
from layby_server.store.memstore import MemoryEventStore
from layby_services.resume.parks import Resumer
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN = "0b0c5d4e-6f70-4a81-92a3-b4c5d6e7f801"


def _ask(call: int) -> ParkedAsk:
    return ParkedAsk(
        interaction_id=call_interaction_id(RUN, call),
        call=call,
        question=f"q{call}",
        expiry_at=T0 + timedelta(hours=1),
    )


async def _given_a_park(store: MemoryEventStore, *asks: ParkedAsk) -> None:
    names = store.names
    await store.append(
        names.run(RUN),
        RunStarted(run_id=RUN, flow="release", identity="alice", started_at=T0),
        msg_id="s",
        expected_seq=0,
    )
    for ask in asks:
        await store.append(
            names.ix(ask.interaction_id),
            interaction_asked(
                ask.interaction_id,
                T0,
                question=ask.question,
                answer_format="confirm",
                timeout_at=ask.expiry_at,
                asked_by="alice",
                mode="async",
                expiry_at=ask.expiry_at,
                run_id=RUN,
                call=ask.call,
            ),
            msg_id=f"a{ask.call}",
            expected_seq=0,
        )
    last = await store.last(names.run(RUN))
    assert last is not None
    await store.append(
        names.run(RUN),
        RunParked(run_id=RUN, generation=1, asks=list(asks), parked_at=T0),
        msg_id="p",
        expected_seq=last.seq,
    )


async def _resolve(store: MemoryEventStore, event: InteractionAnswered | InteractionRemoved) -> None:
    subject = store.names.ix(event.interaction_id)
    last = await store.last(subject)
    assert last is not None
    await store.append(subject, event, msg_id=f"r-{event.interaction_id}", expected_seq=last.seq)


def _answered(ask: ParkedAsk, answer: object) -> InteractionAnswered:
    return InteractionAnswered(
        interaction_id=ask.interaction_id,
        group_id="g",
        answered_by="bob",
        answered_at=T0,
        answer=answer,
        run_id=RUN,
    )


async def _continuations(store: MemoryEventStore) -> list[Continuation]:
    found = []
    for generation in (0, 1, 2):
        raw = store.last_payload(store.names.continuation("release", RUN, generation))
        if raw is not None:
            found.append(msgspec.json.decode(raw, type=Continuation))
    return found


@pytest.fixture
def store() -> MemoryEventStore:
    return MemoryEventStore(clock=ManualClock(T0))


async def test_a_park_with_a_pending_question_does_not_resume(store: MemoryEventStore) -> None:
    """Until its last question resolves, a park stays parked, however often it is evaluated."""
    first, second = _ask(0), _ask(1)
    await _given_a_park(store, first, second)
    resumer = Resumer(store, ManualClock(T0))  # type: ignore[arg-type]
    await _resolve(store, _answered(first, True))
    for _ in range(3):
        await resumer.evaluate(RUN)
    last = await store.last(store.names.run(RUN))
    assert last is not None
    assert isinstance(last.event, RunParked)


async def test_the_last_resolution_resumes_once_with_every_answer(store: MemoryEventStore) -> None:
    """The park resumes once; a removed question resolves like an expiry; the continuation of
    that resume is published once however many evaluations race."""
    first, second = _ask(0), _ask(1)
    await _given_a_park(store, first, second)
    resumer = Resumer(store, ManualClock(T0))  # type: ignore[arg-type]
    await _resolve(store, _answered(first, "yes"))
    await _resolve(
        store,
        InteractionRemoved(
            interaction_id=second.interaction_id, group_id="g", reason="cancelled", removed_at=T0
        ),
    )
    for _ in range(3):
        await resumer.evaluate(RUN)
    last = await store.last(store.names.run(RUN))
    assert last is not None
    resumed = last.event
    assert isinstance(resumed, RunResumed)
    assert resumed.generation == 1
    assert resumed.answers["0"].answer == "yes"
    assert (resumed.answers["1"].answer, resumed.answers["1"].answered_by) == (
        EXPIRY_ANSWER,
        "system:cancelled",
    )
    conts = await _continuations(store)
    assert [c.generation for c in conts] == [1]
    assert conts[0].resume_id == f"{RUN}:1"
    assert conts[0].identity == "alice"
