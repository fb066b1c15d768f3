"""The run aggregate's rules, given/when/then, without I/O (docs/aggregates/run.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import pytest

from layby_contracts import events
from layby_contracts.errors import Conflict, RunCancelledError
from layby_domain.run import (
    Run,
    Steps,
    checkpoint,
    decide_close_steps,
    decide_end,
    decide_park,
    decide_resume,
    decide_step,
    evolve,
    is_current,
    resolution,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN = "11111111-2222-4333-8444-555555555555"
ASK = events.ParkedAsk(interaction_id="ix-0", call=0, question="Ship?", expiry_at=NOW)
ASK2 = events.ParkedAsk(interaction_id="ix-1", call=1, question="Window?", expiry_at=NOW)


def given(*log: events.RunEvent) -> Run:
    state = Run()
    for seq, event in enumerate(log, start=1):
        state = evolve(state, event, seq)
    return state


STARTED = events.RunStarted(run_id=RUN, flow="release", identity="alice", started_at=NOW)
PARKED = events.RunParked(run_id=RUN, generation=1, asks=[ASK, ASK2], parked_at=NOW)
RESUMED = events.RunResumed(run_id=RUN, generation=1, resume_id=f"{RUN}:1", resumed_at=NOW)
NO_STEPS = Steps()


def park(state: Run, generation: int, steps: Steps = NO_STEPS) -> events.RunParked | None:
    """Park on ``ASK`` as ``generation``."""
    return decide_park(
        state, steps=steps, generation=generation, asks=[ASK], answers={}, now=NOW, resume_id=None
    )


def end(
    state: Run,
    generation: int,
    outcome: Literal["finished", "failed"],
    steps: Steps = NO_STEPS,
    **detail: Any,
) -> events.RunFinished | events.RunFailed | None:
    return decide_end(
        state, steps=steps, generation=generation, outcome=outcome, now=NOW, resume_id=None, **detail
    )


def record(
    state: Run, generation: int, call: int, step: events.StepResult, steps: Steps = NO_STEPS
) -> events.StepRecorded | events.StepResult:
    return decide_step(
        state, steps=steps, generation=generation, call=call, step=step, now=NOW, resume_id=None
    )


def test_status_follows_the_last_event() -> None:
    """absent → running → parked → running → finished, and the executing generation with it."""
    assert (given().status, given().executing) == ("absent", None)
    assert (given(STARTED).status, given(STARTED).executing) == ("running", 0)
    assert (given(STARTED, PARKED).status, given(STARTED, PARKED).executing) == ("parked", None)
    assert (given(STARTED, PARKED, RESUMED).executing, given(STARTED, PARKED, RESUMED).seq) == (1, 3)
    done = events.RunFinished(run_id=RUN, generation=1, finished_at=NOW)
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
    event = park(given(STARTED), 1)
    assert isinstance(event, events.RunParked)
    assert (event.run_id, event.generation, event.asks) == (RUN, 1, [ASK])
    assert park(given(STARTED, PARKED), 1) is None
    with pytest.raises(Conflict, match="another execution of this run already moved it on"):
        park(given(STARTED, PARKED), 2)


def test_an_end_is_recorded_once_by_the_executing_generation() -> None:
    """The executing generation finishes or fails the run; a repeated end is a retry."""
    finished = end(given(STARTED), 0, "finished", result=7)
    assert isinstance(finished, events.RunFinished)
    assert finished.result == 7
    failed = end(given(STARTED), 0, "failed", error="boom", attempts=5)
    assert isinstance(failed, events.RunFailed)
    assert (failed.error, failed.attempts) == ("boom", 5)
    ended = given(STARTED, events.RunFinished(run_id=RUN, generation=0, finished_at=NOW))
    assert end(ended, 0, "finished") is None
    with pytest.raises(Conflict):
        end(given(STARTED, PARKED), 0, "finished")


def test_a_park_resumes_only_when_its_last_question_resolves() -> None:
    """One pending ask keeps the run parked; when all resolve, one RunResumed with every answer."""
    answered = events.InteractionAnswered(
        interaction_id="ix-0", group_id="g", answered_by="bob", answered_at=NOW, answer=True
    )
    first = resolution(ASK, answered)
    assert first == events.Resolution(interaction_id="ix-0", question="Ship?", answer=True, answered_by="bob")
    state = given(STARTED, PARKED)
    assert decide_resume(state, [first, None], now=NOW, resume_id=f"{RUN}:1") is None
    removed = events.InteractionRemoved(
        interaction_id="ix-1", group_id="g", reason="delivery_failed", removed_at=NOW, detail="bridge 400"
    )
    second = resolution(ASK2, removed)
    assert second is not None
    assert (second.answer, second.answered_by, second.detail) == (
        events.EXPIRY_ANSWER,
        "system:delivery_failed",
        "bridge 400",
    )
    resumed = decide_resume(state, [first, second], now=NOW, resume_id=f"{RUN}:1")
    assert isinstance(resumed, events.RunResumed)
    assert (resumed.generation, sorted(resumed.answers)) == (1, ["0", "1"])
    assert decide_resume(given(STARTED), [], now=NOW, resume_id="x") is None


CHARGED = events.StepResult(name="charge", result={"receipt": "r-1"})
MAILED = events.StepResult(name="mail", result=None)


def test_the_first_record_of_a_step_call_is_the_one_every_execution_gets() -> None:
    """A call recorded already (in the generation's starting checkpoint or by the generation
    itself) is returned, not recorded again; a new call joins the generation's record."""
    resumed = events.RunResumed(
        run_id=RUN, generation=1, resume_id=f"{RUN}:1", resumed_at=NOW, steps={"0": CHARGED}
    )
    state = given(STARTED, PARKED, resumed)
    other = events.StepResult(name="charge", result={"receipt": "r-2"})
    assert record(state, 1, 0, other) == CHARGED
    mine = Steps(seq=7, recorded={"3": MAILED})
    assert record(state, 1, 3, other, mine) == MAILED
    recorded = decide_step(state, steps=mine, generation=1, call=4, step=other, now=NOW, resume_id="r")
    assert isinstance(recorded, events.StepRecorded)
    assert (recorded.call, recorded.generation, recorded.steps) == (4, 1, {"3": MAILED, "4": other})


def test_a_step_of_an_execution_that_is_not_current_is_refused() -> None:
    """Once the run parked, ended or was cancelled, a late execution records nothing new."""
    with pytest.raises(Conflict, match="moved it on"):
        record(given(STARTED, PARKED), 0, 1, MAILED)
    cancelled = events.RunCancelled(run_id=RUN, generation=0, by="ops", cancelled_at=NOW, was="running")
    with pytest.raises(RunCancelledError):
        record(given(STARTED, cancelled), 0, 1, MAILED)


def test_a_park_or_an_end_carries_every_step_recorded_so_far() -> None:
    """The checkpoint joins the generation's starting steps and the steps it recorded since, so
    the next generation (or a retry) starts from all of them."""
    resumed = events.RunResumed(
        run_id=RUN, generation=1, resume_id=f"{RUN}:1", resumed_at=NOW, steps={"0": CHARGED}
    )
    state = given(STARTED, PARKED, resumed)
    since = Steps(seq=3, recorded={"2": MAILED})
    parked = park(state, 2, since)
    assert isinstance(parked, events.RunParked) and parked.steps == {"0": CHARGED, "2": MAILED}
    failed = end(state, 1, "failed", since, error="x")
    assert isinstance(failed, events.RunFailed) and failed.steps == {"0": CHARGED, "2": MAILED}
    finished = end(state, 1, "finished", since)
    assert isinstance(finished, events.RunFinished) and finished.step_count == 2


def test_a_run_recorded_before_steps_moved_keeps_its_steps() -> None:
    """A log that ends with a step recorded on the run's own subject (the earlier layout) is a
    running run whose checkpoint holds those steps."""
    legacy = events.RunStepRecorded(
        run_id=RUN, generation=0, call=0, step=CHARGED, steps={"0": CHARGED}, recorded_at=NOW
    )
    state = given(STARTED, legacy)
    assert (state.status, state.executing) == ("running", 0)
    assert checkpoint(state, Steps(seq=1, recorded={"1": MAILED})) == {"0": CHARGED, "1": MAILED}
    assert record(state, 0, 0, MAILED) == CHARGED


def test_a_cancel_closes_the_running_executions_step_record_and_its_next_step_is_refused() -> None:
    """Cancelling a running run closes its executing generation's step record (repeating what
    it holds); a closed record refuses new steps but still returns recorded ones."""
    cancelled = events.RunCancelled(run_id=RUN, generation=0, by="ops", cancelled_at=NOW, was="running")
    open_record = Steps(seq=4, recorded={"0": CHARGED})
    closing = decide_close_steps(cancelled, open_record, now=NOW)
    assert isinstance(closing, events.StepsClosed) and closing.steps == {"0": CHARGED}
    closed = Steps.of(5, closing)
    assert closed.closed and closed.recorded == {"0": CHARGED}
    assert decide_close_steps(cancelled, closed, now=NOW) is None
    parked = events.RunCancelled(run_id=RUN, generation=1, by="ops", cancelled_at=NOW, was="parked")
    assert decide_close_steps(parked, Steps(), now=NOW) is None
    running = given(STARTED)  # the state a process remembered from before the cancel
    with pytest.raises(RunCancelledError):
        record(running, 0, 1, MAILED, closed)
    assert record(running, 0, 0, MAILED, closed) == CHARGED
