"""A run's timeline arranged from its events (docs/doors/runs.md#the-timeline): given a run's
events, steps and questions, the entries come in time order with the wait before each, a retry is
said as one, a sensitive answer never shows, and a failure carries its error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from msgspec import UNSET

from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    ParkedAsk,
    RunFailed,
    RunParked,
    RunResumed,
    RunStarted,
    StepRecorded,
    StepResult,
)
from layby_domain.timeline import asked_ids, timeline_of

pytestmark = pytest.mark.unit

T0 = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)
RUN = "2b8f1d8e-8c1e-4f7e-9a51-3f1f0f4c1a2b"
IX = "6f1c3a52-4f8e-4c39-9d53-0b4a3e1b2c7d"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run_events() -> list[object]:
    return [
        RunStarted(run_id=RUN, flow="release", identity="ops", started_at=at(0)),
        RunParked(
            run_id=RUN,
            generation=0,
            asks=[
                ParkedAsk(interaction_id=IX, call=0, question="PIN?", expiry_at=at(600)),
                ParkedAsk(interaction_id="child", call=1, question="sub", expiry_at=None, kind="call"),
            ],
            parked_at=at(2),
        ),
        RunResumed(run_id=RUN, generation=1, resume_id="r1", resumed_at=at(62)),
        RunFailed(run_id=RUN, generation=1, error="ValueError: no", failed_at=at(63)),
        RunResumed(run_id=RUN, generation=2, resume_id="r2", resumed_at=at(100), retried_by="ops"),
    ]


def question() -> list[tuple[int, object]]:
    asked = InteractionAsked(
        interaction_id=IX,
        group_id="g",
        question="PIN?",
        answer_format="text",
        created_at=at(1),
        timeout_at=at(600),
        sensitive=True,
        audience="alice",
        asked_by="ops",
        run_id=RUN,
    )
    answered = InteractionAnswered(
        interaction_id=IX, group_id="g", answered_by="alice", answered_at=at(60), sensitive=True, via="inbox"
    )
    return [(1, asked), (2, answered)]


def test_the_entries_come_in_time_order_with_the_wait_before_each() -> None:
    step = StepRecorded(
        run_id=RUN, generation=0, call=0, step=StepResult(name="prepare"), steps={}, recorded_at=at(0.5)
    )
    entries = timeline_of(run_events(), [step], {IX: question()})  # type: ignore[arg-type]
    assert [(e.kind, e.after_ms) for e in entries] == [
        ("started", 0),
        ("step", 500),
        ("asked", 500),
        ("parked", 1000),
        ("answered", 58000),
        ("resumed", 2000),
        ("failed", 1000),
        ("retried", 37000),
    ]
    assert entries[2].detail == "to alice" and entries[2].question == "PIN?"
    assert entries[6].error == "ValueError: no"
    assert entries[7].by == "ops"


def test_a_sensitive_answer_never_shows_and_only_questions_are_followed() -> None:
    entries = timeline_of(run_events(), [], {IX: question()})  # type: ignore[arg-type]
    answered = next(e for e in entries if e.kind == "answered")
    assert (answered.by, answered.via) == ("alice", "inbox")
    assert answered.answer is UNSET
    assert asked_ids(run_events()) == [IX]  # a called child run is its own run
