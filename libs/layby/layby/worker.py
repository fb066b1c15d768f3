"""The run driver: ``layby.Worker`` hosts resumable flows (docs/aggregates/run.md#parking,
docs/aggregates/run.md#deadlines-and-checkpoint-retention).

A flow is an async function of one JSON input, registered by name::

    worker = layby.Worker(client)

    @worker.flow("refund")
    async def refund(order):
        ok = await layby.ask_user("Refund?", answer_format="confirm", mode="async", expiry_at=...)
        return {"refunded": ok is True}

    run_id = await worker.start("refund", {"order": 17})
    await worker.serve(stop)          # executes continuations until ``stop`` is set

Every execution of a run is a *continuation* taken from a JetStream durable consumer shared by
every worker hosting the flow. The first execution is generation 0; each park that resolves
produces the next one. A flow is executed from the start each time: async asks whose call
already resolved return their answers at once, and the first unresolved asks (all those raised
together, e.g. with ``asyncio.gather``) form the next park. A parked run holds no process
memory: its checkpoint (input and answers) lives in the event log and its PostgreSQL projection.

The continuation runs under the asker's identity (the run's, never the answerer's) and is
acknowledged only after its outcome (parked, finished, failed) is recorded; a worker that dies
mid-way leaves it to be redelivered to another worker, with the same ``resume_id``. A flow
that raises is retried with backoff, then the run is recorded as failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import Callable
from typing import Any, Literal

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from layby import faults
from layby.connection import until_stopped
from layby.errors import WorkerSetupError
from layby.ids import new_interaction_id
from layby.logs import get_logger
from layby.runs import RunContext, RunInfo, bind, unbind
from layby.sdk import Client, connect
from layby.settings import ClientSettings, load_client_settings
from layby.tracecontext import continued
from layby.worker_drive import Finished, Flow, Outcome, Parked, Raised, Stopped, drive
from layby.worker_slots import Slots, after, first
from layby_contracts.commands import (
    CONTINUATION_DECODER,
    PROTOCOL_STEPS,
    PROTOCOL_WORKER_COMMANDS,
    Attached,
    AttachWorker,
    CheckCurrent,
    Continuation,
    Current,
    EndRun,
    ParkRun,
    Prune,
    Refused,
    RunAccepted,
    WorkerSeen,
)
from layby_contracts.errors import (
    BadInput,
    Conflict,
    LaybyError,
    Permanent,
    RunCancelledError,
    Transient,
    Unavailable,
)
from layby_contracts.events import StepResult
from layby_contracts.refusals import from_refused
from layby_domain.validation import FLOW_VERSION_RULE, is_flow_name, is_flow_version

log = get_logger("layby.worker")
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
NOT_YET_DELAY = 0.5
FETCH_BATCH = 64
REPORT_SECONDS = 10.0
"""How often a worker reports in (a worker counts as alive for 30 s after a report)."""


def _token_part(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in text)[:40]
    return cleaned or "worker"


def _end_run(client: Client, cont: Continuation, outcome: Finished | Raised, *, attempts: int = 0) -> EndRun:
    """How an execution ends its generation: with the flow's result, or failed with its error
    after ``attempts`` deliveries."""
    return EndRun(
        token=client.token,
        run_id=cont.run_id,
        generation=cont.generation,
        outcome="finished" if isinstance(outcome, Finished) else "failed",
        result=outcome.result if isinstance(outcome, Finished) else None,
        error=outcome.error if isinstance(outcome, Raised) else None,
        attempts=attempts,
        resume_id=cont.resume_id,
    )


def _backoff(attempt: int) -> float:
    return float(min(RETRY_BASE_SECONDS * 2 ** max(attempt - 1, 0), RETRY_MAX_SECONDS))


class Worker:
    """Hosts flows and executes their continuations. See the module docstring."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        checkpointer: Literal["postgres", "memory"] = "postgres",
        concurrency: int = 64,
        settings: ClientSettings | None = None,
    ) -> None:
        if checkpointer not in ("postgres", "memory"):
            raise BadInput("checkpointer must be 'postgres' or 'memory'", field="checkpointer")
        self._client = client
        self._owns_client = client is None
        self.checkpointer = checkpointer
        self._settings = settings or load_client_settings()
        self._flows: dict[str, Flow] = {}
        self._extras: dict[str, list[str]] = {}
        self._versions: dict[str, int] = {}
        """The version of each registered flow (docs/versions.md)."""
        """The extras keys each flow declared it reads (docs/caller-asks.md#extras)."""
        self.ready = asyncio.Event()
        """Set once ``serve`` is bound to every registered flow's continuations."""
        self._bound: set[str] = set()
        self._concurrency = concurrency
        self.worker_id = f"{_token_part(socket.gethostname())}-{os.getpid()}-{secrets.token_hex(3)}"
        """How this worker shows in ``layby workers`` (host, process, a random suffix)."""

    # -- registration and starting -------------------------------------------------------

    def flow(self, name: str, *, extras: list[str] | None = None, version: int = 1) -> Callable[[Flow], Flow]:
        """Register an async function of one JSON input as the flow ``name``. ``extras``: the keys
        of a door's ``extras`` the flow reads (``layby.current_run().extras``); a door visit that
        hands it any other key is refused before the run starts. ``version``: which version of the
        flow this code is (docs/versions.md): this worker executes runs of that version only, and
        bumping it is how code that would replay a parked run differently is deployed."""
        if not is_flow_name(name):
            raise BadInput("flow name must be 1-64 of [A-Za-z0-9_-]", field="name")
        if not is_flow_version(version):
            raise BadInput(FLOW_VERSION_RULE, field="version")
        if name in self._flows:
            raise BadInput(f"flow {name!r} is already registered", field="name")
        declared = _extras_keys(extras)

        def register(fn: Flow) -> Flow:
            if not asyncio.iscoroutinefunction(fn):
                raise BadInput(f"flow {name!r} must be an async function", field="name")
            self._flows[name] = fn
            self._versions[name] = version
            if declared:
                self._extras[name] = declared
            return fn

        return register

    async def client(self) -> Client:
        if self._client is None:
            self._client = await connect(settings=self._settings)
        return self._client

    async def start(self, name: str, input: Any = None, *, run_id: str | None = None) -> str:
        """Start a durable run of ``name``; any worker hosting it executes it. Returns the run id."""
        if self.checkpointer == "memory":
            raise WorkerSetupError(
                "Worker.start() records a durable run, and this worker uses the in-memory "
                "checkpointer; use run_local() for sync-only runs, or checkpointer='postgres'"
            )
        return await (await self.client()).start_run(
            name, input, run_id=run_id, version=self._versions.get(name)
        )

    async def run_local(self, name: str, input: Any = None) -> Any:
        """Execute a flow here and now, without a durable run: for sync-only use.

        An async ask inside raises (it needs a durable checkpointer) before anything is stored.
        """
        fn = self._flows.get(name)
        if fn is None:
            raise BadInput(f"no flow {name!r} is registered on this worker", field="name")
        client = await self.client()
        run_id = new_interaction_id()
        ctx = RunContext(
            RunInfo(run_id=run_id, flow=name, generation=0, resume_id=f"{run_id}:0", identity=""),
            durable=self.checkpointer == "postgres",
            client=client,
        )
        token = bind(ctx)
        try:
            return await fn(input)
        finally:
            unbind(token)

    async def close(self) -> None:
        if self._owns_client and self._client is not None:
            await self._client.close()

    # -- serving continuations -------------------------------------------------------------

    async def serve(self, stop: asyncio.Event) -> None:
        """Execute continuations of every registered flow until ``stop`` is set."""
        if self.checkpointer == "memory":
            raise WorkerSetupError("an in-memory worker has no durable runs to serve")
        if not self._flows:
            raise WorkerSetupError("register at least one flow with @worker.flow(name) before serve()")
        await self.client()  # connect (and fail) before serving any flow
        slots = Slots(self._concurrency, len(self._flows))
        await self._report()  # seen before ready: a start right after ready is not flagged
        async with asyncio.TaskGroup() as tg:
            reporting = tg.create_task(self._keep_reporting(stop))
            flows = [tg.create_task(self._serve_flow(name, stop, slots)) for name in self._flows]
            await asyncio.wait(flows)
            reporting.cancel()
        log.info("worker.stopped", worker_id=self.worker_id)

    async def _report(self) -> None:
        """Tell the ask service this worker is alive and which flows it serves."""
        client = await self.client()
        cmd = WorkerSeen(
            token=client.token,
            worker_id=self.worker_id,
            flows=sorted(self._flows),
            host=socket.gethostname()[:255],
            pid=os.getpid(),
            concurrency=self._concurrency,
            extras=dict(self._extras) or None,
            versions={f: v for f, v in self._versions.items() if v != 1} or None,
        )
        try:
            reply = await client.request_run(cmd)
        except Unavailable:
            return
        if isinstance(reply, Refused) and reply.protocol < PROTOCOL_STEPS:
            return  # an older ask service does not track workers
        if isinstance(reply, Refused):
            log.warning("worker.report_refused", error=reply.message)

    async def _keep_reporting(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await first(stop, after(REPORT_SECONDS))
            if not stop.is_set():
                await self._report()

    async def _consumer(self, name: str) -> Any:
        """Bind to the flow's durable consumer, which the ask service provisions on request (the
        worker never creates consumers itself). Waits while no ask service answers yet."""
        client = await self.client()
        waited = False
        while True:
            try:
                reply = await client.request_run(
                    AttachWorker(
                        token=client.token,
                        flow=name,
                        ack_wait_seconds=self._settings.continuation_ack_wait_seconds,
                        version=self._versions.get(name, 1),
                    )
                )
            except Unavailable:
                reply = None
            if isinstance(reply, Attached):
                js = client.nc.jetstream(timeout=10)
                return await js.pull_subscribe_bind(reply.durable, reply.stream)
            if isinstance(reply, Refused):
                _require_worker_commands(reply)
                error = from_refused(reply)
                if not isinstance(error, Transient):
                    raise error
            if not waited:
                log.info("worker.waiting_for_services", flow=name)
                waited = True
            await asyncio.sleep(0.5)

    async def _serve_flow(self, name: str, stop: asyncio.Event, slots: Slots) -> None:
        sub = await self._consumer(name)
        running: set[asyncio.Task[None]] = set()
        queued = 0  # fetched continuations of this flow waiting for a slot
        moved = asyncio.Event()
        log.info(
            "worker.ready", flow=name, worker_id=self.worker_id, concurrency=slots.size, share=slots.share
        )
        self._bound.add(name)
        if self._bound >= set(self._flows):
            self.ready.set()

        async def execute(msg: Msg) -> None:
            nonlocal queued
            # A continuation waits for nothing but a free slot, and reports progress meanwhile.
            waiting = asyncio.create_task(self._heartbeat(msg))
            try:
                await slots.acquire()
            finally:
                waiting.cancel()
                queued -= 1
                moved.set()
            try:
                await self._execute(msg)
            finally:
                slots.release()

        try:
            while not stop.is_set():
                if queued >= slots.share or (queued and not slots.free):
                    moved.clear()
                    await first(moved, stop)
                    continue
                batch = min(slots.share - queued, max(slots.free, 1), FETCH_BATCH)
                try:
                    msgs = await until_stopped(sub.fetch(batch, timeout=1.0), stop) or []
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                except (nats.errors.Error, nats.js.errors.Error) as exc:
                    log.warning("worker.fetch_failed", flow=name, error=str(exc))
                    await asyncio.sleep(0.5)
                    with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                        sub = await self._consumer(name)
                    continue
                if stop.is_set():
                    # Fetched while stopping: hand them straight back to the other workers.
                    for msg in msgs:
                        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                            await msg.nak()
                    break
                for msg in msgs:
                    queued += 1
                    task = asyncio.create_task(execute(msg))
                    running.add(task)
                    task.add_done_callback(running.discard)
        finally:
            if running:
                await asyncio.wait(running, timeout=10)
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await sub.unsubscribe()

    async def _execute(self, msg: Msg) -> None:
        try:
            cont = CONTINUATION_DECODER.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.error("worker.malformed_continuation", subject=msg.subject, error=str(exc))
            await msg.term()
            return
        try:
            with continued(msg.headers):  # the resume's trace goes on in this execution's commands
                await self._execute_continuation(msg, cont)
        except (Transient, nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            log.warning("worker.retry", run_id=cont.run_id, resume_id=cont.resume_id, error=repr(exc))
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await msg.nak(delay=NOT_YET_DELAY)

    async def _is_current(self, cont: Continuation) -> Current:
        """Whether the run's log says this continuation is the one to execute now (with the steps
        this generation recorded already), a duplicate of one already executed, cancelled, or not
        known yet (the ask service reads the log; the worker only asks)."""
        client = await self.client()
        reply = await client.request_run(
            CheckCurrent(
                token=client.token, run_id=cont.run_id, generation=cont.generation, version=cont.version
            )
        )
        if isinstance(reply, Refused):
            _require_worker_commands(reply)
            raise from_refused(reply)
        if not isinstance(reply, Current):
            raise Transient(f"unexpected reply to a current check: {type(reply).__name__}")
        return reply

    async def _execute_continuation(self, msg: Msg, cont: Continuation) -> None:
        fn = self._flows.get(cont.flow)
        if fn is None:
            await msg.nak(delay=NOT_YET_DELAY)
            return
        current = await self._is_current(cont)
        if current.status == "unknown":
            await msg.nak(delay=NOT_YET_DELAY)
            return
        if current.status == "cancelled":
            log.debug("run.cancelled", run_id=cont.run_id, flow=cont.flow, resume_id=cont.resume_id)
            await msg.ack()
            return
        if current.status == "duplicate":
            log.debug("worker.duplicate_continuation", run_id=cont.run_id, resume_id=cont.resume_id)
            await msg.ack()
            return
        # The heartbeat runs until the message is settled: recording the outcome can take a
        # while (retries), and JetStream must not hand the continuation to another worker meanwhile.
        heartbeat = asyncio.create_task(self._heartbeat(msg))
        try:
            await self._execute_current(msg, cont, fn, current.steps or cont.steps)
        finally:
            heartbeat.cancel()

    async def _execute_current(
        self, msg: Msg, cont: Continuation, fn: Flow, steps: dict[str, StepResult]
    ) -> None:
        client = await self.client()
        ctx = RunContext(
            RunInfo(
                run_id=cont.run_id,
                flow=cont.flow,
                generation=cont.generation,
                resume_id=cont.resume_id,
                identity=cont.identity,
                subject=cont.subject or cont.run_id,
                extras=cont.extras,
            ),
            durable=True,
            answers=cont.answers,
            steps=steps,
            client=client,
        )
        log.debug(
            "run.resumed" if cont.generation else "run.executing",
            run_id=cont.run_id,
            flow=cont.flow,
            generation=cont.generation,
            replayed_steps=len(steps),
        )
        outcome = await drive(fn, ctx, cont.input)
        if isinstance(outcome, Stopped):
            log.debug(f"run.{outcome.why}", run_id=cont.run_id, flow=cont.flow, resume_id=cont.resume_id)
            await msg.ack()
            return
        if cont.generation:
            faults.hit("worker.after_flow")
        deliveries = msg.metadata.num_delivered
        outcome, reply = await self._record_park_or_end(client, cont, ctx, outcome)
        if isinstance(outcome, Raised):
            reply = await self._retry_or_fail(msg, client, cont, outcome, deliveries)
            if reply is None:
                return  # redelivered later
        assert reply is not None
        if isinstance(reply, LaybyError):
            if not await self._settle_refused(msg, client, cont, ctx, reply):
                return  # left to another worker
        else:
            if not isinstance(outcome, Parked):
                # The run ended (finished or failed): asks it did not park on would linger.
                await self._prune_strays(client, ctx)
            _log_recorded(cont, ctx, outcome)
        if cont.generation:
            faults.hit("worker.before_ack")
        await msg.ack()

    async def _record_park_or_end(
        self, client: Client, cont: Continuation, ctx: RunContext, outcome: Outcome
    ) -> tuple[Outcome, RunAccepted | LaybyError | None]:
        """Record a parked or finished execution; one the ask service refuses as bad input
        becomes a final ``Raised`` (the same flow parks or ends the same way every time: retrying
        cannot help). A raised outcome is returned as it is, nothing recorded yet."""
        if isinstance(outcome, Parked):
            reply = await client.run_command(
                ParkRun(
                    token=client.token,
                    run_id=cont.run_id,
                    generation=cont.generation + 1,
                    asks=ctx.parked,
                    answers=cont.answers,
                    resume_id=cont.resume_id,
                )
            )
            if isinstance(reply, BadInput):
                return Raised(f"the park was refused: {reply.message}", final=True), None
            return outcome, reply
        if isinstance(outcome, Finished):
            reply = await client.run_command(_end_run(client, cont, outcome))
            if isinstance(reply, BadInput):
                return Raised(f"the flow's result was refused: {reply.message}", final=True), None
            return outcome, reply
        return outcome, None

    async def _retry_or_fail(
        self, msg: Msg, client: Client, cont: Continuation, outcome: Raised, deliveries: int
    ) -> RunAccepted | LaybyError | None:
        """Redeliver a raised execution later (None), or, at its last attempt or when retrying
        cannot help, record the run as failed (the ask service's reply)."""
        if outcome.transient:
            # Layby itself was unavailable: not the flow's fault, never counted against it.
            log.warning("worker.platform_unavailable", run_id=cont.run_id, error=outcome.error)
            await msg.nak(delay=_backoff(min(deliveries, 6)))
            return None
        if not outcome.final and deliveries < self._settings.continuation_max_attempts:
            delay = _backoff(deliveries)
            log.warning(
                "worker.flow_raised",
                run_id=cont.run_id,
                resume_id=cont.resume_id,
                attempt=deliveries,
                retry_in=delay,
                error=outcome.error,
            )
            await msg.nak(delay=delay)
            return None
        reply = await client.run_command(_end_run(client, cont, outcome, attempts=deliveries))
        log.error(
            "run.failed",
            flow=cont.flow,
            run_id=cont.run_id,
            resume_id=cont.resume_id,
            attempts=deliveries,
            error=outcome.error,
        )
        return reply

    async def _settle_refused(
        self, msg: Msg, client: Client, cont: Continuation, ctx: RunContext, reply: LaybyError
    ) -> bool:
        """The ask service did not record the outcome: True when the continuation is done with
        (acked next), False when it was left to another worker; raises when Layby is unavailable."""
        if isinstance(reply, Conflict):
            # Another execution of this resume recorded its outcome first; its asks are ours
            # too (the same ids), so nothing is pruned here.
            log.debug("worker.superseded", run_id=cont.run_id, resume_id=cont.resume_id)
            return True
        if isinstance(reply, RunCancelledError):
            # Cancelled while it ran: its park or end is not recorded; its stray asks go.
            log.debug("run.cancelled", run_id=cont.run_id, flow=cont.flow, resume_id=cont.resume_id)
            await self._prune_strays(client, ctx)
            return True
        if isinstance(reply, Transient):
            raise reply
        # This worker's token may not act for the run's identity (or the outcome was
        # refused outright): never drop the continuation, leave it to another worker.
        log.error(
            "worker.outcome_refused",
            run_id=cont.run_id,
            identity=cont.identity,
            kind=reply.kind,
            error=reply.message,
        )
        await msg.nak(delay=self._settings.continuation_ack_wait_seconds)
        return False

    async def _prune_strays(self, client: Client, ctx: RunContext) -> None:
        """Asks recorded by an execution that did not park on them would linger: prune them."""
        for ask in ctx.parked:
            if ask.kind == "call":
                continue  # a child run, not a question: it goes on (or was cancelled with the chain)
            with contextlib.suppress(Exception):
                await client.nc.request(
                    client.names.cmd_prune,
                    msgspec.json.encode(Prune(token=client.token, interaction_id=ask.interaction_id)),
                    timeout=10,
                )

    async def _heartbeat(self, msg: Msg) -> None:
        """Tell JetStream the continuation is still being worked on, so it is not redelivered."""
        every = max(self._settings.continuation_ack_wait_seconds / 3, 0.2)
        while True:
            await asyncio.sleep(every)
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await msg.in_progress()


def _log_recorded(cont: Continuation, ctx: RunContext, outcome: Outcome) -> None:
    """The debug line of a recorded park or finish (a failure has its own error line)."""
    if isinstance(outcome, Parked):
        log.debug("run.parked", run_id=cont.run_id, flow=cont.flow, asks=len(ctx.parked))
    elif isinstance(outcome, Finished):
        log.debug("run.finished", run_id=cont.run_id, flow=cont.flow, generation=cont.generation)


def _extras_keys(extras: object) -> list[str]:
    if extras is None:
        return []
    if not isinstance(extras, list | tuple) or not all(
        isinstance(k, str) and 0 < len(k) <= 64 for k in extras
    ):
        raise BadInput("extras must be a list of key names (1-64 characters each)", field="extras")
    return sorted({str(k) for k in extras})


def _require_worker_commands(reply: Refused) -> None:
    """An ask service older than the worker commands refuses them as malformed: say so plainly."""
    if reply.protocol < PROTOCOL_WORKER_COMMANDS and reply.kind == "invalid" and reply.field is None:
        raise Permanent(
            f"the ask service speaks command protocol {reply.protocol}; this worker needs "
            f"{PROTOCOL_WORKER_COMMANDS} or later: upgrade the Layby services"
        )
