"""Run commands: start, park and end a run, recorded on the run's subject
(docs/aggregates/run.md#one-execution-moves-a-run-on).

The ask service is the authority for runs as for asks: it authenticates the worker's token,
checks that the caller may act for the run's identity, and appends with the expected last
sequence of the run's subject, so two executions of one continuation (a worker died before
acking and the message was redelivered) can never both park or end the run.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass

import msgspec

from layby_contracts.commands import (
    Attached,
    AttachWorker,
    CancelRun,
    CheckCurrent,
    Current,
    EndRun,
    MoveRun,
    Noted,
    ParkRun,
    RecordStep,
    RetryRun,
    RunAccepted,
    StartRun,
    WorkerSeen,
)
from layby_contracts.errors import BadInput, Conflict, Forbidden, Unauthorized
from layby_contracts.events import (
    RunEvent,
    RunStarted,
    StepRecorded,
    StepResult,
)
from layby_contracts.limits import CHECKPOINT_MAX_BYTES
from layby_domain.ask import may_act_for
from layby_domain.clock import Clock
from layby_domain.run import Run, Steps, checkpoint, decide_end, decide_park, decide_step, is_current
from layby_domain.validation import call_interaction_id, is_flow_name, is_interaction_id, is_subject
from layby_domain.values import nul_path
from layby_server.auth import Authenticator, Principal, asker_of
from layby_server.observability.logs import get_logger
from layby_server.projection.workers import WorkerRegistry
from layby_server.settings import Settings
from layby_server.store.consumer import ensure_flow_consumer
from layby_server.store.eventlog import as_event, decide_and_append, kept_changing
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.parked import executing_visits
from layby_server.write.runops import cancel_run, check_version, move_run, read_steps, retry_run
from layby_services.ask.caller import identify

log = get_logger("layby.runs")
_enc = msgspec.json.Encoder()
ERROR_MAX_CHARS = 4000
STARTED_CACHE = 50_000
MAX_ACK_WAIT_SECONDS = 3600.0
STEP_ATTEMPTS = 20
"""A step's record retries this often when other steps of its execution win the append."""
EXECUTIONS_CACHE = 4_096
"""Executing generations whose run and step record this process remembers (their next step is
then recorded with one append, without reading the log first)."""


def _run(found: RunOwner) -> Run:
    """The run's state (``layby_domain.run``) from its last event."""
    event = found.last.event
    return Run(seq=found.last.seq, last=event) if isinstance(event, RunEvent) else Run()


def _check_checkpoint(*parts: object, field: str, would: bool = False) -> None:
    """A run's checkpoint (the encoded ``parts``) stays within ``CHECKPOINT_MAX_BYTES``
    (docs/aggregates/run.md#checkpoint); ``would``: a step that would take it past."""
    size = sum(len(_enc.encode(part)) for part in parts)
    if size > CHECKPOINT_MAX_BYTES:
        verb = "would be" if would else "is"
        raise BadInput(
            f"the run's checkpoint {verb} {size} bytes; the limit is {CHECKPOINT_MAX_BYTES}", field=field
        )


@dataclass(frozen=True, slots=True)
class _Execution:
    """An executing generation as a step decides on it: the run and its step record."""

    run: Run
    steps: Steps

    @property
    def seq(self) -> int:
        return self.steps.seq  # a step appends to the record, expecting the record unchanged


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
        self._executions: OrderedDict[tuple[str, int], tuple[Run, Steps]] = OrderedDict()
        """Each executing generation's run state and step record, as this process last read or
        recorded them (docs/aggregates/run.md#recording-a-step-costs-one-append)."""
        self.workers: WorkerRegistry | None = None
        """Worker reports (PostgreSQL); None in unit tests of the run rules."""

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
        self._keep_started(first.event)
        return first.event

    def _keep_started(self, started: RunStarted) -> None:
        self._started[started.run_id] = started
        if len(self._started) > STARTED_CACHE:
            self._started.popitem(last=False)

    async def load(self, run_id: str) -> RunOwner | None:
        """The run's start and its last event, read from the leader (decisions rest on it)."""
        started = await self.started(run_id)
        if started is None:
            return None
        last = await self._store.last(self._store.names.run(run_id), leader=True)
        if last is None:
            return None
        return RunOwner(started=started, last=last)

    async def steps(self, run_id: str, generation: int) -> Steps:
        """The steps execution ``generation`` recorded, from its step subject (the leader)."""
        return await read_steps(self._store, run_id, generation)

    def _remember(self, key: tuple[str, int], run: Run, steps: Steps) -> None:
        self._executions[key] = (run, steps)
        self._executions.move_to_end(key)
        if len(self._executions) > EXECUTIONS_CACHE:
            self._executions.popitem(last=False)

    @staticmethod
    def may_act(principal: Principal, started: RunStarted) -> bool:
        """A run is driven by its own identity, or by an unrestricted (operator) worker."""
        return may_act_for(asker_of(principal), started)

    def _check_payload(self, name: str, value: object) -> None:
        where = nul_path(value)
        if where is not None:
            raise BadInput(f"{name} must not contain NUL characters", field=name)
        try:
            size = len(_enc.encode(value))
        except (TypeError, msgspec.EncodeError) as exc:
            raise BadInput(f"{name} must be JSON-serializable: {exc}", field=name) from None
        if size > self._settings.max_body_bytes:
            raise BadInput(
                f"{name} is {size} bytes; the limit is {self._settings.max_body_bytes}", field=name
            )

    async def start(self, cmd: StartRun) -> RunAccepted:
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        if not is_flow_name(cmd.flow):
            raise BadInput("flow must be 1-64 of [A-Za-z0-9_-]", field="flow")
        self._check_payload("input", cmd.input)
        if cmd.subject is not None and not is_subject(cmd.subject):
            raise BadInput("subject must be 1-128 of [A-Za-z0-9_:@-]", field="subject")
        event = RunStarted(
            run_id=cmd.run_id,
            flow=cmd.flow,
            identity=principal.identity,
            role=principal.role,
            input=cmd.input,
            started_at=self._clock.now(),
            subject=cmd.subject,
            version=await self._version_to_start(cmd),
        )
        if cmd.caller is not None or cmd.caller_call is not None:
            event = await self._child(cmd, principal, event)
        return await self.record_start(event, warn=True)

    async def _version_to_start(self, cmd: StartRun) -> int:
        """The version a start names, else the newest a live worker serves, else 1
        (docs/versions.md#which-version-a-run-starts-on)."""
        if cmd.version is not None:
            return check_version(cmd.version)
        if self.workers is None:
            return 1
        return await self.workers.newest_version(cmd.flow)

    async def _child(self, cmd: StartRun, principal: Principal, event: RunStarted) -> RunStarted:
        """``layby.call``: the child runs as its caller's identity, on its caller's subject, one
        link further down the chain (docs/caller-asks.md#runs-that-call-runs)."""
        if cmd.caller is None or cmd.caller_call is None or not is_interaction_id(cmd.caller):
            raise BadInput("caller and caller_call go together", field="caller")
        parent = await self.started(cmd.caller)
        if parent is None:
            raise BadInput(f"run {cmd.caller} does not exist", field="caller")
        if not self.may_act(principal, parent):
            raise Forbidden("this run belongs to another identity")
        if cmd.run_id != call_interaction_id(cmd.caller, cmd.caller_call):
            raise BadInput("run_id does not belong to the caller's call", field="run_id")
        return msgspec.structs.replace(
            event,
            identity=parent.identity,
            role=parent.role,
            subject=parent.subject or parent.run_id,
            caller=parent.run_id,
            caller_call=cmd.caller_call,
            chain=[*(parent.chain or [parent.flow]), cmd.flow],
        )

    async def record_start(self, event: RunStarted, *, warn: bool = False) -> RunAccepted:
        """Append a run's start (idempotent for the same starter and flow)."""
        subject = self._store.names.run(event.run_id)
        try:
            seq = await self._store.append(subject, event, msg_id=f"started-{event.run_id}", expected_seq=0)
        except Conflict:
            found = await self.load(event.run_id)
            if (
                found is not None
                and found.started.identity == event.identity
                and (found.started.flow == event.flow)
            ):
                return RunAccepted(run_id=event.run_id, seq=found.last.seq)  # a retry of this start
            raise BadInput("run_id is already in use", field="run_id") from None
        self._keep_started(event)  # its first execution asks about it in a moment
        log.info("run.started", run_id=event.run_id, flow=event.flow, identity=event.identity)
        return RunAccepted(
            run_id=event.run_id,
            seq=seq,
            warning=await self._unserved(event.flow, event.version) if warn else None,
        )

    async def _unserved(self, flow: str, version: int = 1) -> str | None:
        """A warning when no live worker serves ``version`` of ``flow`` (the run waits for one)."""
        if self.workers is None:
            return None
        versions = await self.workers.versions(flow)
        if version in versions:
            return None
        if versions:
            return f"no worker serves version {version} of flow {flow!r}; the run starts once one runs"
        served = await self.workers.served()
        listing = ", ".join(served) if served else "none"
        return (
            f"no worker serves flow {flow!r} (flows served now: {listing}); "
            "the run starts once a worker serving it runs"
        )

    async def seen(self, cmd: WorkerSeen) -> Noted:
        try:
            principal = self._auth.principal(cmd.token)
        except Unauthorized as exc:
            raise Unauthorized(str(exc), field="token") from None
        if self.workers is not None:
            await self.workers.seen(cmd, principal)
        return Noted()

    async def _executing(self, token: str, run_id: str, generation: int) -> tuple[RunOwner, Principal]:
        principal = identify(self._auth, token, run_id, "run_id")
        found = await self.load(run_id)
        if found is None:
            raise BadInput(f"run {run_id} does not exist", field="run_id")
        if not self.may_act(principal, found.started):
            raise Forbidden("this run belongs to another identity")
        return found, principal

    async def _append(self, found: RunOwner, event: RunEvent, msg_id: str) -> RunAccepted:
        subject = self._store.names.run(found.started.run_id)
        try:
            seq = await self._store.append(subject, event, msg_id=msg_id, expected_seq=found.last.seq)
        except Conflict:
            raise Conflict("another execution of this run already moved it on") from None
        return RunAccepted(run_id=found.started.run_id, seq=seq)

    async def park(self, cmd: ParkRun) -> RunAccepted:
        checked = await self._executing(cmd.token, cmd.run_id, cmd.generation - 1)
        found, _ = checked
        if not cmd.asks:
            raise BadInput("a park needs at least one ask", field="asks")
        for index, ask in enumerate(cmd.asks):
            if ask.call < 0 or ask.interaction_id != call_interaction_id(cmd.run_id, ask.call):
                raise BadInput(
                    "interaction_id does not belong to this run's call", field=f"asks[{index}].interaction_id"
                )
        _check_checkpoint(cmd.answers, cmd.asks, field="answers")
        event = decide_park(
            _run(found),
            steps=await self.steps(cmd.run_id, cmd.generation - 1),
            generation=cmd.generation,
            asks=cmd.asks,
            answers=cmd.answers,
            now=self._clock.now(),
            resume_id=cmd.resume_id,
        )
        if event is None:
            return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # a retry of this park
        event = msgspec.structs.replace(event, visits=executing_visits(_run(found)))
        _check_checkpoint(event.steps, event.answers, field="answers")
        reply = await self._append(found, event, f"parked-{cmd.run_id}-{cmd.generation}")
        self._executions.pop((cmd.run_id, cmd.generation - 1), None)
        if isinstance(reply, RunAccepted):
            log.info("run.parked", run_id=cmd.run_id, generation=cmd.generation, asks=len(cmd.asks))
        return reply

    async def end(self, cmd: EndRun) -> RunAccepted:
        checked = await self._executing(cmd.token, cmd.run_id, cmd.generation)
        found, _ = checked
        if cmd.outcome == "finished" and _run(found).executing == cmd.generation:
            self._check_payload("result", cmd.result)
        event = decide_end(
            _run(found),
            steps=await self.steps(cmd.run_id, cmd.generation),
            generation=cmd.generation,
            outcome=cmd.outcome,
            result=cmd.result,
            error=(cmd.error or "the flow failed")[:ERROR_MAX_CHARS],
            attempts=cmd.attempts,
            now=self._clock.now(),
            resume_id=cmd.resume_id,
        )
        if event is None:
            return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # a retry of this end
        event = msgspec.structs.replace(event, visits=executing_visits(_run(found)))
        reply = await self._append(found, event, f"ended-{cmd.run_id}-{cmd.generation}-{uuid.uuid4().hex}")
        self._executions.pop((cmd.run_id, cmd.generation), None)
        if isinstance(reply, RunAccepted):
            if cmd.outcome == "failed":
                log.error("run.failed", run_id=cmd.run_id, generation=cmd.generation, error=event.error)  # type: ignore[union-attr]
            else:
                log.info("run.finished", run_id=cmd.run_id, generation=cmd.generation)
        return reply

    async def step(self, cmd: RecordStep) -> RunAccepted:
        """Record a finished step before the flow goes on (docs/aggregates/run.md#steps).

        The step joins its generation's record on the run's step subject, appended with the
        record's last sequence expected: the first record of a call wins, and an execution that
        comes second gets that record back (``RunAccepted.step``). Steps of one execution run
        concurrently (``asyncio.gather``): a lost race re-reads and merges."""
        if cmd.call < 0:
            raise BadInput("call must be >= 0", field="call")
        if cmd.step.error is None:
            self._check_payload("result", cmd.step.result)
        step = (
            msgspec.structs.replace(cmd.step, error=cmd.step.error[:ERROR_MAX_CHARS])
            if cmd.step.error
            else cmd.step
        )
        key = (cmd.run_id, cmd.generation)
        seed: _Execution | None = None
        known = self._executions.get(key)
        started = self._started.get(cmd.run_id)
        if known is not None and started is not None:
            # The run and its record as this process last saw them: the append expects the
            # record unchanged, and a cancel changes it (it closes the record).
            principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
            if not self.may_act(principal, started):
                raise Forbidden("this run belongs to another identity")
            seed = _Execution(*known)
        recorded: list[StepResult] = []

        async def read(_leader: bool) -> _Execution:
            # After a lost race the record changed: another step of this execution landed first
            # (merge with it), another execution's, or a cancel closed it. Read both again.
            self._executions.pop(key, None)
            found, _ = await self._executing(cmd.token, cmd.run_id, cmd.generation)
            return _Execution(_run(found), await self.steps(cmd.run_id, cmd.generation))

        def decide(current: _Execution) -> StepRecorded | None:
            decided = decide_step(
                current.run,
                steps=current.steps,
                generation=cmd.generation,
                call=cmd.call,
                step=step,
                now=self._clock.now(),
                resume_id=cmd.resume_id,
            )
            if isinstance(decided, StepResult):
                recorded.append(decided)  # recorded already: by this very command, or first by another
                return None
            # A park carries every step and answer: a step must leave room for them.
            room = checkpoint(current.run, Steps(recorded=decided.steps))
            _check_checkpoint(room, current.run.answers, field="result", would=True)
            return decided

        outcome = await decide_and_append(
            self._store,
            self._store.names.steps(cmd.run_id, cmd.generation),
            read=read,
            decide=decide,
            event_of=as_event,
            msg_id=lambda _: f"step-{cmd.run_id}-{cmd.generation}-{cmd.call}-{uuid.uuid4().hex}",
            seed=seed,
            attempts=STEP_ATTEMPTS,
        )
        if recorded and outcome.decision is None and not outcome.lost:
            first = recorded[-1]
            return RunAccepted(
                run_id=cmd.run_id, seq=outcome.state.steps.seq, step=None if first == step else first
            )
        if outcome.decision is None or outcome.seq is None:
            raise kept_changing("the run", "while the step was recorded")
        self._remember(key, outcome.state.run, Steps(seq=outcome.seq, recorded=outcome.decision.steps))
        return RunAccepted(run_id=cmd.run_id, seq=outcome.seq)

    async def cancel(self, cmd: CancelRun) -> RunAccepted:
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        await cancel_run(self._store, cmd.run_id, principal, self._clock.now)
        last = await self._store.last(self._store.names.run(cmd.run_id), leader=True)
        return RunAccepted(run_id=cmd.run_id, seq=last.seq if last is not None else 0)

    async def move(self, cmd: MoveRun) -> RunAccepted:
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        await move_run(self._store, cmd.run_id, check_version(cmd.version), principal, self._clock.now)
        last = await self._store.last(self._store.names.run(cmd.run_id), leader=True)
        return RunAccepted(run_id=cmd.run_id, seq=last.seq if last is not None else 0)

    async def retry(self, cmd: RetryRun) -> RunAccepted:
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        await retry_run(self._store, cmd.run_id, principal, self._clock.now)
        last = await self._store.last(self._store.names.run(cmd.run_id), leader=True)
        return RunAccepted(run_id=cmd.run_id, seq=last.seq if last is not None else 0)

    async def attach(self, cmd: AttachWorker) -> Attached:
        """Provision the durable consumer a flow's workers share (idempotent, any replica)."""
        try:
            self._auth.principal(cmd.token)
        except Unauthorized as exc:
            raise Unauthorized(str(exc), field="token") from None
        if not is_flow_name(cmd.flow):
            raise BadInput("flow must be 1-64 of [A-Za-z0-9_-]", field="flow")
        if not (0 < cmd.ack_wait_seconds <= MAX_ACK_WAIT_SECONDS):
            raise BadInput(
                f"ack_wait_seconds must be > 0 and at most {MAX_ACK_WAIT_SECONDS:g}", field="ack_wait_seconds"
            )
        names = self._store.names
        version = check_version(cmd.version)
        durable = names.flow_durable(cmd.flow, version)
        await ensure_flow_consumer(
            self._store, cmd.flow, version=version, ack_wait_seconds=cmd.ack_wait_seconds
        )
        return Attached(stream=names.continuations_stream, durable=durable)

    async def current(self, cmd: CheckCurrent) -> Current:
        """Whether a continuation is the one to execute now, from the run's log (the leader).
        The answer carries the run's steps: only who may act for the run gets it."""
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        started = await self.started(cmd.run_id)
        if started is not None and not self.may_act(principal, started):
            raise Forbidden("this run belongs to another identity")
        last = await self._store.last(self._store.names.run(cmd.run_id), leader=True)
        event = last.event if last is not None else None
        state = Run(seq=last.seq, last=event) if last is not None and isinstance(event, RunEvent) else Run()
        if state.status == "cancelled":
            return Current(status="cancelled")
        if state.last is not None and state.version != cmd.version:
            # A continuation of a version the run moved away from (docs/versions.md#moving-runs).
            return Current(status="duplicate")
        verdict = is_current(state, cmd.generation)
        if verdict:
            # A replay of a generation that recorded steps starts from them, not from the
            # continuation's older checkpoint.
            recorded = await self.steps(cmd.run_id, cmd.generation)
            if recorded.closed:
                return Current(status="cancelled")
            self._remember((cmd.run_id, cmd.generation), state, recorded)
            steps = checkpoint(state, recorded)
            return Current(status="current", steps=steps or None)
        return Current(status="unknown" if verdict is None else "duplicate")
