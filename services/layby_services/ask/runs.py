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

import msgspec

from layby.logs import get_logger
from layby_contracts.commands import (
    Attached,
    AttachWorker,
    CancelRun,
    CheckCurrent,
    Current,
    EndRun,
    Noted,
    ParkRun,
    RecordStep,
    RetryRun,
    RunAccepted,
    StartRun,
    WorkerSeen,
)
from layby_contracts.errors import BadInput, Conflict, Forbidden, Transient, Unauthorized, Unavailable
from layby_contracts.events import (
    RunEvent,
    RunStarted,
)
from layby_contracts.limits import CHECKPOINT_MAX_BYTES
from layby_domain.clock import Clock
from layby_domain.run import Run, decide_end, decide_park, decide_step, is_current
from layby_domain.validation import call_interaction_id, is_flow_name, nul_path
from layby_server.auth import Authenticator, Principal
from layby_server.consumer import ensure_flow_consumer
from layby_server.eventstore import EventStore, Stored
from layby_server.runops import cancel_run, retry_run
from layby_server.settings import Settings
from layby_server.workers import WorkerRegistry
from layby_services.ask.caller import identify

log = get_logger("layby.runs")
_enc = msgspec.json.Encoder()
ERROR_MAX_CHARS = 4000
STARTED_CACHE = 50_000
MAX_ACK_WAIT_SECONDS = 3600.0
STEP_ATTEMPTS = 20
"""A step's record retries this often when other steps of its execution win the append."""


def _run(found: RunOwner) -> Run:
    """The run's state (``layby_domain.run``) from its last event."""
    event = found.last.event
    return Run(seq=found.last.seq, last=event) if isinstance(event, RunEvent) else Run()


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
            raise BadInput("run_id is already in use", field="run_id") from None
        except Transient as exc:
            raise Unavailable(f"the event log is unavailable: {exc}") from None
        log.info("run.started", run_id=cmd.run_id, flow=cmd.flow, identity=principal.identity)
        return RunAccepted(run_id=cmd.run_id, seq=seq, warning=await self._unserved(cmd.flow))

    async def _unserved(self, flow: str) -> str | None:
        """A warning when no live worker serves ``flow`` (the run waits for one)."""
        if self.workers is None:
            return None
        served = await self.workers.served()
        if flow in served:
            return None
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
        except Transient as exc:
            raise Unavailable(f"the event log is unavailable: {exc}") from None
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
        size = len(_enc.encode(cmd.answers)) + len(_enc.encode(cmd.asks))
        if size > CHECKPOINT_MAX_BYTES:
            raise BadInput(
                f"the run's checkpoint is {size} bytes; the limit is {CHECKPOINT_MAX_BYTES}", field="answers"
            )
        event = decide_park(
            _run(found),
            generation=cmd.generation,
            asks=cmd.asks,
            answers=cmd.answers,
            now=self._clock.now(),
            resume_id=cmd.resume_id,
        )
        if event is None:
            return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # a retry of this park
        reply = await self._append(found, event, f"parked-{cmd.run_id}-{cmd.generation}")
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
        reply = await self._append(found, event, f"ended-{cmd.run_id}-{cmd.generation}-{uuid.uuid4().hex}")
        if isinstance(reply, RunAccepted):
            if cmd.outcome == "failed":
                log.error("run.failed", run_id=cmd.run_id, generation=cmd.generation, error=event.error)  # type: ignore[union-attr]
            else:
                log.info("run.finished", run_id=cmd.run_id, generation=cmd.generation)
        return reply

    async def step(self, cmd: RecordStep) -> RunAccepted:
        """Record a finished step before the flow goes on (docs/aggregates/run.md#steps). Steps of
        one execution run concurrently (``asyncio.gather``): a lost race re-reads and merges."""
        if cmd.call < 0:
            raise BadInput("call must be >= 0", field="call")
        if cmd.step.error is None:
            self._check_payload("result", cmd.step.result)
        step = (
            msgspec.structs.replace(cmd.step, error=cmd.step.error[:ERROR_MAX_CHARS])
            if cmd.step.error
            else cmd.step
        )
        for _ in range(STEP_ATTEMPTS):
            found, _ = await self._executing(cmd.token, cmd.run_id, cmd.generation)
            event = decide_step(
                _run(found),
                generation=cmd.generation,
                call=cmd.call,
                step=step,
                now=self._clock.now(),
                resume_id=cmd.resume_id,
            )
            if event is None:
                return RunAccepted(run_id=cmd.run_id, seq=found.last.seq)  # recorded already
            size = len(_enc.encode(event.steps)) + len(_enc.encode(event.answers))
            if size > CHECKPOINT_MAX_BYTES:
                raise BadInput(
                    f"the run's checkpoint would be {size} bytes; the limit is {CHECKPOINT_MAX_BYTES}",
                    field="result",
                )
            try:
                return await self._append(found, event, f"step-{cmd.run_id}-{cmd.generation}-{cmd.call}")
            except Conflict:
                continue  # another step of this execution was recorded first: merge with it
        raise Unavailable("the run kept changing while the step was recorded; try again")

    async def cancel(self, cmd: CancelRun) -> RunAccepted:
        principal = identify(self._auth, cmd.token, cmd.run_id, "run_id")
        await cancel_run(self._store, cmd.run_id, principal, self._clock.now)
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
        durable = names.flow_durable(cmd.flow)
        try:
            await ensure_flow_consumer(self._store, cmd.flow, ack_wait_seconds=cmd.ack_wait_seconds)
        except Transient as exc:
            raise Unavailable(f"the continuation stream is unavailable: {exc}") from None
        return Attached(stream=names.continuations_stream, durable=durable)

    async def current(self, cmd: CheckCurrent) -> Current:
        """Whether a continuation is the one to execute now, from the run's log (the leader)."""
        identify(self._auth, cmd.token, cmd.run_id, "run_id")
        try:
            last = await self._store.last(self._store.names.run(cmd.run_id), leader=True)
        except Transient as exc:
            raise Unavailable(f"the event log is unavailable: {exc}") from None
        event = last.event if last is not None else None
        state = Run(seq=last.seq, last=event) if last is not None and isinstance(event, RunEvent) else Run()
        if state.status == "cancelled":
            return Current(status="cancelled")
        verdict = is_current(state, cmd.generation)
        if verdict:
            # A replay of a generation that recorded steps starts from them, not from the
            # continuation's older checkpoint.
            return Current(status="current", steps=state.steps or None)
        return Current(status="unknown" if verdict is None else "duplicate")
