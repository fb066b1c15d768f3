"""The consumer loop: durable consumers shared by replicas (docs/engineering.md#consumer-loops, ADR 0006).

This is the one module that maps errors to ack / nak-with-delay / terminate:
- a malformed message, or one of an event version this build does not know, is never acked:
  malformed ones are terminated and logged, unknown versions are nakked for a later replica;
- a transient failure (the database or NATS unreachable, ``Transient``) naks with a growing
  delay and never terminates, however long the outage lasts;
- any other failure of a batch is retried message by message, so one poison message cannot
  take its batch-mates with it; a message that keeps failing on its own is terminated and
  logged at error after ``MAX_DELIVER`` deliveries.
The handler gets whole batches; acks are sent only after it returns (after commit).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import asyncpg
import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from layby.connection import until_stopped
from layby_contracts.errors import Permanent, Transient, Unavailable
from layby_contracts.events import Event, decode_event
from layby_server.observability import tracing
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore, Stored

log = get_logger("layby_server.store.consumer")
MAX_DELIVER = 20
NAK_DELAY_SECONDS = 1.0
NAK_DELAY_MAX_SECONDS = 30.0
FETCH_BATCH = 256
ACK_WAIT_SECONDS = 30.0


class RetryLater(Exception):
    """A handler's message must come back after ``delay`` seconds (a webhook whose receiver
    failed): nakked with exactly that delay, never terminated, never counted as a failure."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"retry in {delay:.3f}s")
        self.delay = delay


Handler = Callable[[list[Stored]], Awaitable[None]]
Traced = Callable[[Event], bool]
"""Which events a role's handler does something with: only those get a span (docs/tracing.md#cost)."""
Skipped = Callable[[Event], bool]
"""Which events a role's handler has nothing to do with: each is acknowledged as it arrives and
never handed to the handler — no task, no heartbeat, no span (docs/performance.md#consumers)."""
Fetch = Callable[[int], Awaitable[list[Msg]]]


async def _reconcile_filter(
    store: EventStore, durable: str, filter_subject: str, *, ack_wait: float | None = None
) -> int | None:
    """When a durable from an earlier release filters other subjects, replace it.

    NATS 2.9 cannot change a consumer's filter, so the consumer is deleted and recreated from
    the old one's ack floor: nothing it had not acknowledged is skipped. Returns that start
    sequence, or None when the consumer is absent or already right. ``ack_wait``: the one its
    role wants, given to a durable that is kept (binding to it would keep the one it was made
    with); every NATS Layby supports updates it in place.
    """
    try:
        info = await store.js.consumer_info(store.names.events_stream, durable)
    except nats.js.errors.NotFoundError:
        return None
    if info.config.filter_subject == filter_subject:
        if ack_wait is not None and abs((info.config.ack_wait or 0.0) - ack_wait) >= 0.001:
            info.config.ack_wait = ack_wait
            with contextlib.suppress(nats.js.errors.BadRequestError):  # a sibling's update raced
                await store.js.add_consumer(store.names.events_stream, info.config)
            log.info("consumer.ack_wait", durable=durable, seconds=ack_wait)
        return None
    start = int(info.ack_floor.stream_seq if info.ack_floor else 0) + 1
    # Events the old filter left out may lie below its ack floor (a rolling upgrade appends run
    # events before every consumer is recreated): start no later than the first of them. The
    # handlers are idempotent, so what the old consumer did see is merely seen twice.
    with contextlib.suppress(nats.js.errors.NotFoundError, nats.js.errors.APIError):
        first_new = await store.js.get_msg(
            store.names.events_stream, seq=1, subject=store.names.runs_all, next=True
        )
        if first_new.seq is not None:
            start = min(start, int(first_new.seq))
    log.warning(
        "consumer.refilter", durable=durable, old=info.config.filter_subject, new=filter_subject, start=start
    )
    try:
        await store.js.delete_consumer(store.names.events_stream, durable)
    except nats.js.errors.NotFoundError:
        pass
    return start


def _config(deliver_all: bool, start: int | None, **fields: str) -> ConsumerConfig:
    """The settings every durable of the event log shares; ``start`` resumes a recreated one."""
    config = ConsumerConfig(
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL if deliver_all else DeliverPolicy.NEW,
        ack_wait=ACK_WAIT_SECONDS,
        max_ack_pending=20000,
        max_deliver=-1,
        **fields,  # type: ignore[arg-type]
    )
    if start is not None:
        config.deliver_policy = DeliverPolicy.BY_START_SEQUENCE
        config.opt_start_seq = start
    return config


async def ensure_consumer(
    store: EventStore, role: str, *, deliver_all: bool, filter_subject: str | None = None
) -> str:
    durable = store.names.durable(role)
    subject = filter_subject or store.names.events_all
    start = await _reconcile_filter(store, durable, subject)
    config = _config(deliver_all, start, durable_name=durable, filter_subject=subject)
    try:
        await store.js.consumer_info(store.names.events_stream, durable)
    except nats.js.errors.NotFoundError:
        try:
            await store.js.add_consumer(store.names.events_stream, config)
        except nats.js.errors.BadRequestError:
            pass  # a sibling replica created it first
    return durable


async def ensure_flow_consumer(
    store: EventStore, flow: str, *, version: int = 1, ack_wait_seconds: float
) -> str:
    """The durable pull consumer every worker hosting ``version`` of ``flow`` shares, on the
    continuations stream: each continuation goes to one worker, and back to the others when that
    worker neither finishes nor reports progress within ``ack_wait_seconds``."""
    names = store.names
    durable = names.flow_durable(flow, version)
    config = ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        filter_subject=names.continuations_of(flow, version),
        ack_wait=ack_wait_seconds,
        max_ack_pending=10000,
        max_deliver=-1,
    )
    try:
        try:
            await store.js.consumer_info(names.continuations_stream, durable)
        except nats.js.errors.NotFoundError:
            try:
                await store.js.add_consumer(names.continuations_stream, config)
            except nats.js.errors.BadRequestError:
                pass  # a sibling replica created it first
    except (nats.errors.Error, nats.js.errors.Error) as exc:
        raise Unavailable(f"consumer {durable}: {type(exc).__name__}: {exc}") from exc
    return durable


def is_transient(exc: BaseException) -> bool:
    """Failures that say nothing about the message: retry it, never drop it."""
    return isinstance(
        exc,
        Transient
        | OSError
        | TimeoutError
        | asyncpg.PostgresConnectionError
        | asyncpg.InterfaceError
        | asyncpg.exceptions.CannotConnectNowError
        | asyncpg.exceptions.TooManyConnectionsError
        | asyncpg.exceptions.AdminShutdownError
        | nats.errors.Error,
    )


def _backoff(msg: Msg) -> float:
    return float(min(NAK_DELAY_SECONDS * 2 ** max(msg.metadata.num_delivered - 1, 0), NAK_DELAY_MAX_SECONDS))


async def _settle(msgs: list[Msg], ok: bool, *, transient: bool = True, role: str = "") -> None:
    for msg in msgs:
        try:
            if ok:
                await msg.ack()
            elif not transient and msg.metadata.num_delivered >= MAX_DELIVER:
                log.error(
                    "consumer.gave_up", role=role, seq=msg.metadata.sequence.stream, subject=msg.subject
                )
                await msg.term()
            else:
                await msg.nak(delay=_backoff(msg))
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("consumer.settle_failed", error=str(exc))


async def _decode(msg: Msg, role: str) -> Stored | None:
    """The stored event, or None after settling a message this build cannot use."""
    try:
        return Stored(
            seq=msg.metadata.sequence.stream,
            event=decode_event(msg.data),
            trace=tracing.carrier_of(msg.headers),
            delivered=int(msg.metadata.num_delivered or 1),
        )
    except msgspec.ValidationError as exc:
        if str(exc).startswith("Invalid value") and str(exc).endswith("`$.type`"):
            # An event tag from a newer release (rolling upgrade): leave it for a replica that knows it.
            log.warning("consumer.unknown_version", role=role, subject=msg.subject, error=str(exc))
            await msg.nak(delay=NAK_DELAY_MAX_SECONDS)
            return None
        log.error("consumer.malformed", role=role, subject=msg.subject, error=str(exc))
    except msgspec.DecodeError as exc:
        log.error("consumer.malformed", role=role, subject=msg.subject, error=str(exc))
    await msg.term()
    return None


def _span_of(
    role: str, batch: list[Stored], traced: Traced | None
) -> contextlib.AbstractContextManager[object]:
    """A batch of one gets its event's span (when ``traced`` says the role acts on it); a larger
    batch — the projector's, the only role that takes batches — none."""
    if len(batch) != 1 or not tracing.enabled():
        return tracing.NOTHING
    stored = batch[0]
    if traced is not None and not traced(stored.event):
        return tracing.NOTHING
    return tracing.on_event(role, stored.seq, stored.event, stored.trace)


async def handle_and_settle(
    handler: Handler, msgs: list[Msg], batch: list[Stored], role: str, traced: Traced | None = None
) -> None:
    """Run the handler over a batch and settle every message according to the outcome. The
    handler of one event runs in a span, a child of the event's trace, unless ``traced`` says the
    handler has nothing to do with it."""
    try:
        with _span_of(role, batch, traced):
            await handler(batch)
    except RetryLater as exc:
        for msg in msgs:
            try:
                await msg.nak(delay=exc.delay)
            except (nats.errors.Error, nats.js.errors.Error) as nak_exc:
                log.warning("consumer.settle_failed", error=str(nak_exc))
        return
    except Permanent as exc:
        log.error("consumer.permanent", role=role, error=str(exc), first_seq=batch[0].seq)
        for msg in msgs:
            await msg.term()
        return
    except Exception as exc:  # noqa: BLE001 - classified below; nothing is dropped silently
        if is_transient(exc):
            log.warning("consumer.retry", role=role, error=repr(exc), first_seq=batch[0].seq)
            await _settle(msgs, ok=False, role=role)
            return
        if len(batch) > 1:
            # Isolate the message that fails, so its batch-mates are not held hostage.
            for msg, stored in zip(msgs, batch, strict=True):
                await handle_and_settle(handler, [msg], [stored], role, traced)
            return
        log.warning("consumer.failed", role=role, error=repr(exc), seq=batch[0].seq)
        await _settle(msgs, ok=False, transient=False, role=role)
        return
    await _settle(msgs, ok=True)


async def consume(
    store: EventStore,
    *,
    role: str,
    handler: Handler,
    stop: asyncio.Event,
    deliver_all: bool = False,
    linger: float = 0.0,
    filter_subject: str | None = None,
    concurrency: int = 0,
    traced: Traced | None = None,
    skip: Skipped | None = None,
) -> None:
    """Run ``handler`` over batches until ``stop`` is set. Survives NATS restarts.

    ``linger`` (seconds) trades latency for throughput: after a batch smaller than the fetch size
    the loop waits that long before fetching again, so messages arriving one by one are taken
    in batches (fewer pull requests, one transaction per batch).

    ``concurrency`` > 0 is for handlers that wait on the outside world (a channel's send): each
    message is handled on its own, up to that many at once, acknowledged when its handler
    returns, and kept in progress (``+WPI``) while it runs, so a slow one neither holds back the
    next fetch nor gets redelivered while it is still being handled. ``skip`` (with
    ``concurrency``) names the events the handler has nothing to do with: they are acknowledged
    together as each fetch arrives, without being handed to it.
    """
    durable = await ensure_consumer(store, role, deliver_all=deliver_all, filter_subject=filter_subject)
    sub = await store.js.pull_subscribe_bind(durable, store.names.events_stream)

    async def fetch(size: int) -> list[Msg]:
        """One pull; empty on a quiet timeout, on ``stop`` (a stopping service does not wait out
        the pull), or after recovering from a NATS fault."""
        try:
            return await until_stopped(sub.fetch(size, timeout=1.0), stop) or []
        except (TimeoutError, nats.errors.TimeoutError):
            return []
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("consumer.fetch_failed", role=role, error=str(exc))
            await asyncio.sleep(0.5)
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await ensure_consumer(store, role, deliver_all=deliver_all, filter_subject=filter_subject)
            return []

    try:
        if concurrency > 0:
            await _loop_concurrent(
                fetch,
                role=role,
                handler=handler,
                stop=stop,
                concurrency=concurrency,
                traced=traced,
                skip=skip,
            )
        else:
            await _loop(fetch, role=role, handler=handler, stop=stop, linger=linger, traced=traced)
    finally:
        try:
            await sub.unsubscribe()
        except (nats.errors.Error, nats.js.errors.Error):
            pass


async def _loop(
    fetch: Fetch, *, role: str, handler: Handler, stop: asyncio.Event, linger: float, traced: Traced | None
) -> None:
    while not stop.is_set():
        msgs = await fetch(FETCH_BATCH)
        if not msgs:
            continue
        good: list[Msg] = []
        batch: list[Stored] = []
        for msg in msgs:
            stored = await _decode(msg, role)
            if stored is not None:
                batch.append(stored)
                good.append(msg)
        if batch:
            await handle_and_settle(handler, good, batch, role, traced)
        if linger and len(msgs) < FETCH_BATCH:
            await asyncio.sleep(linger)


class _Heartbeat:
    """Tells the server a long-running message is still being handled (``+WPI`` resets its ack
    wait), every third of the ack wait until cancelled. A timer, not a task: most messages are
    settled long before the first beat, and those cost no task at all."""

    def __init__(self, msg: Msg) -> None:
        self._msg = msg
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(ACK_WAIT_SECONDS / 3, self._beat)

    def _beat(self) -> None:
        _BEATS.add(task := self._loop.create_task(self._send()))
        task.add_done_callback(_BEATS.discard)
        self._timer = self._loop.call_later(ACK_WAIT_SECONDS / 3, self._beat)

    async def _send(self) -> None:
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
            await self._msg.in_progress()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


_BEATS: set[asyncio.Task[None]] = set()


async def _loop_concurrent(
    fetch: Fetch,
    *,
    role: str,
    handler: Handler,
    stop: asyncio.Event,
    concurrency: int,
    traced: Traced | None,
    skip: Skipped | None = None,
) -> None:
    running: set[asyncio.Task[None]] = set()

    async def one(msg: Msg, stored: Stored) -> None:
        beat = _Heartbeat(msg)
        try:
            await handle_and_settle(handler, [msg], [stored], role, traced)
        finally:
            beat.cancel()

    stopping = asyncio.create_task(stop.wait())
    try:
        while not stop.is_set():
            if len(running) >= concurrency:
                await asyncio.wait({*running, stopping}, return_when=asyncio.FIRST_COMPLETED)
                continue
            msgs = await fetch(min(FETCH_BATCH, concurrency - len(running)))
            skipped: list[Msg] = []
            for msg in msgs:
                stored = await _decode(msg, role)
                if stored is None:
                    continue
                if skip is not None and skip(stored.event):
                    skipped.append(msg)
                    continue
                task = asyncio.create_task(one(msg, stored))
                running.add(task)
                task.add_done_callback(running.discard)
            if skipped:
                await _settle(skipped, ok=True)
    finally:
        stopping.cancel()
        if running:
            # Let in-flight handlers settle; the rest are cancelled unacknowledged (never settled
            # as failures), so the server redelivers them to a replica that is still running.
            await asyncio.wait(running, timeout=10)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)


async def consume_push(
    store: EventStore,
    *,
    role: str,
    handler: Handler,
    stop: asyncio.Event,
    deliver_all: bool = False,
    concurrency: int = 1,
    traced: Traced | None = None,
    skip: Skipped | None = None,
    ack_wait: float = ACK_WAIT_SECONDS,
) -> None:
    """Like ``consume``, for latency-critical roles: a durable *push* consumer with a deliver
    group shared by the role's replicas. The server sends each message as it is stored (no pull
    round trips); each is handled as a batch of one and acknowledged after the handler returns.

    ``ack_wait``: how soon a message that was not acknowledged goes to a replica again (one
    handed to a replica that died, or whose acknowledgement was lost with a consumer leader);
    short for roles whose handling is quick and may repeat (docs/reliability.md#redelivery).
    ``skip``: the events the handler has nothing to do with, acknowledged as they arrive."""
    durable = store.names.durable(role)
    start = await _reconcile_filter(store, durable, store.names.events_all, ack_wait=ack_wait)

    slots = asyncio.Semaphore(concurrency)
    running: set[asyncio.Task[None]] = set()

    async def settle_one(msg: Msg, stored: Stored) -> None:
        try:
            await handle_and_settle(handler, [msg], [stored], role, traced)
        finally:
            slots.release()

    async def on_message(msg: Msg) -> None:
        stored = await _decode(msg, role)
        if stored is None:
            return
        if skip is not None and skip(stored.event):
            await _settle([msg], ok=True)  # nothing to do: acknowledged without a slot or a task
            return
        # Messages are handled concurrently (up to ``concurrency``); each is acked on its own.
        await slots.acquire()
        task = asyncio.create_task(settle_one(msg, stored))
        running.add(task)
        task.add_done_callback(running.discard)

    config = _config(deliver_all, start)
    config.ack_wait = ack_wait
    sub = await store.js.subscribe(
        store.names.events_all,
        queue=durable,
        durable=durable,
        stream=store.names.events_stream,
        cb=on_message,
        manual_ack=True,
        config=config,
    )
    try:
        await stop.wait()
    finally:
        try:
            await sub.unsubscribe()
        except (nats.errors.Error, nats.js.errors.Error):
            pass
        if running:
            await asyncio.wait(running, timeout=5)


class Flusher:
    """Waits until the server has what a connection published, with one PING for many waiters:
    ``flushed()`` returns once a flush that started after the call completed, and raises what
    that flush raised (the server was lost or froze before it answered)."""

    def __init__(self, nc: NATS, timeout: float, *, linger: float = 0.0) -> None:
        self._nc = nc
        self._timeout = timeout
        self._linger = linger
        """How long a round waits for more callers before its PING (one PING for a burst)."""
        self._next: asyncio.Future[None] | None = None
        """The round that starts after the one in flight; every caller meanwhile joins it."""
        self._busy = False

    async def flushed(self) -> None:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            self._next.add_done_callback(_retrieved)
            if not self._busy:
                self._busy = True
                _ROUNDS.add(task := asyncio.create_task(self._run()))
                task.add_done_callback(_ROUNDS.discard)
        await asyncio.shield(self._next)  # a cancelled caller does not cancel the round

    async def _run(self) -> None:
        try:
            while self._next is not None:
                if self._linger:
                    await asyncio.sleep(self._linger)
                round_, self._next = self._next, None
                try:
                    await self._nc.flush(timeout=self._timeout)  # type: ignore[arg-type]  # seconds; fractions work
                except Exception as exc:  # noqa: BLE001 - handed to every caller of the round
                    round_.set_exception(exc)
                else:
                    round_.set_result(None)
        finally:
            self._busy = False


_ROUNDS: set[asyncio.Task[None]] = set()


def _retrieved(round_: asyncio.Future[None]) -> None:
    if not round_.cancelled():
        round_.exception()  # a round whose callers all left is not an unretrieved error


async def pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less when ``stop`` is set meanwhile (a stopping service does not wait)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def every(
    stop: asyncio.Event,
    seconds: Callable[[], float] | float,
    one_pass: Callable[[], Awaitable[object]],
    *,
    failed: Callable[[BaseException], object],
    errors: tuple[type[BaseException], ...],
) -> None:
    """Run ``one_pass`` every ``seconds`` until ``stop``; a pass that fails with one of
    ``errors`` (the database or the log unreachable for a moment) is reported to ``failed`` and
    the next pass tries again."""
    while not stop.is_set():
        try:
            await one_pass()
        except errors as exc:
            failed(exc)
        await pause(stop, seconds() if callable(seconds) else seconds)
