"""The projector and ``layby projections rebuild`` (docs/engineering.md#the-event-log-is-the-source-of-truth)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from layby_server.projection.projector import rebuild
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import caught_up, wait_total

pytestmark = pytest.mark.integration

SNAPSHOT = "SELECT * FROM interactions ORDER BY interaction_id"


async def test_rebuild_from_the_log_reproduces_the_live_tables(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """Dropping the projections and replaying the log yields exactly the live tables (docs/engineering.md#the-event-log-is-the-source-of-truth)."""
    client = await system.sdk()
    tasks = [
        asyncio.create_task(client.ask_user(f"q{i}", timeout=60, group_id=f"g{i % 2}")) for i in range(6)
    ]
    tasks.append(asyncio.create_task(client.ask_user("secret", sensitive=True, timeout=60)))
    items = (await wait_total(system, 7))["items"]
    async with system.http() as http:
        for item in [i for i in items if i["question"] != "secret"][:3]:
            await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": "a"})
    tasks[-1].cancel()
    await wait_total(system, 3)
    await caught_up(db, store)
    live = [dict(r) for r in await db.fetch(SNAPSHOT)]
    checkpoint = await db.fetchval("SELECT seq FROM projector_checkpoints WHERE name = 'inbox'")
    assert len(live) == 7
    count = await rebuild(db, store)
    rebuilt = [dict(r) for r in await db.fetch(SNAPSHOT)]
    assert count == (await store.bounds())[1]
    assert rebuilt == live
    assert await db.fetchval("SELECT seq FROM projector_checkpoints WHERE name = 'inbox'") == checkpoint
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_replaying_a_batch_twice_is_a_no_op(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """A redelivered message changes nothing: rows are guarded by their stream sequence (docs/engineering.md#exactly-once-effects)."""
    from layby_server.projection.projector import apply_batch, read_range

    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("q", timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    async with system.http() as http:
        await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": "z"})
    await task
    await caught_up(db, store)
    before = [dict(r) for r in await db.fetch(SNAPSHOT)]
    _, last = await store.bounds()
    events = await read_range(store, 1, last)
    async with db.acquire() as conn:
        await apply_batch(conn, events)
        await apply_batch(conn, list(reversed(events)))
    assert [dict(r) for r in await db.fetch(SNAPSHOT)] == before


async def test_runs_projection_is_the_same_whatever_order_its_events_are_applied_in(
    store: EventStore, db: asyncpg.Pool
) -> None:
    """Replicas may apply neighbouring batches in either order: every permutation of a run's
    events gives the same row (the status, the park's asks and the checkpoint are guarded apart)."""
    import itertools
    import uuid
    from datetime import UTC, datetime, timedelta

    from layby_contracts.events import ParkedAsk, Resolution, RunFinished, RunParked, RunResumed, RunStarted
    from layby_server.projection.projector import apply_batch
    from layby_server.store.eventstore import Stored

    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    snapshots = []
    ix = str(uuid.uuid4())
    for order in itertools.permutations(range(4)):
        run_id = str(uuid.uuid4())
        ask = ParkedAsk(interaction_id=ix, call=0, question="Q?", expiry_at=t0 + timedelta(hours=1))
        answer = {
            "0": Resolution(interaction_id=ask.interaction_id, question="Q?", answer="yes", answered_by="ops")
        }
        events = [
            Stored(10, RunStarted(run_id=run_id, flow="f", identity="ops", input=[1], started_at=t0)),
            Stored(
                12, RunParked(run_id=run_id, generation=1, asks=[ask], parked_at=t0, resume_id=f"{run_id}:0")
            ),
            Stored(
                15,
                RunResumed(
                    run_id=run_id, generation=1, resume_id=f"{run_id}:1", resumed_at=t0, answers=answer
                ),
            ),
            Stored(
                17,
                RunFinished(
                    run_id=run_id, generation=1, result={"ok": True}, finished_at=t0, resume_id=f"{run_id}:1"
                ),
            ),
        ]
        async with db.acquire() as conn:
            for index in order:
                await apply_batch(conn, [events[index]])
        row = dict(await db.fetchrow("SELECT * FROM runs WHERE run_id = $1", run_id))
        row.pop("run_id")
        row["resume_id"] = row["resume_id"].split(":")[1]
        row["asks"] = None if row["asks"] is None else row["asks"].count("Q?")
        snapshots.append(row)
    for s in snapshots:
        assert s == snapshots[0]
    assert snapshots[0]["status"] == "finished" and snapshots[0]["resume_id"] == "1"
    assert snapshots[0]["asks"] == 1 and "yes" in snapshots[0]["checkpoint"]
