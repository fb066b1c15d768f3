"""The run aggregate's rules, given/when/then, without I/O (docs/aggregates/run.md)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from layby_contracts.errors import Conflict
from layby_contracts.events import (
    EXPIRY_ANSWER,
    InteractionAnswered,
    InteractionRemoved,
    ParkedAsk,
    Resolution,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunResumed,
    RunStarted,
)
from layby_domain.run import Run, decide_end, decide_park, decide_resume, evolve, is_current, resolution

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN = "11111111-2222-4333-8444-555555555555"
ASK = ParkedAsk(interaction_id="ix-0", call=0, question="Ship?", expiry_at=NOW)
ASK2 = ParkedAsk(interaction_id="ix-1", call=1, question="Window?", expiry_at=NOW)


def given(*events: RunEvent) -> Run:
    state = Run()
    for seq, event in enumerate(events, start=1):
        state = evolve(state, event, seq)
    return state


STARTED = RunStarted(run_id=RUN, flow="release", identity="alice", started_at=NOW)
PARKED = RunParked(run_id=RUN, generation=1, asks=[ASK, ASK2], parked_at=NOW)
RESUMED = RunResumed(run_id=RUN, generation=1, resume_id=f"{RUN}:1", resumed_at=NOW)


def test_status_follows_the_last_event() -> None:
    """absent → running → parked → running → finished, and the executing generation with it."""
    assert (given().status, given().executing) == ("absent", None)
    assert (given(STARTED).status, given(STARTED).executing) == ("running", 0)
    assert (given(STARTED, PARKED).status, given(STARTED, PARKED).executing) == ("parked", None)
    assert (given(STARTED, PARKED, RESUMED).executing, given(STARTED, PARKED, RESUMED).seq) == (1, 3)
    done = RunFinished(run_id=RUN, generation=1, finished_at=NOW)
    assert given(STARTED, PARKED, RESUMED, done).status == "finished"


def test_only_the_current_generation_executes() -> None:
    """A continuation runs only while its resume (or the start, for generation 0) is last."""
    assert is_current(given(), 0) is None
    assert is_current(given(STARTED), 0) is True
    assert is_current(given(STARTED, PARKED), 0) is False
    assert is_current(given(STARTED, PARKED, RESUMED), 1) is True
    assert is_current(given(STARTED, PARKED, RESUMED), 0) is False


def test_the_executing_generation_parks_once_and_a_retry_is_recognised() -> None:
    """Generation g-1 parks as g; the same park again is a retry; any other is a conflict."""
    event = decide_park(given(STARTED), generation=1, asks=[ASK], answers={}, now=NOW, resume_id=None)
    assert isinstance(event, RunParked)
    assert (event.run_id, event.generation, event.asks) == (RUN, 1, [ASK])
    assert (
        decide_park(given(STARTED, PARKED), generation=1, asks=[ASK], answers={}, now=NOW, resume_id=None)
        is None
    )
    with pytest.raises(Conflict, match="another execution of this run already moved it on"):
        decide_park(given(STARTED, PARKED), generation=2, asks=[ASK], answers={}, now=NOW, resume_id=None)


def test_an_end_is_recorded_once_by_the_executing_generation() -> None:
    """The executing generation finishes or fails the run; a repeated end is a retry."""
    finished = decide_end(given(STARTED), generation=0, outcome="finished", result=7, now=NOW, resume_id=None)
    assert isinstance(finished, RunFinished)
    assert finished.result == 7
    failed = decide_end(
        given(STARTED), generation=0, outcome="failed", error="boom", attempts=5, now=NOW, resume_id=None
    )
    assert isinstance(failed, RunFailed)
    assert (failed.error, failed.attempts) == ("boom", 5)
    ended = given(STARTED, RunFinished(run_id=RUN, generation=0, finished_at=NOW))
    assert decide_end(ended, generation=0, outcome="finished", now=NOW, resume_id=None) is None
    with pytest.raises(Conflict):
        decide_end(given(STARTED, PARKED), generation=0, outcome="finished", now=NOW, resume_id=None)


def test_a_park_resumes_only_when_its_last_question_resolves() -> None:
    """One pending ask keeps the run parked; when all resolve, one RunResumed with every answer."""
    answered = InteractionAnswered(
        interaction_id="ix-0", group_id="g", answered_by="bob", answered_at=NOW, answer=True
    )
    first = resolution(ASK, answered)
    assert first == Resolution(interaction_id="ix-0", question="Ship?", answer=True, answered_by="bob")
    state = given(STARTED, PARKED)
    assert decide_resume(state, [first, None], now=NOW, resume_id=f"{RUN}:1") is None
    removed = InteractionRemoved(
        interaction_id="ix-1", group_id="g", reason="delivery_failed", removed_at=NOW, detail="bridge 400"
    )
    second = resolution(ASK2, removed)
    assert second is not None
    assert (second.answer, second.answered_by, second.detail) == (
        EXPIRY_ANSWER,
        "system:delivery_failed",
        "bridge 400",
    )
    resumed = decide_resume(state, [first, second], now=NOW, resume_id=f"{RUN}:1")
    assert isinstance(resumed, RunResumed)
    assert (resumed.generation, sorted(resumed.answers)) == (1, ["0", "1"])
    assert decide_resume(given(STARTED), [], now=NOW, resume_id="x") is None
