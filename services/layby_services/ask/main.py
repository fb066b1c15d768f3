"""Composition root of the ask service: ``layby serve ask``."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import msgspec
from nats.aio.msg import Msg

from layby_contracts.commands import (
    COMMAND_DECODER,
    DOOR_COMMAND_DECODER,
    NOTIFY_DECODER,
    Ask,
    AttachWorker,
    CancelRun,
    CheckCurrent,
    Command,
    DeleteDoor,
    DoorCommand,
    EndRun,
    ListParked,
    Look,
    MoveRun,
    Notify,
    ParkRun,
    Prune,
    PutDoor,
    RecordStep,
    ReserveTicket,
    RetryRun,
    StartRun,
    Visit,
    VisitStatus,
    WorkerSeen,
)
from layby_contracts.errors import BadInput, LaybyError, Unavailable
from layby_contracts.refusals import to_refused
from layby_domain.clock import Clock
from layby_domain.notify import field_of
from layby_server.auth import Authenticator
from layby_server.channels import close_channels
from layby_server.observability import tracing
from layby_server.observability.logs import get_logger
from layby_server.projection.projector import projected_through
from layby_server.projection.workers import WorkerRegistry
from layby_server.service import open_resources, run_main
from layby_server.settings import Settings, load_settings
from layby_server.write.feed import Feed
from layby_server.write.jqrun import LazyJq
from layby_services.ask.admission import CALLER_POOL, Admitter
from layby_services.ask.doors import DoorHandlers
from layby_services.ask.handlers import AskHandlers
from layby_services.ask.notify import NotifyHandlers
from layby_services.ask.visits import ToolVisits

log = get_logger("layby.ask")
_enc = msgspec.json.Encoder()
MAX_INFLIGHT = 2000


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    async with (
        open_resources(settings, name="ask", clock=clock, secrets=True) as res,
        LazyJq() as jq,
    ):
        assert res.pool is not None
        # A refusal at a cap waits until the projector has freed the slots of what resolved.
        settled = functools.partial(projected_through, res.pool, res.store)
        admitter = Admitter(
            res.pool,
            cap=settings.max_concurrent,
            clock=res.clock,
            namespace=settings.namespace,
            settled=settled,
        )
        # Caller asks have a pool of their own: neither cap counts the other's entries.
        caller_admitter = Admitter(
            res.pool,
            cap=settings.max_concurrent_caller,
            clock=res.clock,
            namespace=settings.namespace,
            table=CALLER_POOL,
            settled=settled,
        )
        auth = Authenticator(settings.api_tokens)
        handlers = AskHandlers(
            settings, res.store, admitter, auth, res.clock, caller_admitter=caller_admitter
        )
        handlers.runs.workers = WorkerRegistry(res.pool)
        doors = DoorHandlers(settings, res.store, auth, res.clock, jq)
        tools = ToolVisits(res.store, auth, res.clock, handlers.runs, handlers.entries)
        feed = Feed(
            res.store.js,
            settings.names,
            max_entries=settings.notifications_feed_max,
            ttl_seconds=settings.notifications_feed_ttl_seconds,
            now=res.clock.now,
        )
        notifications = NotifyHandlers(
            settings,
            res.store,
            auth,
            res.clock,
            feed,
            handlers.channels,
            res.metrics,
        )
        decoders: dict[str, msgspec.json.Decoder[Any]] = {
            settings.names.cmd_door: DOOR_COMMAND_DECODER,
            settings.names.cmd_notify: NOTIFY_DECODER,
        }
        inflight: set[asyncio.Task[None]] = set()
        slots = asyncio.Semaphore(MAX_INFLIGHT)

        async def dispatch(cmd: Command | DoorCommand | Notify) -> object:
            match cmd:
                case Notify():
                    return await notifications.notify(cmd)
                case Ask():
                    return await handlers.ask(cmd)
                case ReserveTicket():
                    return await handlers.reserve(cmd)
                case Prune():
                    return await handlers.prune(cmd)
                case Look():
                    return await handlers.look(cmd)
                case StartRun():
                    return await handlers.runs.start(cmd)
                case ParkRun():
                    return await handlers.runs.park(cmd)
                case EndRun():
                    return await handlers.runs.end(cmd)
                case AttachWorker():
                    return await handlers.runs.attach(cmd)
                case CheckCurrent():
                    return await handlers.runs.current(cmd)
                case RecordStep():
                    return await handlers.runs.step(cmd)
                case CancelRun():
                    return await handlers.runs.cancel(cmd)
                case RetryRun():
                    return await handlers.runs.retry(cmd)
                case MoveRun():
                    return await handlers.runs.move(cmd)
                case WorkerSeen():
                    return await handlers.runs.seen(cmd)
                case PutDoor():
                    return await doors.put(cmd)
                case DeleteDoor():
                    return await doors.delete(cmd)
                case Visit():
                    return await tools.visit(cmd)
                case ListParked():
                    return await tools.list(cmd)
                case VisitStatus():
                    return await tools.status(cmd)

        async def handle(msg: Msg) -> None:
            # Door commands have their own subject and union (each subject's decoder knows its tags).
            decoder = decoders.get(msg.subject, COMMAND_DECODER)
            try:
                cmd: Command | DoorCommand | Notify = decoder.decode(msg.data)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                reply: object = to_refused(BadInput(f"malformed command: {exc}", field=field_of(exc)))
            else:
                # A child of the sender's span (the SDK's headers), or a new root; every event
                # appended while deciding carries this span's context.
                with tracing.on_command("ask", cmd, msg.headers) as span:
                    try:
                        reply = await dispatch(cmd)
                    except LaybyError as exc:
                        reply = to_refused(exc)  # the one conversion of errors to replies
                        tracing.refused(span, exc)
                    except Exception as exc:  # noqa: BLE001 - the asker must get an answer, the service lives on
                        log.error("ask.command_failed", error=repr(exc))
                        reply = to_refused(Unavailable("the ask service failed; try again"))
                        tracing.failed(span, exc)
            if msg.reply:
                await msg.respond(_enc.encode(reply))
            else:
                log.warning("ask.no_reply_subject", subject=msg.subject)

        async def on_message(msg: Msg) -> None:
            await slots.acquire()
            task = asyncio.create_task(handle(msg))
            inflight.add(task)
            task.add_done_callback(_done)

        def _done(task: asyncio.Task[None]) -> None:
            inflight.discard(task)
            slots.release()

        names = settings.names
        subs = [
            await res.nc.subscribe(names.cmd_ask, queue="layby-ask", cb=on_message),
            await res.nc.subscribe(names.cmd_prune, queue="layby-ask", cb=on_message),
            await res.nc.subscribe(names.cmd_run, queue="layby-ask", cb=on_message),
            await res.nc.subscribe(names.cmd_door, queue="layby-ask", cb=on_message),
            await res.nc.subscribe(names.cmd_notify, queue="layby-ask", cb=on_message),
        ]
        log.info(
            "ask.ready",
            namespace=settings.namespace,
            max_concurrent=settings.max_concurrent,
            max_concurrent_caller=settings.max_concurrent_caller,
        )
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(admitter.run(stop))
                tg.create_task(caller_admitter.run(stop))
                await stop.wait()
        finally:
            for sub in subs:
                await sub.unsubscribe()
            if inflight:
                await asyncio.wait(inflight, timeout=5)
            await close_channels(handlers.channels)


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
