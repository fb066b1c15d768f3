"""The run aggregate: one run's life, decided without I/O (docs/aggregates/run.md).

A run is started (generation 0 executes), then alternates between parked (generation g waits for
its questions) and resumed (generation g executes again), until it finishes or fails. Every
event is appended expecting the previous one's sequence, so exactly one execution moves a run
on. This module is the one place that reads a run's state from its events: the ask service
decides parks and ends with it, the resume service resumes with it, and the worker asks it
whether a continuation is the one to execute now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, NoReturn, assert_never

import msgspec

from layby_contracts.errors import Conflict, NotFound, RunCancelledError
from layby_contracts.events import (
    EXPIRY_ANSWER,
    InteractionAnswered,
    InteractionRemoved,
    Moved,
    ParkedAsk,
    Resolution,
    RunCancelled,
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunResumed,
    RunStarted,
    RunStepRecorded,
    StepRecorded,
    StepResult,
    StepsClosed,
)

RunStatus = Literal["absent", "running", "parked", "finished", "failed", "cancelled"]
MOVED_ON = "another execution of this run already moved it on"
CANCELLED = "the run was cancelled"


@dataclass(frozen=True, slots=True)
class Run:
    """A run as far as its last event: ``seq`` is that event's stream sequence (the expected
    sequence of the next append)."""

    seq: int = 0
    last: RunEvent | None = None

    @property
    def status(self) -> RunStatus:
        match self.last:
            case None:
                return "absent"
            case RunStarted() | RunResumed() | RunStepRecorded():
                return "running"
            case RunParked():
                return "parked"
            case RunFinished():
                return "finished"
            case RunFailed():
                return "failed"
            case RunCancelled():
                return "cancelled"
            case _:
                assert_never(self.last)

    @property
    def executing(self) -> int | None:
        """The generation being executed now, or None when no execution may run."""
        match self.last:
            case RunStarted():
                return 0
            case RunResumed() | RunStepRecorded():
                return self.last.generation
            case _:
                return None

    @property
    def steps(self) -> dict[str, StepResult]:
        """Every step recorded so far (the last event carries the checkpoint)."""
        match self.last:
            case RunParked() | RunResumed() | RunStepRecorded() | RunFailed():
                return self.last.steps
            case _:
                return {}

    @property
    def answers(self) -> dict[str, Resolution]:
        """The answers the executing (or failed, or parked) generation started from."""
        match self.last:
            case RunParked() | RunResumed() | RunStepRecorded() | RunFailed():
                return self.last.answers
            case _:
                return {}

    @property
    def generation(self) -> int:
        last = self.last
        return 0 if last is None or isinstance(last, RunStarted) else last.generation

    @property
    def version(self) -> int:
        """The version of its flow the run is on: every event that can be last while it lives
        carries it (docs/versions.md)."""
        match self.last:
            case RunStarted() | RunParked() | RunResumed() | RunFailed():
                return self.last.version
            case _:
                return 1


@dataclass(frozen=True, slots=True)
class Steps:
    """The steps one execution generation of a run recorded, as far as the last message of its
    step subject: ``seq`` is that message's sequence (the expected sequence of the next record,
    0 while the generation recorded none)."""

    seq: int = 0
    recorded: dict[str, StepResult] = field(default_factory=dict)
    closed: bool = False
    """The run was cancelled while this generation executed (``StepsClosed``)."""

    @classmethod
    def of(cls, seq: int, event: object) -> Steps:
        if isinstance(event, StepRecorded):
            return cls(seq=seq, recorded=event.steps)
        if isinstance(event, StepsClosed):
            return cls(seq=seq, recorded=event.steps, closed=True)
        return cls(seq=seq)


def checkpoint(state: Run, steps: Steps) -> dict[str, StepResult]:
    """Every step of the run so far: the executing generation's starting checkpoint and what that
    generation recorded since."""
    return {**state.steps, **steps.recorded} if steps.recorded else state.steps


def evolve(_state: Run, event: RunEvent, seq: int) -> Run:
    """Every run event replaces the one before it: the last event is the state."""
    return Run(seq=seq, last=event)


def is_current(state: Run, generation: int) -> bool | None:
    """Whether the execution of ``generation`` is the one to run now: None when the run's log
    has not caught up yet (nothing recorded), False for a duplicate of an earlier execution."""
    if state.last is None:
        return None
    return state.executing == generation


def decide_park(
    state: Run,
    *,
    steps: Steps,
    generation: int,
    asks: list[ParkedAsk],
    answers: dict[str, Resolution],
    now: datetime,
    resume_id: str | None,
) -> RunParked | None:
    """The execution of ``generation - 1`` parks as ``generation``. None: this very park is
    already recorded (a retry). Raises ``Conflict`` when another execution moved the run on."""
    if state.executing != generation - 1:
        if isinstance(state.last, RunParked) and state.last.generation == generation:
            return None
        _moved_on(state)
    return RunParked(
        run_id=_run_id(state),
        generation=generation,
        asks=asks,
        answers=answers,
        parked_at=now,
        resume_id=resume_id,
        steps=checkpoint(state, steps),
        version=state.version,
    )


def decide_end(
    state: Run,
    *,
    steps: Steps,
    generation: int,
    outcome: Literal["finished", "failed"],
    result: Any = None,
    error: str = "",
    attempts: int = 0,
    now: datetime,
    resume_id: str | None,
) -> RunFinished | RunFailed | None:
    """The execution of ``generation`` finishes or fails the run. None: an end of this
    generation is already recorded (a retry). Raises ``Conflict`` when another execution moved
    the run on."""
    if state.executing != generation:
        if isinstance(state.last, RunFinished | RunFailed) and state.last.generation == generation:
            return None
        _moved_on(state)
    run_id = _run_id(state)
    if outcome == "finished":
        return RunFinished(
            run_id=run_id,
            generation=generation,
            result=result,
            finished_at=now,
            resume_id=resume_id,
            step_count=len(checkpoint(state, steps)),
        )
    return RunFailed(
        run_id=run_id,
        generation=generation,
        error=error,
        attempts=attempts,
        failed_at=now,
        resume_id=resume_id,
        answers=state.answers,
        steps=checkpoint(state, steps),
        version=state.version,
    )


def resolution(ask: ParkedAsk, event: object) -> Resolution | None:
    """How one parked ask resolved, from its question's last event; None while it is pending.
    A removed question can never be answered, so it resolves like an expiry (the reserved
    marker), answered by ``system:<reason>``."""
    if isinstance(event, InteractionAnswered):
        return Resolution(
            interaction_id=ask.interaction_id,
            question=ask.question,
            answer=event.answer,
            answered_by=event.answered_by,
            params=event.params,
        )
    if isinstance(event, InteractionRemoved):
        return Resolution(
            interaction_id=ask.interaction_id,
            question=ask.question,
            answer=EXPIRY_ANSWER,
            answered_by=f"system:{event.reason}",
            detail=event.detail,
        )
    return None


def decide_resume(
    state: Run,
    resolved: list[Resolution | None],
    *,
    now: datetime,
    resume_id: str,
    visits: list[str] | None = None,
) -> RunResumed | None:
    """Resume a parked run once every one of its asks (in ``park.asks`` order) has resolved;
    None while the run is not parked or a question is still pending. ``visits``: the visits
    that resumed its caller asks (docs/caller-asks.md#resume-take-and-cancel); a park on calls
    alone also carries its own on."""
    park = state.last
    if not isinstance(park, RunParked):
        return None
    answers = dict(park.answers)
    for ask, found in zip(park.asks, resolved, strict=True):
        if found is None:
            return None  # still pending: its own resolution triggers the next evaluation
        answers[str(ask.call)] = found
    return RunResumed(
        run_id=park.run_id,
        generation=park.generation,
        resume_id=resume_id,
        resumed_at=now,
        answers=answers,
        steps=park.steps,
        visits=_merged(park.visits if all(a.kind == "call" for a in park.asks) else [], visits or []),
        version=park.version,
    )


def _merged(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(v for found in lists for v in found))


def decide_step(
    state: Run,
    *,
    steps: Steps,
    generation: int,
    call: int,
    step: StepResult,
    now: datetime,
    resume_id: str | None,
) -> StepRecorded | StepResult:
    """Record the step at ``call`` of execution ``generation`` (docs/aggregates/run.md#steps):
    the ``StepRecorded`` to append (expecting ``steps.seq``), or the ``StepResult`` another
    execution recorded for that call first (every execution goes on with that one). Raises
    ``RunCancelledError`` once the run is cancelled, ``Conflict`` when another execution moved
    the run on."""
    recorded = state.steps.get(str(call)) or steps.recorded.get(str(call))
    if recorded is not None:
        return recorded
    if steps.closed:
        raise RunCancelledError(CANCELLED)
    if state.executing != generation:
        _moved_on(state)
    return StepRecorded(
        run_id=_run_id(state),
        generation=generation,
        call=call,
        step=step,
        steps={**steps.recorded, str(call): step},
        recorded_at=now,
        resume_id=resume_id,
    )


def decide_close_steps(cancelled: RunCancelled, steps: Steps, *, now: datetime) -> StepsClosed | None:
    """Close the step record of the execution a cancel stopped; None when there is nothing to
    close (the run was parked, or the record is closed already)."""
    if cancelled.was != "running" or steps.closed:
        return None
    return StepsClosed(
        run_id=cancelled.run_id, generation=cancelled.generation, steps=steps.recorded, closed_at=now
    )


def decide_cancel(state: Run, *, by: str, now: datetime) -> RunCancelled:
    """Cancel a running or parked run. A run that ended cannot be cancelled (``Conflict``)."""
    status = state.status
    if status == "absent":
        raise NotFound("run not found")
    if status not in ("running", "parked"):
        raise Conflict(f"the run is {status}; only a running or parked run can be cancelled")
    return RunCancelled(
        run_id=_run_id(state),
        generation=state.generation,
        by=by,
        cancelled_at=now,
        was="parked" if status == "parked" else "running",
        asks=[a.interaction_id for a in state.last.asks if a.kind == "ask"]
        if isinstance(state.last, RunParked)
        else [],
        visits=list(getattr(state.last, "visits", [])),
    )


def resume_id_of(run_id: str, generation: int) -> str:
    """Stable across redeliveries and workers: a continuation's effects may be keyed by it."""
    return f"{run_id}:{generation}"


def decide_retry(state: Run, *, by: str, now: datetime) -> RunResumed:
    """Execute a failed run again, as the next generation, from the failed execution's checkpoint
    (its answers and recorded steps): nothing before its last step or park runs again."""
    failed = state.last
    if state.status == "absent":
        raise NotFound("run not found")
    if not isinstance(failed, RunFailed):
        raise Conflict(f"the run is {state.status}; only a failed run can be retried")
    generation = failed.generation + 1
    return RunResumed(
        run_id=failed.run_id,
        generation=generation,
        resume_id=resume_id_of(failed.run_id, generation),
        resumed_at=now,
        answers=failed.answers,
        steps=failed.steps,
        retried_by=by,
        version=failed.version,
    )


MOVABLE = "only a parked run, a failed one, or one waiting for a worker can be moved"


def decide_move(
    state: Run, *, version: int, by: str, now: datetime
) -> RunParked | RunResumed | RunFailed | None:
    """Move a run to ``version`` of its flow (docs/versions.md#moving-runs): the run's last event
    again, with the new version and who moved it. A run that is parked keeps waiting for its
    questions; one that resumed and waits for a worker is published again for the new version's
    workers; a failed one is retried on it. None: the run is on ``version`` already (a retried
    command), nothing to record. Raises ``Conflict`` for any other state."""
    last = state.last
    if state.status == "absent":
        raise NotFound("run not found")
    if not isinstance(last, RunParked | RunResumed | RunFailed):
        raise Conflict(f"the run is {state.status}; {MOVABLE}")
    if version == last.version:
        return None
    moved = Moved(from_version=last.version, by=by, at=now)
    return msgspec.structs.replace(last, version=version, moved=moved)


def _moved_on(state: Run) -> NoReturn:
    if isinstance(state.last, RunCancelled):
        raise RunCancelledError(CANCELLED)
    raise Conflict(MOVED_ON)


def _run_id(state: Run) -> str:
    if state.last is None:
        raise Conflict("the run has no recorded start")
    return state.last.run_id
