"""Redelivery and wakes on a cluster (docs/reliability.md#redelivery, #lost-wakes): a consumer
gets the ack wait its role wants even when its durable exists already, and the resume service
acknowledges a batch only once NATS holds its wakes."""

from __future__ import annotations

import asyncio

import nats.errors
import pytest

from layby.connection import connect_nats
from layby_server.store.consumer import Flusher, _reconcile_filter, ensure_consumer
from layby_server.store.eventstore import EventStore

pytestmark = pytest.mark.integration


async def test_an_existing_durable_is_given_the_ack_wait_its_role_wants(store: EventStore) -> None:
    """A durable made with the default 30 s (an earlier release) is updated in place to the
    resume role's 5 s: binding to it would keep the old one."""
    durable = await ensure_consumer(store, "resume", deliver_all=False)
    before = await store.js.consumer_info(store.names.events_stream, durable)
    assert before.config.ack_wait == 30.0
    assert await _reconcile_filter(store, durable, store.names.events_all, ack_wait=5.0) is None
    after = await store.js.consumer_info(store.names.events_stream, durable)
    assert after.config.ack_wait == 5.0
    assert after.config.filter_subject == before.config.filter_subject


async def test_wakes_are_confirmed_with_one_flush_for_many_and_a_lost_server_is_an_error(
    nats_server: tuple[str, object],
) -> None:
    """Many callers at once share flushes and each returns once the server has what was
    published before its call; a connection that cannot flush raises to every caller, so the
    batch is redelivered rather than acknowledged."""
    nc = await connect_nats(nats_server[0], name="test-flusher")
    flusher = Flusher(nc, timeout=2.0)
    flushes = 0
    real = nc.flush

    async def counted(timeout: float = 2.0) -> None:
        nonlocal flushes
        flushes += 1
        await real(timeout)  # type: ignore[arg-type]

    nc.flush = counted  # type: ignore[method-assign]
    await asyncio.gather(*(flusher.flushed() for _ in range(50)))
    assert 1 <= flushes <= 2
    await nc.close()
    with pytest.raises(nats.errors.ConnectionClosedError):
        await flusher.flushed()
