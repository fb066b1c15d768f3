"""The consumer loop: durable pull consumers shared by replicas (CONVENTIONS 5-7).

This is the one module that maps errors to ack / nak-with-delay / terminate:
- a malformed message is terminated and logged (it can never succeed);
- ``Transient`` and unexpected errors nak the batch with a delay, so it is redelivered;
- a message redelivered ``MAX_DELIVER`` times is terminated and logged at error.
The handler gets whole batches; acks are sent only after it returns (after commit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from contracts.events import decode_event
from layby.errors import Permanent
from layby.eventstore import EventStore, Stored
from layby.logs import get_logger

log = get_logger("layby.consumer")
MAX_DELIVER = 20
NAK_DELAY_SECONDS = 1.0
FETCH_BATCH = 256

Handler = Callable[[list[Stored]], Awaitable[None]]


async def ensure_consumer(store: EventStore, role: str, *, deliver_all: bool) -> str:
    durable = store.names.durable(role)
    config = ConsumerConfig(
        durable_name=durable,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL if deliver_all else DeliverPolicy.NEW,
        filter_subject=store.names.ix_all,
        ack_wait=30,
        max_ack_pending=20000,
        max_deliver=-1,
    )
    try:
        await store.js.consumer_info(store.names.events_stream, durable)
    except nats.js.errors.NotFoundError:
        try:
            await store.js.add_consumer(store.names.events_stream, config)
        except nats.js.errors.BadRequestError:
            pass  # a sibling replica created it first
    return durable


async def _settle(msgs: list[Msg], ok: bool) -> None:
    for msg in msgs:
        try:
            if ok:
                await msg.ack()
            elif msg.metadata.num_delivered >= MAX_DELIVER:
                log.error("consumer.gave_up", seq=msg.metadata.sequence.stream, subject=msg.subject)
                await msg.term()
            else:
                await msg.nak(delay=NAK_DELAY_SECONDS)
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("consumer.settle_failed", error=str(exc))


async def consume(
    store: EventStore,
    *,
    role: str,
    handler: Handler,
    stop: asyncio.Event,
    deliver_all: bool = False,
    linger: float = 0.0,
) -> None:
    """Run ``handler`` over batches until ``stop`` is set. Survives NATS restarts.

    ``linger`` (seconds) trades latency for throughput: after a batch smaller than the fetch size
    the loop waits that long before fetching again, so messages arriving one by one are taken
    in batches (fewer pull requests, one transaction per batch).
    """
    durable = await ensure_consumer(store, role, deliver_all=deliver_all)
    sub = await store.js.pull_subscribe_bind(durable, store.names.events_stream)
    try:
        await _loop(store, sub, role=role, handler=handler, stop=stop, deliver_all=deliver_all, linger=linger)
    finally:
        try:
            await sub.unsubscribe()
        except (nats.errors.Error, nats.js.errors.Error):
            pass


async def _loop(
    store: EventStore,
    sub: Any,
    *,
    role: str,
    handler: Handler,
    stop: asyncio.Event,
    deliver_all: bool,
    linger: float,
) -> None:
    while not stop.is_set():
        try:
            msgs = await sub.fetch(FETCH_BATCH, timeout=1.0)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        except (nats.errors.Error, nats.js.errors.Error) as exc:
            log.warning("consumer.fetch_failed", role=role, error=str(exc))
            await asyncio.sleep(0.5)
            try:
                await ensure_consumer(store, role, deliver_all=deliver_all)
            except (nats.errors.Error, nats.js.errors.Error):
                pass
            continue
        good: list[Msg] = []
        batch: list[Stored] = []
        for msg in msgs:
            try:
                batch.append(Stored(seq=msg.metadata.sequence.stream, event=decode_event(msg.data)))
                good.append(msg)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.error("consumer.malformed", role=role, subject=msg.subject, error=str(exc))
                await msg.term()
        if not batch:
            continue
        try:
            await handler(batch)
        except Permanent as exc:
            log.error("consumer.permanent", role=role, error=str(exc))
            for msg in good:
                await msg.term()
            continue
        except Exception as exc:  # noqa: BLE001 - any failure here means: retry later, never drop
            log.warning("consumer.retry", role=role, error=repr(exc), first_seq=batch[0].seq)
            await _settle(good, ok=False)
            continue
        await _settle(good, ok=True)
        if linger and len(msgs) < FETCH_BATCH:
            await asyncio.sleep(linger)


async def consume_push(
    store: EventStore, *, role: str, handler: Handler, stop: asyncio.Event, deliver_all: bool = False
) -> None:
    """Like ``consume``, for latency-critical roles: a durable *push* consumer with a deliver
    group shared by the role's replicas. The server sends each message as it is stored (no pull
    round trips); each is handled as a batch of one and acknowledged after the handler returns."""
    durable = store.names.durable(role)

    async def on_message(msg: Msg) -> None:
        try:
            stored = Stored(seq=msg.metadata.sequence.stream, event=decode_event(msg.data))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.error("consumer.malformed", role=role, subject=msg.subject, error=str(exc))
            await msg.term()
            return
        try:
            await handler([stored])
        except Permanent as exc:
            log.error("consumer.permanent", role=role, error=str(exc))
            await msg.term()
            return
        except Exception as exc:  # noqa: BLE001 - any failure here means: retry later, never drop
            log.warning("consumer.retry", role=role, error=repr(exc), seq=stored.seq)
            await _settle([msg], ok=False)
            return
        await _settle([msg], ok=True)

    sub = await store.js.subscribe(
        store.names.ix_all,
        queue=durable,
        durable=durable,
        stream=store.names.events_stream,
        cb=on_message,
        manual_ack=True,
        config=ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL if deliver_all else DeliverPolicy.NEW,
            ack_wait=30,
            max_ack_pending=20000,
            max_deliver=-1,
        ),
    )
    try:
        await stop.wait()
    finally:
        try:
            await sub.unsubscribe()
        except (nats.errors.Error, nats.js.errors.Error):
            pass
