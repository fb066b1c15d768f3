"""Run commands: start, park and end a run, recorded on the run's subject (DESIGN invariant 2).

The ask service is the authority for runs as for asks: it authenticates the worker's token,
checks that the caller may act for the run's identity, and appends with the expected last
sequence of the run's subject, so two executions of one continuation (a worker died before
acking and the message was redelivered) can never both park or end the run.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

import msgspec

from contracts.commands import EndRun, ParkRun, Refused, RunAccepted, StartRun
from contracts.events import (
    RunEvent,
    RunFailed,
    RunFinished,
    RunParked,
    RunResumed,
    RunStarted,
)
from contracts.limits import CHECKPOINT_MAX_BYTES
from layby.auth import Authenticator, Principal
from layby.clock import Clock
from layby.errors import Conflict, Transient
from layby.eventstore import EventStore, Stored
from layby.logs import get_logger
from layby.settings import Settings
from layby.validation import call_interaction_id, is_flow_name, nul_path
from services.ask.caller import identify

log = get_logger("layby.runs")
_enc = msgspec.json.Encoder()
ERROR_MAX_CHARS = 4000
STARTED_CACHE = 50_000


def _generation_of(event: object) -> int | None:
    """The generation a run is executing after ``event``, or None when it is not executing."""
    if isinstance(event, RunStarted):
        return 0
    if isinstance(event, RunResumed):
        return event.generation
    return None


class RunOwner(msgspec.Struct, frozen=True):
    started: RunStarted
    last: Stored


class RunHandlers:
    def __init__(self, settings: Settings, store: EventStore, auth: Authenticator, clock: Clock) -> None:
        self._settings = settings
        self._store = store
        self._auth = auth
        self._clock = clock
        self._started: OrderedDict[str, RunStarted] = OrderedDict()

    async def started(self, run_id: str) -> RunStarted | None:
        """A run's ``RunStarted`` event: its flow, identity and input never change, so it is
        read from the log once and kept (bounded LRU)."""
        found = self._started.get(run_id)
        if found is not None:
            self._started.move_to_end(run_id)
            return found
        first = await self._store.first(self._store.names.run(run_id))
        if first is None or not isinstance(first.event, RunStarted):
            return None
        self._started[run_id] = first.event
        if len(self._started) > STARTED_CACHE:
            self._started.popitem(last=False)
        return first.event

    async def load(self, run_id: str) -> RunOwner | None:
        """The run's start and its last event, read from the leader (decisions rest on it)."""
        started = await self.started(run_id)
        if started is None:
            return None
        last = await self._store.last(self._store.names.run(run_id), leader=True)
        if last is None:
            return None
        return RunOwner(started=started, last=last)

    @staticmethod
    def may_act(principal: Principal, started: RunStarted) -> bool:
        """A run is driven by its own identity, or by an unrestricted (operator) worker."""
        return not principal.restricted or principal.identity == started.identity

    def _payload_error(self, name: str, value: object) -> Refused | None:
        where = nul_path(value)
        if where is not None:
            return Refused(kind="invalid", message=f"{name} must not contain NUL characters", field=name)
        try:
            size = len(_enc.encode(value))
        except (TypeError, msgspec.EncodeError) as exc:
            return Refused(kind="invalid", message=f"{name} must be JSON-serializable: {exc}", field=name)
        if size > self._settings.max_body_bytes:
            return Refused(
                kind="invalid",
                message=f"{name} is {size} bytes; the limit is {self._settings.max_body_bytes}",
                field=name,
            )
        return None

    async def start(self, cmd: StartRun) -> RunAccepted | Refused:
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        if isinstance(principal, Refused):
            return principal
        if not is_flow_name(cmd.flow):
            return Refused(kind="invalid", message="flow must be 1-64 of [A-Za-z0-9_-]", field="flow")
        bad = self._payload_error("input", cmd.input)
        if bad is not None:
            return bad
        event = RunStarted(
            run_id=cmd.run_id,
            flow=cmd.flow,
            identity=principal.identity,
            role=principal.role,
            input=cmd.input,
            started_at=self._clock.now(),
        )
        subject = self._store.names.run(cmd.run_id)
        try:
            seq = await self._store.append(subject, event, msg_id=f"started-{cmd.run_id}", expected_seq=0)
        except Conflict:
            found = await self.load(cmd.run_id)
            if (
                found is not None
                and found.started.identity == principal.identity
                and (found.started.flow == cmd.flow)
            ):
                return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # a retry of this start
            return Refused(kind="invalid", message="run_id is already in use", field="run_id")
        except Transient as exc:
            return Refused(kind="unavailable", message=f"the event log is unavailable: {exc}")
        log.info("run.started", run_id=cmd.run_id, flow=cmd.flow, identity=principal.identity)
        return RunAccepted(run_id=cmd.run_id, seq=seq)

    async def _executing(
        self, token: str, run_id: str, generation: int
    ) -> tuple[RunOwner, Principal] | Refused:
        principal = identify(self._auth, token, run_id, "run_id")
        if isinstance(principal, Refused):
            return principal
        found = await self.load(run_id)
        if found is None:
            return Refused(kind="invalid", message=f"run {run_id} does not exist", field="run_id")
        if not self.may_act(principal, found.started):
            return Refused(kind="audience", message="this run belongs to another identity")
        return found, principal

    async def _append(self, found: RunOwner, event: RunEvent, msg_id: str) -> RunAccepted | Refused:
        subject = self._store.names.run(found.started.run_id)
        try:
            seq = await self._store.append(subject, event, msg_id=msg_id, expected_seq=found.last.seq)
        except Conflict:
            return Refused(kind="conflict", message="another execution of this run already moved it on")
        except Transient as exc:
            return Refused(kind="unavailable", message=f"the event log is unavailable: {exc}")
        return RunAccepted(run_id=found.started.run_id, seq=seq)

    async def park(self, cmd: ParkRun) -> RunAccepted | Refused:
        checked = await self._executing(cmd.token, cmd.run_id, cmd.generation - 1)
        if isinstance(checked, Refused):
            return checked
        found, _ = checked
        if not cmd.asks:
            return Refused(kind="invalid", message="a park needs at least one ask", field="asks")
        for index, ask in enumerate(cmd.asks):
            if ask.call < 0 or ask.interaction_id != call_interaction_id(cmd.run_id, ask.call):
                return Refused(
                    kind="invalid",
                    message="interaction_id does not belong to this run's call",
                    field=f"asks[{index}].interaction_id",
                )
        size = len(_enc.encode(cmd.answers)) + len(_enc.encode(cmd.asks))
        if size > CHECKPOINT_MAX_BYTES:
            return Refused(
                kind="invalid",
                message=f"the run's checkpoint is {size} bytes; the limit is {CHECKPOINT_MAX_BYTES}",
                field="answers",
            )
        executing = _generation_of(found.last.event)
        if executing != cmd.generation - 1:
            last = found.last.event
            if isinstance(last, RunParked) and last.generation == cmd.generation:
                return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # a retry of this park
            return Refused(kind="conflict", message="another execution of this run already moved it on")
        event = RunParked(
            run_id=cmd.run_id,
            generation=cmd.generation,
            asks=cmd.asks,
            answers=cmd.answers,
            parked_at=self._clock.now(),
            resume_id=cmd.resume_id,
        )
        reply = await self._append(found, event, f"parked-{cmd.run_id}-{cmd.generation}")
        if isinstance(reply, RunAccepted):
            log.info("run.parked", run_id=cmd.run_id, generation=cmd.generation, asks=len(cmd.asks))
        return reply

    async def end(self, cmd: EndRun) -> RunAccepted | Refused:
        checked = await self._executing(cmd.token, cmd.run_id, cmd.generation)
        if isinstance(checked, Refused):
            return checked
        found, _ = checked
        if _generation_of(found.last.event) != cmd.generation:
            last = found.last.event
            if isinstance(last, RunFinished | RunFailed) and last.generation == cmd.generation:
                return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # a retry of this end
            return Refused(kind="conflict", message="another execution of this run already moved it on")
        now = self._clock.now()
        event: RunEvent
        if cmd.outcome == "finished":
            bad = self._payload_error("result", cmd.result)
            if bad is not None:
                return bad
            event = RunFinished(
                run_id=cmd.run_id,
                generation=cmd.generation,
                result=cmd.result,
                finished_at=now,
                resume_id=cmd.resume_id,
            )
        else:
            event = RunFailed(
                run_id=cmd.run_id,
                generation=cmd.generation,
                error=(cmd.error or "the flow failed")[:ERROR_MAX_CHARS],
                attempts=cmd.attempts,
                failed_at=now,
                resume_id=cmd.resume_id,
            )
        reply = await self._append(found, event, f"ended-{cmd.run_id}-{cmd.generation}-{uuid.uuid4().hex}")
        if isinstance(reply, RunAccepted):
            if cmd.outcome == "failed":
                log.error("run.failed", run_id=cmd.run_id, generation=cmd.generation, error=event.error)  # type: ignore[union-attr]
            else:
                log.info("run.finished", run_id=cmd.run_id, generation=cmd.generation)
        return reply
