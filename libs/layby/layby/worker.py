"""The run driver: ``layby.Worker`` hosts resumable flows (issue 3, docs/aggregates/run.md#parking,
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
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg

from layby import faults
from layby.connection import until_stopped
from layby.logs import get_logger
from layby.runs import RunContext, RunInfo, bind, unbind
from layby.sdk import Client, connect
from layby.settings import ClientSettings, load_client_settings
from layby_contracts.commands import (
    CONTINUATION_DECODER,
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
)
from layby_contracts.errors import BadInput, Conflict, LaybyError, Permanent, Transient, Unavailable
from layby_contracts.refusals import from_refused
from layby_domain.validation import is_flow_name, new_interaction_id

log = get_logger("layby.worker")
Flow = Callable[[Any], Coroutine[Any, Any, Any]]
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 60.0
NOT_YET_DELAY = 0.5
FETCH_BATCH = 64


class Finished(msgspec.Struct, frozen=True):
    result: Any


class Parked(msgspec.Struct, frozen=True):
    pass


class Raised(msgspec.Struct, frozen=True):
    error: str
    transient: bool = False
    """Layby was unavailable (not the flow's fault): retried, never counted against the flow."""
    final: bool = False
    """Retrying cannot help (the outcome itself was refused): fail the run now."""


Outcome = Finished | Parked | Raised


async def drive(fn: Flow, ctx: RunContext, input: Any) -> Outcome:
    """Execute ``fn(input)`` once under ``ctx`` until it returns, raises, or parks."""
    token = bind(ctx)
    try:
        task: asyncio.Task[Any] = asyncio.create_task(fn(input))
    finally:
        unbind(token)
    while True:
        changed = asyncio.create_task(ctx.changed.wait())
        try:
            await asyncio.wait({task, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if task.done():
            break
        ctx.changed.clear()
        await ctx.settle()
        if task.done():
            break
        if ctx.changed.is_set():
            continue  # another ask parked while settling: settle again
        # Every live branch of the flow waits on a park: end this execution at the park.
        task.cancel()
        await asyncio.wait({task}, timeout=10)
        return Parked()
    if task.cancelled():
        return Raised("the flow was cancelled")
    exc = task.exception()
    if exc is not None:
        transient = isinstance(exc, Transient | nats.errors.Error | nats.js.errors.Error)
        return Raised(f"{type(exc).__name__}: {exc}", transient=transient)
    return Finished(task.result())


class _Slots:
    """How many more continuations this worker may execute at once (shared by its flows)."""

    def __init__(self, size: int) -> None:
        self._free = size
        self._changed = asyncio.Event()

    async def take(self, most: int) -> int:
        while self._free <= 0:
            self._changed.clear()
            await self._changed.wait()
        room = min(most, self._free)
        self._free -= room
        return room

    def give(self, count: int) -> None:
        if count > 0:
            self._free += count
            self._changed.set()


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
        self.ready = asyncio.Event()
        """Set once ``serve`` is bound to every registered flow's continuations."""
        self._bound: set[str] = set()
        self._concurrency = concurrency

    # -- registration and starting -------------------------------------------------------

    def flow(self, name: str) -> Callable[[Flow], Flow]:
        """Register an async function of one JSON input as the flow ``name``."""
        if not is_flow_name(name):
            raise BadInput("flow name must be 1-64 of [A-Za-z0-9_-]", field="name")
        if name in self._flows:
            raise BadInput(f"flow {name!r} is already registered", field="name")

        def register(fn: Flow) -> Flow:
            if not asyncio.iscoroutinefunction(fn):
                raise BadInput(f"flow {name!r} must be an async function", field="name")
            self._flows[name] = fn
            return fn

        return register

    async def client(self) -> Client:
        if self._client is None:
            self._client = await connect(settings=self._settings)
        return self._client

    async def start(self, name: str, input: Any = None, *, run_id: str | None = None) -> str:
        """Start a durable run of ``name``; any worker hosting it executes it. Returns the run id."""
        if self.checkpointer == "memory":
            raise RuntimeError(
                "Worker.start() records a durable run, and this worker uses the in-memory "
                "checkpointer; use run_local() for sync-only runs, or checkpointer='postgres'"
            )
        return await (await self.client()).start_run(name, input, run_id=run_id)

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
            raise RuntimeError("an in-memory worker has no durable runs to serve")
        if not self._flows:
            raise RuntimeError("register at least one flow with @worker.flow(name) before serve()")
        await self.client()  # connect (and fail) before serving any flow
        slots = _Slots(self._concurrency)
        async with asyncio.TaskGroup() as tg:
            for name in self._flows:
                tg.create_task(self._serve_flow(name, stop, slots))
        log.info("worker.stopped")

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

    async def _serve_flow(self, name: str, stop: asyncio.Event, slots: _Slots) -> None:
        sub = await self._consumer(name)
        running: set[asyncio.Task[None]] = set()
        log.info("worker.ready", flow=name)
        self._bound.add(name)
        if self._bound >= set(self._flows):
            self.ready.set()
        try:
            while not stop.is_set():
                # Fetch only what can start now: a fetched continuation that waited for a slot
                # would get no heartbeat and be redelivered to another worker meanwhile.
                room = await slots.take(FETCH_BATCH)
                try:
                    msgs = await until_stopped(sub.fetch(room, timeout=1.0), stop) or []
                except (TimeoutError, nats.errors.TimeoutError):
                    slots.give(room)
                    continue
                except (nats.errors.Error, nats.js.errors.Error) as exc:
                    slots.give(room)
                    log.warning("worker.fetch_failed", flow=name, error=str(exc))
                    await asyncio.sleep(0.5)
                    with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                        sub = await self._consumer(name)
                    continue
                slots.give(room - len(msgs))
                if stop.is_set():
                    # Fetched while stopping: hand them straight back to the other workers.
                    for msg in msgs:
                        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                            await msg.nak()
                    slots.give(len(msgs))
                    break
                for msg in msgs:
                    task = asyncio.create_task(self._execute(msg))
                    running.add(task)
                    task.add_done_callback(running.discard)
                    task.add_done_callback(lambda _t: slots.give(1))
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
            await self._execute_continuation(msg, cont)
        except (Transient, nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            log.warning("worker.retry", run_id=cont.run_id, resume_id=cont.resume_id, error=repr(exc))
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await msg.nak(delay=NOT_YET_DELAY)

    async def _is_current(self, cont: Continuation) -> bool | None:
        """True when the run's log says this continuation is the one to execute now; False
        for a duplicate of one already executed; None when the log has not caught up yet (the
        ask service reads the log; the worker only asks)."""
        client = await self.client()
        reply = await client.request_run(
            CheckCurrent(token=client.token, run_id=cont.run_id, generation=cont.generation)
        )
        if isinstance(reply, Refused):
            _require_worker_commands(reply)
            raise from_refused(reply)
        if not isinstance(reply, Current):
            raise Transient(f"unexpected reply to a current check: {type(reply).__name__}")
        return None if reply.status == "unknown" else reply.status == "current"

    async def _execute_continuation(self, msg: Msg, cont: Continuation) -> None:
        fn = self._flows.get(cont.flow)
        if fn is None:
            await msg.nak(delay=NOT_YET_DELAY)
            return
        current = await self._is_current(cont)
        if current is None:
            await msg.nak(delay=NOT_YET_DELAY)
            return
        if not current:
            log.info("worker.duplicate_continuation", run_id=cont.run_id, resume_id=cont.resume_id)
            await msg.ack()
            return
        # The heartbeat runs until the message is settled: recording the outcome can take a
        # while (retries), and JetStream must not hand the continuation to another worker meanwhile.
        heartbeat = asyncio.create_task(self._heartbeat(msg))
        try:
            await self._execute_current(msg, cont, fn)
        finally:
            heartbeat.cancel()

    async def _execute_current(self, msg: Msg, cont: Continuation, fn: Flow) -> None:
        client = await self.client()
        ctx = RunContext(
            RunInfo(
                run_id=cont.run_id,
                flow=cont.flow,
                generation=cont.generation,
                resume_id=cont.resume_id,
                identity=cont.identity,
            ),
            durable=True,
            answers=cont.answers,
            client=client,
        )
        outcome = await drive(fn, ctx, cont.input)
        if cont.generation:
            faults.hit("worker.after_flow")
        deliveries = msg.metadata.num_delivered
        reply: RunAccepted | LaybyError | None = None
        ended = False
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
                # The same flow parks the same way every time: retrying cannot help.
                outcome, reply = Raised(f"the park was refused: {reply.message}", final=True), None
        elif isinstance(outcome, Finished):
            reply = await client.run_command(
                EndRun(
                    token=client.token,
                    run_id=cont.run_id,
                    generation=cont.generation,
                    outcome="finished",
                    result=outcome.result,
                    resume_id=cont.resume_id,
                )
            )
            ended = True
            if isinstance(reply, BadInput):
                outcome, reply, ended = (
                    Raised(f"the flow's result was refused: {reply.message}", final=True),
                    None,
                    False,
                )
        if isinstance(outcome, Raised):
            if outcome.transient:
                # Layby itself was unavailable: not the flow's fault, never counted against it.
                log.warning("worker.platform_unavailable", run_id=cont.run_id, error=outcome.error)
                await msg.nak(delay=_backoff(min(deliveries, 6)))
                return
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
                return
            reply = await client.run_command(
                EndRun(
                    token=client.token,
                    run_id=cont.run_id,
                    generation=cont.generation,
                    outcome="failed",
                    error=outcome.error,
                    attempts=deliveries,
                    resume_id=cont.resume_id,
                )
            )
            ended = True
            log.error(
                "worker.run_failed",
                run_id=cont.run_id,
                resume_id=cont.resume_id,
                attempts=deliveries,
                error=outcome.error,
            )
        assert reply is not None
        if isinstance(reply, LaybyError):
            if isinstance(reply, Conflict):
                # Another execution of this resume recorded its outcome first; its asks are ours
                # too (the same ids), so nothing is pruned here.
                log.info("worker.superseded", run_id=cont.run_id, resume_id=cont.resume_id)
            elif isinstance(reply, Transient):
                raise reply
            else:
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
                return
        elif ended:
            await self._prune_strays(client, ctx)
        if cont.generation:
            faults.hit("worker.before_ack")
        await msg.ack()

    async def _prune_strays(self, client: Client, ctx: RunContext) -> None:
        """Asks recorded by an execution that did not park on them would linger: prune them."""
        for ask in ctx.parked:
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


def _require_worker_commands(reply: Refused) -> None:
    """An ask service older than the worker commands refuses them as malformed: say so plainly."""
    if reply.protocol < PROTOCOL_WORKER_COMMANDS and reply.kind == "invalid" and reply.field is None:
        raise Permanent(
            f"the ask service speaks command protocol {reply.protocol}; this worker needs "
            f"{PROTOCOL_WORKER_COMMANDS} or later: upgrade the Layby services"
        )
