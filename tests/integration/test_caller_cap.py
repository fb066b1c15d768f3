"""The caller concurrency cap: a pool of its own for caller asks and the waiting outcomes they leave,
kept and freed by the projector (docs/caller-asks.md#the-concurrency-cap)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from layby_contracts.doors import Outcome
from layby_contracts.errors import InteractionLimitError
from layby_contracts.events import (
    ConversationReplied,
    DoorDeleted,
    Event,
    ScheduleFired,
    SubjectIndexed,
    VisitRecorded,
    VisitSettled,
)
from layby_contracts.refusals import from_refused, to_refused
from layby_domain.clock import ManualClock
from layby_server.projection.projector import apply_batch
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore, Stored
from layby_services.ask.admission import CALLER_POOL, USER_POOL, Admitter, caller_deadline, caller_limit_error
from tests.conftest import System
from tests.helpers import eventually
from tests.samples import answered, caller_ask, removed, settled, taken

pytestmark = pytest.mark.integration

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
DAY = 86400.0


@contextlib.asynccontextmanager
async def running(*admitters: Admitter) -> AsyncIterator[None]:
    """The admitters' batching loops, for the block's length (as the ask service runs them)."""
    stop = asyncio.Event()
    tasks = [asyncio.create_task(a.run(stop)) for a in admitters]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks)


def pool(db: asyncpg.Pool, settings: Settings, cap: int, table: str, clock: ManualClock) -> Admitter:
    return Admitter(db, cap=cap, clock=clock, namespace=settings.namespace, table=table)


async def admitted(admitter: Admitter, count: int, deadline: datetime) -> list[bool]:
    return list(await asyncio.gather(*(admitter.admit(str(uuid.uuid4()), deadline) for _ in range(count))))


async def test_a_burst_over_the_caller_cap_admits_exactly_the_cap_across_replicas(
    db: asyncpg.Pool, settings: Settings
) -> None:
    """N > cap caller asks at once, spread over two ask-service replicas, admit exactly the cap."""
    clock = ManualClock(T0)
    replicas = [pool(db, settings, 5, CALLER_POOL, clock) for _ in range(2)]
    async with running(*replicas):
        deadline = caller_deadline(T0 + timedelta(hours=1))
        results = await asyncio.gather(*(admitted(r, 20, deadline) for r in replicas))
    assert sum(ok for batch in results for ok in batch) == 5
    assert await db.fetchval(f"SELECT count(*) FROM {CALLER_POOL}") == 5
    assert await db.fetchval(f"SELECT count(*) FROM {USER_POOL}") == 0


async def test_the_caller_pool_and_the_user_pool_never_count_each_other(
    db: asyncpg.Pool, settings: Settings
) -> None:
    """A full user pool refuses no caller ask and a full caller pool no question for a person."""
    clock = ManualClock(T0)
    users, callers = pool(db, settings, 2, USER_POOL, clock), pool(db, settings, 3, CALLER_POOL, clock)
    later = T0 + timedelta(hours=1)
    async with running(users, callers):
        assert await admitted(users, 3, later) == [True, True, False]
        assert await admitted(callers, 4, caller_deadline(later)) == [True, True, True, False]
        assert await admitted(users, 1, later) == [False]
        await db.execute(f"DELETE FROM {USER_POOL}")  # the questions for people resolved
        assert await admitted(callers, 1, caller_deadline(later)) == [False]
        assert await admitted(users, 2, later) == [True, True]


async def test_a_caller_reservation_lapses_after_its_expiry_and_the_answerable_margin(
    db: asyncpg.Pool, settings: Settings
) -> None:
    """A caller ask's slot stops counting at its expiry_at plus the margin a park stays answerable
    (a reservation whose ask was never recorded costs a slot only that long)."""
    clock = ManualClock(T0)
    callers = pool(db, settings, 1, CALLER_POOL, clock)
    expiry = T0 + timedelta(minutes=10)
    async with running(callers):
        assert await admitted(callers, 1, caller_deadline(expiry)) == [True]
        clock.advance(10 * 60 + 59)  # expiry_at + 59 s
        assert await admitted(callers, 1, caller_deadline(expiry)) == [False]
        clock.advance(1)  # expiry_at + 60 s
        assert await admitted(callers, 1, caller_deadline(clock.now() + timedelta(minutes=10))) == [True]


def test_the_refusal_at_the_caller_cap_is_an_interaction_limit_error_naming_the_cap() -> None:
    """At the caller cap the asker gets InteractionLimitError (kind 'limit', as at the user cap), and
    the message names the caller cap."""
    error = caller_limit_error(7)
    assert isinstance(error, InteractionLimitError)
    reply = to_refused(error)
    assert (reply.kind, reply.message) == (
        "limit",
        "ask_user(to='caller') refused: already at the max_concurrent_caller limit (7)",
    )
    back = from_refused(reply)
    assert isinstance(back, InteractionLimitError)
    assert back.message == reply.message


async def slots(db: asyncpg.Pool, table: str) -> dict[str, datetime]:
    rows = await db.fetch(f"SELECT interaction_id, deadline FROM {table}")
    return {r["interaction_id"]: r["deadline"] for r in rows}


async def test_the_projector_keeps_a_caller_slot_while_the_entry_runs_or_waits_and_frees_it_when_it_ends(
    db: asyncpg.Pool, settings: Settings
) -> None:
    """Resumed and settled finished/failed keep the slot (deadline pushed to the event + the waiting
    outcome retention); taken, removed, dropped and settled parked free it; the user pool and the
    inbox table are untouched, and door and visit events pass by."""
    clock = ManualClock(T0)
    callers, users = pool(db, settings, 100, CALLER_POOL, clock), pool(db, settings, 100, USER_POOL, clock)
    ids = {
        name: str(uuid.uuid4())
        for name in ("running", "finished", "failed", "taken", "parked", "removed", "dropped")
    }
    person = str(uuid.uuid4())
    asked_deadline = caller_deadline(T0 + timedelta(hours=1))
    async with running(callers, users):
        for iid in ids.values():
            assert await callers.admit(iid, asked_deadline)
        assert await users.admit(person, T0 + timedelta(hours=1))
        assert await users.admit(
            ids["running"], T0 + timedelta(hours=1)
        )  # a user slot of the same id: never touched
    t1, t2, t3 = (T0 + timedelta(minutes=m) for m in (5, 10, 15))
    events: list[Event] = []
    for name, iid in ids.items():
        asked = caller_ask(iid, T0)
        events += [asked, answered(asked, t1)]
        match name:
            case "finished" | "failed":
                events.append(settled(asked, name, t2))
            case "taken":
                events += [settled(asked, "finished", t2), taken(asked, t3)]
            case "parked":
                events.append(settled(asked, "parked", t2))
            case "removed":
                events[-1:] = [removed(asked, "cancelled", t1)]
            case "dropped":
                events += [settled(asked, "failed", t2), removed(asked, "dropped", t3)]
    # The door, visit and subject events of the same chains pass the projector by.
    events += [
        SubjectIndexed(subject="orders-42", ids=list(ids.values()), changed_at=t1),
        DoorDeleted(name="orders", by="ops", deleted_at=t1),
        ScheduleFired(name="nightly", tick=t1, visit_id="v-1", fired_at=t1),
        VisitRecorded(
            visit_id="v-1", kind="hook", subject="orders-42", by="ops", action="resume", visited_at=t1
        ),
        VisitSettled(visit_id="v-1", outcome=Outcome(status="finished", result=1), settled_at=t2),
        ConversationReplied(subject="chat-1", outcome=Outcome(status="finished"), replied_at=t2),
    ]
    batch = [Stored(seq, ev) for seq, ev in enumerate(events, start=1)]
    retention = 2 * DAY
    async with db.acquire() as conn:
        await apply_batch(conn, batch, waiting_retention=retention)
    kept = await slots(db, CALLER_POOL)
    assert kept == {
        ids["running"]: t1 + timedelta(seconds=retention),
        ids["finished"]: t2 + timedelta(seconds=retention),
        ids["failed"]: t2 + timedelta(seconds=retention),
    }
    assert set(await slots(db, USER_POOL)) == {person, ids["running"]}
    assert await db.fetchval("SELECT count(*) FROM interactions") == 0
    assert await db.fetchval("SELECT seq FROM projector_checkpoints WHERE name = 'inbox'") == len(batch)
    async with db.acquire() as conn:  # a redelivered batch, in any order, changes nothing
        await apply_batch(conn, list(reversed(batch)), waiting_retention=retention)
        await apply_batch(conn, batch, waiting_retention=retention)
    assert await slots(db, CALLER_POOL) == kept


@pytest.mark.settings(waiting_outcome_retention_seconds=3600.0)
async def test_the_live_projector_keeps_a_waiting_outcome_for_the_configured_retention(
    system: System, store: EventStore, db: asyncpg.Pool, settings: Settings
) -> None:
    """The door's projector applies LAYBY_WAITING_OUTCOME_RETENTION to a waiting outcome's slot and
    frees the slot once the outcome is taken."""
    iid = str(uuid.uuid4())
    await db.execute(
        f"INSERT INTO {CALLER_POOL} (interaction_id, deadline) VALUES ($1, $2)",
        iid,
        caller_deadline(T0 + timedelta(hours=1)),
    )
    settled_at = T0 + timedelta(minutes=30)
    subject = store.names.ix(iid)
    asked = caller_ask(iid, T0)
    for event in (asked, answered(asked, T0 + timedelta(minutes=1)), settled(asked, "finished", settled_at)):
        await store.append(subject, event, msg_id=str(uuid.uuid4()), expected_seq=None)
    await eventually(
        lambda: slots(db, CALLER_POOL),
        "the waiting outcome's slot to be kept for the retention",
        until=lambda held: held.get(iid) == settled_at + timedelta(hours=1),
    )
    await store.append(subject, taken(asked, settled_at), msg_id=str(uuid.uuid4()), expected_seq=None)
    await eventually(
        lambda: slots(db, CALLER_POOL), "the taken outcome's slot to be freed", until=lambda held: not held
    )
