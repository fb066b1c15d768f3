"""A refusal at the concurrency cap is true when it is given (docs/asking.md#concurrency-cap).

The projector frees a question's slot when it applies the question's resolution. While it is
behind the log (a leader change, a projector hand-over, a PostgreSQL restart), reservations of
questions already answered still count; an ask must then wait for the projection or get
``Unavailable``, never ``InteractionLimitError`` with fewer questions open than the cap.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from layby_contracts.errors import Unavailable
from layby_contracts.events import InteractionAnswered
from layby_domain.clock import ManualClock
from layby_server.projection.projector import apply_batch, projected_through, read_range
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_services.ask.admission import Admitter
from tests.samples import interaction_asked

pytestmark = pytest.mark.integration

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(hours=1)


async def answered_question(store: EventStore, db: asyncpg.Pool) -> str:
    """A question asked and answered on the log, its slot reserved and not yet freed (the
    projector has not applied the answer)."""
    ix = str(uuid.uuid4())
    subject = store.names.ix(ix)
    asked = interaction_asked(ix, T0, question="Proceed?", timeout_at=LATER, asked_by="alice")
    seq = await store.append(subject, asked, msg_id=f"asked-{ix}", expected_seq=0)
    answer = InteractionAnswered(
        interaction_id=ix, group_id="g", answered_by="bob", answered_at=T0, answer="yes"
    )
    await store.append(subject, answer, msg_id=f"answered-{ix}", expected_seq=seq)
    await db.execute("INSERT INTO admissions (interaction_id, deadline) VALUES ($1, $2)", ix, LATER)
    return ix


async def project_everything(store: EventStore, db: asyncpg.Pool) -> None:
    first, last = await store.bounds()
    async with db.acquire() as conn:
        await apply_batch(conn, await read_range(store, max(first, 1), last))


async def admit_one(admitter: Admitter) -> bool:
    stop = asyncio.Event()
    loop = asyncio.create_task(admitter.run(stop))
    try:
        return await admitter.admit(str(uuid.uuid4()), LATER)
    finally:
        stop.set()
        await loop


async def test_an_ask_at_a_cap_held_by_answered_questions_is_admitted_once_the_projector_catches_up(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """The cap (1) is held by a reservation whose question the log says is answered: the ask is
    not refused; it is decided again once the projection holds the answer, and admitted."""
    await answered_question(store, db)
    consulted: list[bool] = []

    async def settled() -> bool:
        consulted.append(True)
        await project_everything(store, db)  # the projector catches up while the ask waits
        return await projected_through(db, store, within=5)

    admitter = Admitter(db, cap=1, clock=ManualClock(T0), namespace=settings.namespace, settled=settled)
    assert await admit_one(admitter) is True
    assert consulted == [True]


async def test_an_ask_at_a_cap_the_projection_cannot_confirm_in_time_is_unavailable_not_refused(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """With the projector stalled behind the answer, the ask gets Unavailable (nothing recorded,
    try again), never InteractionLimitError."""
    await answered_question(store, db)
    admitter = Admitter(
        db,
        cap=1,
        clock=ManualClock(T0),
        namespace=settings.namespace,
        settled=lambda: projected_through(db, store, within=0.1),
    )
    with pytest.raises(Unavailable, match="behind the event log"):
        await admit_one(admitter)


async def test_a_cap_held_by_open_questions_is_refused_once_the_projection_is_current(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """A full pool of questions that are really open is refused as before: the projection is
    current, so the refusal is true."""
    ix = await answered_question(store, db)
    await project_everything(store, db)  # the answer is applied: the slot is free again
    assert await db.fetchval("SELECT count(*) FROM admissions WHERE interaction_id = $1", ix) == 0
    admitter = Admitter(
        db,
        cap=1,
        clock=ManualClock(T0),
        namespace=settings.namespace,
        settled=lambda: projected_through(db, store, within=5),
    )
    assert await admit_one(admitter) is True  # takes the one slot
    assert await admit_one(admitter) is False  # the pool is really full


async def test_a_checkpoint_past_an_unacknowledged_batch_does_not_count_as_current(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """A batch the projector was handed and never acknowledged (lost in flight with its
    consumer's leader) comes back only after its ack wait; a checkpoint that later batches moved
    past it is not a watermark, so the projection is not called current until the floor of the
    projector's acknowledgements reaches the log's end."""
    from layby_server.store.consumer import ensure_consumer

    await answered_question(store, db)
    durable = await ensure_consumer(store, "projector", deliver_all=True)
    pull = await store.js.pull_subscribe_bind(durable, store.names.events_stream)
    handed = await pull.fetch(10, timeout=5)  # handed out, never acknowledged
    await project_everything(store, db)  # the checkpoint reaches the log's end all the same
    assert await projected_through(db, store, within=0.1) is False
    for msg in handed:
        await msg.ack_sync()
    assert await projected_through(db, store, within=5) is True
