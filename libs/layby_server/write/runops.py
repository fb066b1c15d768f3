"""Operating runs: cancel, retry and move (docs/aggregates/run.md#cancel-and-retry,
docs/versions.md#moving-runs).

One implementation for every way in: the ask service's commands (the SDK and the CLI) and the
run doors (``POST /api/runs/{id}/cancel`` and ``/retry``). Each reads the run's last event from
the leader, decides with ``layby_domain.run``, and appends with that event's sequence expected;
after a lost race it reads and decides again, so a cancel racing an answer has exactly one
outcome: the run resumed (and the cancel then stops the resumed execution at its next step, park
or end) or the run cancelled (and the answer finds its question removed). A cancel of a running
run also closes the step record of the execution it stops.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from layby_contracts.errors import BadInput, Forbidden, NotFound
from layby_contracts.events import Event, RunCancelled, RunEvent, RunFailed, RunParked, RunResumed, RunStarted
from layby_domain.interaction import decide_remove
from layby_domain.run import Run, Steps, decide_cancel, decide_close_steps, decide_move, decide_retry
from layby_domain.validation import FLOW_VERSION_RULE, is_flow_version
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog, Outcome, as_event, decide_and_append, kept_changing
from layby_server.write.resolve import resolve

log = get_logger("layby.runops")
NOT_FOUND = "Run not found"


async def load_run(store: EventLog, run_id: str, who: Principal) -> tuple[RunStarted, Run]:
    """The run's start and state; another identity's run is the same 404 as an unknown one."""
    first = await store.first(store.names.run(run_id))
    if first is None or not isinstance(first.event, RunStarted):
        raise NotFound(NOT_FOUND)
    started = first.event
    if who.restricted and started.identity != who.identity:
        raise NotFound(NOT_FOUND)
    last = await store.last(store.names.run(run_id), leader=True)
    if last is None or not isinstance(last.event, RunEvent):
        raise NotFound(NOT_FOUND)
    return started, Run(seq=last.seq, last=last.event)


E = TypeVar("E", RunCancelled, RunResumed)
OPERATORS_MOVE = "only an operator moves runs between flow versions"


async def _decide_and_append(
    store: EventLog, run_id: str, who: Principal, decide: Callable[[Run], E], msg_id: str
) -> tuple[E, Run]:
    async def read(_leader: bool) -> Run:
        return (await load_run(store, run_id, who))[1]  # always the leader's word

    outcome = await decide_and_append(
        store, store.names.run(run_id), read=read, decide=decide, event_of=as_event, msg_id=lambda _: msg_id
    )
    if outcome.decision is None:
        raise kept_changing("the run")
    return outcome.decision, outcome.state


async def cancel_run(
    store: EventLog, run_id: str, who: Principal, now: Callable[[], datetime]
) -> RunCancelled:
    """Cancel a running or parked run. A parked run's open questions are removed at once (the
    resume service removes them again from the event, should this process stop half-way)."""
    event, _ = await _decide_and_append(
        store, run_id, who, lambda s: decide_cancel(s, by=who.identity, now=now()), f"cancelled-{run_id}"
    )
    await remove_open_asks(store, event, now)
    await close_steps(store, event, now)
    log.info("run.cancelled", run_id=run_id, by=who.identity, was=event.was)
    return event


def check_version(version: object) -> int:
    """A flow version (``BadInput`` naming ``version`` otherwise: docs/versions.md)."""
    if not is_flow_version(version):
        raise BadInput(FLOW_VERSION_RULE, field="version")
    assert isinstance(version, int)
    return version


async def move_run(
    store: EventLog, run_id: str, version: int, who: Principal, now: Callable[[], datetime]
) -> RunParked | RunResumed | RunFailed:
    """Move a run to ``version`` of its flow (docs/versions.md#moving-runs): its last event again,
    with the new version, appended with that event's sequence expected. An operator's decision."""
    if who.restricted:
        raise Forbidden(OPERATORS_MOVE)

    async def read(_leader: bool) -> Run:
        return (await load_run(store, run_id, who))[1]  # always the leader's word

    def decide(state: Run) -> RunParked | RunResumed | RunFailed | None:
        return decide_move(state, version=version, by=who.identity, now=now())

    async def event_of(event: RunParked | RunResumed | RunFailed) -> Event:
        return event

    msg_id = f"moved-{run_id}-{uuid.uuid4().hex}"
    outcome: Outcome[Run, RunParked | RunResumed | RunFailed] = await decide_and_append(
        store, store.names.run(run_id), read=read, decide=decide, event_of=event_of, msg_id=lambda _: msg_id
    )
    if outcome.lost:
        raise kept_changing("the run")
    if outcome.decision is None:
        # On that version already (a retried command): nothing was recorded.
        assert isinstance(outcome.state.last, RunParked | RunResumed | RunFailed)
        return outcome.state.last
    log.info("run.moved", run_id=run_id, by=who.identity, version=version)
    return outcome.decision


async def read_steps(store: EventLog, run_id: str, generation: int) -> Steps:
    """The step record of a run's generation, from the leader (``Unavailable`` when unreachable)."""
    last = await store.last_steps(run_id, generation, leader=True)
    return Steps() if last is None else Steps.of(last.seq, last.event)


async def close_steps(store: EventLog, cancelled: RunCancelled, now: Callable[[], datetime]) -> None:
    """Close the step record of the execution a cancel stopped, so its next step finds the run
    cancelled (docs/aggregates/run.md#steps). Idempotent: the resume service repeats it from the
    event."""

    async def read(_leader: bool) -> Steps:
        return await read_steps(store, cancelled.run_id, cancelled.generation)

    outcome = await decide_and_append(
        store,
        store.names.steps(cancelled.run_id, cancelled.generation),
        read=read,
        decide=lambda steps: decide_close_steps(cancelled, steps, now=now()),
        event_of=as_event,
        msg_id=lambda _: f"closed-{cancelled.run_id}-{uuid.uuid4().hex}",
    )
    if outcome.lost:
        raise kept_changing("the run's steps")


async def remove_open_asks(store: EventLog, cancelled: RunCancelled, now: Callable[[], datetime]) -> None:
    """Remove a cancelled park's questions that are still pending (an answered one keeps its
    answer). Idempotent: the resume service repeats it from the event."""
    for interaction_id in cancelled.asks:
        await resolve(store, interaction_id, lambda s: decide_remove(s, reason="cancelled", now=now()))


async def retry_run(store: EventLog, run_id: str, who: Principal, now: Callable[[], datetime]) -> RunResumed:
    """Execute a failed run again from its last recorded step or park (the resume service
    publishes the continuation when it sees the event)."""
    event, _ = await _decide_and_append(
        store,
        run_id,
        who,
        lambda s: decide_retry(s, by=who.identity, now=now()),
        f"retried-{run_id}-{uuid.uuid4().hex}",
    )
    log.info("run.retried", run_id=run_id, by=who.identity, generation=event.generation)
    return event
