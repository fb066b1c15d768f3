"""Events a role has nothing to do with (docs/performance.md#consumers): a consumer acknowledges
them as they arrive and never hands them to its handler; every other event reaches the handler,
and nothing is left unacknowledged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from layby_contracts.events import Event, InteractionAsked
from layby_server.store.consumer import consume, consume_push
from layby_server.store.eventstore import EventStore, Stored
from tests.helpers import eventually
from tests.samples import answered, interaction_asked

pytestmark = pytest.mark.integration


def _asked(event: Event) -> bool:
    return isinstance(event, InteractionAsked)


async def _append_questions(store: EventStore, count: int) -> set[str]:
    now = datetime.now(UTC)
    answered_ids: set[str] = set()
    for i in range(count):
        asked = interaction_asked(f"skip-{i}", now)
        subject = store.names.ix(asked.interaction_id)
        await store.append(subject, asked, msg_id=f"skip-a-{i}", expected_seq=0)
        await store.append(subject, answered(asked, now), msg_id=f"skip-b-{i}", expected_seq=None)
        answered_ids.add(asked.interaction_id)
    return answered_ids


async def _run(store: EventStore, push: bool) -> None:
    seen: list[Stored] = []
    stop = asyncio.Event()

    async def handler(batch: list[Stored]) -> None:
        seen.extend(batch)

    if push:
        role = "resume"
        running = consume_push(
            store, role=role, handler=handler, stop=stop, concurrency=8, skip=_asked, deliver_all=True
        )
    else:
        role = "delivery"
        running = consume(
            store, role=role, handler=handler, stop=stop, concurrency=8, skip=_asked, deliver_all=True
        )
    task = asyncio.create_task(running)
    try:
        expected = await _append_questions(store, 5)
        await eventually(
            lambda: {s.event.interaction_id for s in seen}, "every answer handled", until=expected.__eq__
        )
        info = await eventually(
            lambda: store.js.consumer_info(store.names.events_stream, store.names.durable(role)),
            "every event acknowledged",
            until=lambda i: i.num_ack_pending == 0 and i.num_pending == 0,
        )
        assert info.ack_floor.stream_seq == info.delivered.stream_seq
        assert len(seen) == 5
        assert not any(isinstance(s.event, InteractionAsked) for s in seen)
    finally:
        stop.set()
        await task


async def test_a_pull_consumer_acknowledges_what_it_skips_without_handing_it_over(store: EventStore) -> None:
    await _run(store, push=False)


async def test_a_push_consumer_acknowledges_what_it_skips_without_handing_it_over(store: EventStore) -> None:
    await _run(store, push=True)
