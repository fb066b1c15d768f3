"""Durable async parks: exactly-once resume, on any worker, on the answer or the deadline.

docs/asking.md#mode-and-expiry, docs/aggregates/run.md#parking, docs/aggregates/run.md#deadlines-and-checkpoint-retention, docs/aggregates/interaction.md#expiry-of-async-parks. Real NATS and PostgreSQL, the five
services in-process, workers in-process; deadlines move on an injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest

import layby
from layby_domain.clock import ManualClock
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, BOB, OPERATOR, System, start_system, stop_system
from tests.helpers import eventually, handled_by, soon

pytestmark = pytest.mark.timeout(90)


class Workers:
    """Start workers (in this loop) that host the flows a test registers."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.running: list[tuple[asyncio.Event, asyncio.Task[None], layby.Worker]] = []

    async def new(self, register: Callable[[layby.Worker], None], token: str = OPERATOR) -> layby.Worker:
        client = await self.system.sdk(token)
        worker = layby.Worker(client, settings=self.system.settings)
        register(worker)
        return worker

    async def serve(self, worker: layby.Worker) -> asyncio.Event:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.serve(stop))
        self.running.append((stop, task, worker))
        await asyncio.wait_for(worker.ready.wait(), 15)  # bound to its flows' consumers
        return stop

    async def serve_failing_fast(self, register: Callable[[layby.Worker], None]) -> layby.Worker:
        """A worker whose failing runs fail at once: one attempt, no retries with backoff."""
        worker = await self.new(register)
        worker._settings = msgspec.structs.replace(worker._settings, continuation_max_attempts=1)
        await self.serve(worker)
        return worker

    async def stop(self, worker: layby.Worker) -> None:
        for stop, task, w in self.running:
            if w is worker:
                stop.set()
                await asyncio.wait_for(task, 15)

    async def stop_all(self) -> None:
        for stop, _, _ in self.running:
            stop.set()
        for _, task, _ in self.running:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 15)


@pytest.fixture
async def workers(system: System) -> AsyncIterator[Workers]:
    w = Workers(system)
    yield w
    await w.stop_all()


async def run_row(db: asyncpg.Pool, run_id: str) -> asyncpg.Record | None:
    return await db.fetchrow("SELECT * FROM runs WHERE run_id = $1", run_id)


async def wait_status(db: asyncpg.Pool, run_id: str, *statuses: str, timeout: float = 20) -> asyncpg.Record:
    return await eventually(
        lambda: run_row(db, run_id),
        f"run {run_id} to be {' or '.join(statuses)}",
        until=lambda row: row is not None and row["status"] in statuses,
        timeout=timeout,
    )


async def open_asks(db: asyncpg.Pool, run_id: str, count: int, timeout: float = 20) -> list[str]:
    """Wait until the run is parked on ``count`` pending questions; their ids in call order."""
    row = await wait_status(db, run_id, "parked", timeout=timeout)
    asks = json.loads(row["asks"])
    assert len(asks) == count, asks
    return [a["interaction_id"] for a in sorted(asks, key=lambda a: a["call"])]


async def answer(system: System, interaction_id: str, value: Any, token: str = OPERATOR) -> int:
    async with system.http(token) as http:
        r = await http.post(f"/api/interactions/{interaction_id}/answer", json={"answer": value})
        return r.status_code


async def test_async_ask_in_a_flow_parks_and_resumes_with_the_answer(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    executions: list[str] = []

    def register(w: layby.Worker) -> None:
        @w.flow("approve")
        async def approve(order: dict[str, Any]) -> dict[str, Any]:
            executions.append("start")
            ok = await layby.ask_user(
                f"Ship order {order['id']}?", answer_format="confirm", mode="async", expiry_at=soon()
            )
            executions.append(f"after:{ok}")
            return {"shipped": ok}

    worker = await workers.new(register)
    await workers.serve(worker)
    run_id = await worker.start("approve", {"id": 7})
    [ix] = await open_asks(db, run_id, 1)
    assert executions == ["start"]
    assert await answer(system, ix, True) == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"shipped": True}
    assert executions == ["start", "start", "after:True"]


@pytest.fixture
async def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC))


@pytest.fixture
async def clocked(
    settings: Settings, store: EventStore, db: asyncpg.Pool, clock: ManualClock
) -> AsyncIterator[System]:
    """The system with deadlines on a manual clock."""
    sys_ = await start_system(settings, clock)
    try:
        yield sys_
    finally:
        await stop_system(sys_)


@pytest.fixture
async def clocked_workers(clocked: System) -> AsyncIterator[Workers]:
    w = Workers(clocked)
    yield w
    await w.stop_all()


async def last_event(store: EventStore, subject: str) -> Any:
    stored = await store.last(subject, leader=True)
    return stored.event if stored is not None else None


async def count_events(store: EventStore, subject: str, kind: type) -> int:
    from layby_server.projection.projector import read_range

    first, last = await store.bounds()
    events = await read_range(store, max(first, 1), last)
    return sum(1 for s in events if isinstance(s.event, kind) and getattr(s.event, "run_id", None) == subject)


# -- docs/asking.md#mode-and-expiry: the wait rules, before anything is stored ---------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mode": "async"}, "expiry_at"),
        ({"mode": "async", "expiry_at": datetime(2030, 1, 1)}, "expiry_at"),
        ({"mode": "async", "expiry_at": "2030-01-01T00:00:00Z"}, "expiry_at"),
        ({"expiry_at": datetime(2030, 1, 1, tzinfo=UTC)}, "expiry_at"),
        ({"mode": "async", "expiry_at": datetime(2030, 1, 1, tzinfo=UTC), "timeout": 5}, "expiry_at"),
        ({"mode": "later"}, "mode"),
        ({"mode": "async", "expiry_at": datetime(2030, 1, 1, tzinfo=UTC), "sensitive": True}, "sensitive"),
    ],
)
async def test_expiry_at_is_required_for_async_only_aware_and_exclusive_with_timeout(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError) as info:
        await layby.ask_user("Ship?", **kwargs)
    assert getattr(info.value, "field", None) == field


async def test_async_ask_outside_a_run_raises_before_anything_is_stored(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    client = await system.sdk()
    with pytest.raises(RuntimeError, match="resumable run"):
        await client.ask_user("Ship?", mode="async", expiry_at=soon())
    _first, last = await store.bounds()
    assert last == 0
    assert await db.fetchval("SELECT count(*) FROM interactions") == 0


async def test_async_ask_on_the_in_memory_checkpointer_raises_before_anything_is_stored(
    system: System, store: EventStore
) -> None:
    worker = layby.Worker(await system.sdk(), checkpointer="memory", settings=system.settings)

    @worker.flow("local")
    async def local(_: Any) -> Any:
        return await layby.ask_user("Ship?", mode="async", expiry_at=soon())

    with pytest.raises(RuntimeError, match="durable, cross-worker checkpointer"):
        await worker.run_local("local")
    with pytest.raises(RuntimeError, match="in-memory checkpointer"):
        await worker.start("local")
    _, last = await store.bounds()
    assert last == 0


async def test_async_ask_without_a_bound_identity_raises_before_anything_is_stored(
    system: System, store: EventStore
) -> None:
    """A durable worker's ``run_local`` has a driver but no run identity: async is refused."""
    worker = layby.Worker(await system.sdk(), settings=system.settings)

    @worker.flow("anon")
    async def anon(_: Any) -> Any:
        return await layby.ask_user("Ship?", mode="async", expiry_at=soon())

    with pytest.raises(RuntimeError, match="bound execution identity"):
        await worker.run_local("anon")
    _, last = await store.bounds()
    assert last == 0


async def test_sync_asks_work_on_the_in_memory_checkpointer(system: System) -> None:
    worker = layby.Worker(await system.sdk(), checkpointer="memory", settings=system.settings)

    @worker.flow("local")
    async def local(_: Any) -> Any:
        return await layby.ask_user("Name?", timeout=20)

    task = asyncio.create_task(worker.run_local("local"))
    async with system.http() as http:

        async def listed() -> list[dict[str, Any]]:
            return (await http.get("/api/interactions")).json()["data"]["items"]  # type: ignore[no-any-return]

        items = await eventually(listed, "the question in the list door")
    assert await answer(system, items[0]["interaction_id"], "Ada") == 200
    assert await asyncio.wait_for(task, 10) == "Ada"


@pytest.mark.settings(checkpoint_retention_seconds=3600.0, continuation_max_attempts=1)
async def test_park_beyond_the_retention_horizon_is_refused_naming_interaction_expiry_and_horizon(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    errors: list[BaseException] = []

    def register(w: layby.Worker) -> None:
        @w.flow("late")
        async def late(_: Any) -> Any:
            try:
                return await layby.ask_user("Ship?", mode="async", expiry_at=soon(180))
            except layby.ParkExpiryExceedsRetentionError as exc:
                errors.append(exc)
                raise

    worker = await workers.new(register)
    await workers.serve(worker)
    run_id = await worker.start("late")
    row = await wait_status(db, run_id, "failed")
    [exc] = errors
    message = str(exc)
    assert exc.interaction_id in message  # type: ignore[attr-defined]
    assert "expiry_at" in message and "horizon" in message and "3600s" in message
    assert "ParkExpiryExceedsRetentionError" in row["error"]
    assert await db.fetchval("SELECT count(*) FROM interactions") == 0
    assert await last_event(store, store.names.ix(exc.interaction_id)) is None  # type: ignore[attr-defined]


# -- docs/aggregates/run.md#identities: the continuation runs under the asker's identity -------------------------------


async def test_continuation_runs_under_the_askers_identity_never_the_answerers(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    seen: list[str | None] = []

    def register(w: layby.Worker) -> None:
        @w.flow("who")
        async def who(_: Any) -> Any:
            run = layby.current_run()
            assert run is not None
            seen.append(run.identity)
            first = await layby.ask_user("One?", mode="async", expiry_at=soon())
            second = await layby.ask_user("Two?", mode="async", expiry_at=soon())
            return [first, second]

    # The worker holds an operator token; the run was started by alice.
    worker = await workers.new(register)
    await workers.serve(worker)
    alice = await system.sdk(ALICE)
    run_id = await alice.start_run("who")
    [one] = await open_asks(db, run_id, 1)
    assert await answer(system, one, "from-ops", token=OPERATOR) == 200
    await eventually(
        lambda: run_row(db, run_id),
        "the run parked again, in its second generation",
        until=lambda row: row is not None and row["status"] == "parked" and row["generation"] == 2,
        timeout=20,
    )
    [two] = await open_asks(db, run_id, 1)
    asked = await db.fetchrow("SELECT asked_by, audience FROM interactions WHERE interaction_id = $1", two)
    assert (asked["asked_by"], asked["audience"]) == ("alice", "alice")
    assert await answer(system, two, "from-bob", token=BOB) == 403  # addressed to alice only
    assert await answer(system, two, "from-alice", token=ALICE) == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == ["from-ops", "from-alice"]
    assert set(seen) == {"alice"}


# -- docs/aggregates/run.md#one-park-several-questions: parallel fan-out ------------------------------------------------------------


@pytest.mark.parametrize("order", ["ab!", "a!b", "!ab", "ba!", "b!a", "!ba"])
async def test_fan_out_of_three_resumes_once_with_every_value_in_any_order_with_one_expiry(
    clocked: System,
    clocked_workers: Workers,
    db: asyncpg.Pool,
    clock: ManualClock,
    store: EventStore,
    order: str,
) -> None:
    """Three asks raised together park once; answers and one expiry arrive in ``order``
    (``a``, ``b`` answered, ``!`` the third expiring); the run resumes once, with all three."""
    after: list[Any] = []

    def register(w: layby.Worker) -> None:
        @w.flow("fan")
        async def fan(_: Any) -> Any:
            values = await asyncio.gather(
                layby.ask_user("A?", mode="async", expiry_at=clock.now() + timedelta(days=1)),
                layby.ask_user("B?", mode="async", expiry_at=clock.now() + timedelta(days=1)),
                layby.ask_user("C?", mode="async", expiry_at=clock.now() + timedelta(minutes=10)),
            )
            after.append(values)
            return values

    worker = await clocked_workers.new(register)
    await clocked_workers.serve(worker)
    run_id = await worker.start("fan")
    a, b, c = await open_asks(db, run_id, 3)
    for step in order:
        if step == "a":
            assert await answer(clocked, a, "alpha") == 200
        elif step == "b":
            assert await answer(clocked, b, "beta") == 200
        else:
            clock.advance(11 * 60)
            await eventually(
                lambda: db.fetchval("SELECT status FROM interactions WHERE interaction_id = $1", c),
                "the third question to expire",
                until=lambda status: status == "answered",
            )
            assert await answer(clocked, c, "too late") == 409
        await handled_by(store, "resume")  # each resolution reaches the resume service on its own
    row = await wait_status(db, run_id, "finished")
    expected = ["alpha", "beta", {"layby:interaction_expired": True}]
    assert after == [expected]
    assert json.loads(row["result"]) == expected
    from layby_contracts.events import RunResumed

    assert await count_events(store, run_id, RunResumed) == 1


# -- docs/aggregates/interaction.md#first-resolution-wins: one resolution per park, whatever races --------------------------------------


async def test_answer_racing_expiry_resumes_each_run_exactly_once(
    clocked: System, clocked_workers: Workers, db: asyncpg.Pool, clock: ManualClock, store: EventStore
) -> None:
    runs = 25
    after: dict[str, list[Any]] = {}

    def register(w: layby.Worker) -> None:
        @w.flow("race")
        async def race(_: Any) -> Any:
            value = await layby.ask_user("Go?", mode="async", expiry_at=clock.now() + timedelta(minutes=5))
            run = layby.current_run()
            assert run is not None
            after.setdefault(run.run_id, []).append(value)
            return value

    worker = await clocked_workers.new(register)
    await clocked_workers.serve(worker)
    run_ids = [await worker.start("race") for _ in range(runs)]
    asks = {run_id: (await open_asks(db, run_id, 1))[0] for run_id in run_ids}
    clock.advance(5 * 60)  # every park is now due: the sweeper and the answers race
    statuses = await asyncio.gather(*(answer(clocked, ix, "human") for ix in asks.values()))
    assert set(statuses) <= {200, 409}
    for (run_id, _), status in zip(asks.items(), statuses, strict=True):
        row = await wait_status(db, run_id, "finished")
        expected = "human" if status == 200 else {"layby:interaction_expired": True}
        assert json.loads(row["result"]) == expected
        assert after[run_id] == [expected]  # the code after the ask ran once
    from layby_contracts.events import RunResumed

    for run_id in run_ids:
        assert await count_events(store, run_id, RunResumed) == 1


async def test_two_answers_racing_on_one_park_run_the_continuation_once(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    after: list[Any] = []

    def register(w: layby.Worker) -> None:
        @w.flow("twice")
        async def twice(_: Any) -> Any:
            value = await layby.ask_user("Pick", mode="async", expiry_at=soon())
            after.append(value)
            return value

    worker = await workers.new(register)
    await workers.serve(worker)
    for attempt in range(10):
        run_id = await worker.start("twice")
        [ix] = await open_asks(db, run_id, 1)
        statuses = sorted(await asyncio.gather(answer(system, ix, "x"), answer(system, ix, "y")))
        assert statuses == [200, 409]
        await wait_status(db, run_id, "finished")
        assert len(after) == attempt + 1


async def test_an_expired_park_is_answered_by_system_expiry_and_the_answer_door_then_gives_409(
    clocked: System, clocked_workers: Workers, db: asyncpg.Pool, clock: ManualClock, store: EventStore
) -> None:
    from tests.helpers import SSE

    def register(w: layby.Worker) -> None:
        @w.flow("exp")
        async def exp(_: Any) -> Any:
            return await layby.ask_user("Still?", mode="async", expiry_at=clock.now() + timedelta(hours=1))

    worker = await clocked_workers.new(register)
    await clocked_workers.serve(worker)
    run_id = await worker.start("exp")
    [ix] = await open_asks(db, run_id, 1)
    async with clocked.http() as http, http.stream("GET", "/api/interactions/stream") as resp:
        sse = SSE(resp)  # its start point was taken before the door sent the headers
        # Past the deadline + the sync grace, the list door's lazy prune must not touch a park.
        clock.advance(3600 + 60)
        await http.get("/api/interactions")
        frame = await sse.until("interaction.answered", ix)
        assert frame.data == {"interaction_id": ix, "group_id": frame.data["group_id"]}
    row = await eventually(
        lambda: db.fetchrow("SELECT status, answered_by FROM interactions WHERE interaction_id = $1", ix),
        "the expired question to be resolved in the projection",
        until=lambda row: row["status"] != "pending",
    )
    assert (row["status"], row["answered_by"]) == ("answered", "system:expiry")
    assert await answer(clocked, ix, "late") == 409
    run = await wait_status(db, run_id, "finished")
    assert json.loads(run["result"]) == {"layby:interaction_expired": True}
    from layby_contracts.events import InteractionRemoved

    assert not isinstance(await last_event(store, store.names.ix(ix)), InteractionRemoved)


# -- on any worker -----------------------------------------------------------------------


async def test_a_run_parked_by_worker_a_is_resumed_by_worker_b_when_a_is_gone(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    where: list[str] = []

    def register_as(label: str) -> Callable[[layby.Worker], None]:
        def register(w: layby.Worker) -> None:
            @w.flow("handoff")
            async def handoff(_: Any) -> Any:
                where.append(label)
                value = await layby.ask_user("Continue?", mode="async", expiry_at=soon())
                return {"value": value, "by": label}

        return register

    a = await workers.new(register_as("A"))
    await workers.serve(a)
    run_id = await a.start("handoff")
    [ix] = await open_asks(db, run_id, 1)
    await workers.stop(a)
    b = await workers.new(register_as("B"))
    await workers.serve(b)
    assert await answer(system, ix, "yes") == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"value": "yes", "by": "B"}
    assert where == ["A", "B"]


# -- bad input: a raising continuation, a malformed message ---------------------------------


@pytest.mark.settings(continuation_max_attempts=2)
async def test_a_continuation_that_raises_is_retried_then_the_run_fails_with_an_event(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    attempts: list[str] = []

    def register(w: layby.Worker) -> None:
        @w.flow("boom")
        async def boom(_: Any) -> Any:
            value = await layby.ask_user("Go?", mode="async", expiry_at=soon())
            attempts.append(value)
            raise RuntimeError(f"cannot handle {value}")

    worker = await workers.new(register)
    await workers.serve(worker)
    run_id = await worker.start("boom")
    [ix] = await open_asks(db, run_id, 1)
    assert await answer(system, ix, "it") == 200
    row = await wait_status(db, run_id, "failed")
    assert attempts == ["it", "it"]
    assert row["error"] == "RuntimeError: cannot handle it"
    from layby_contracts.events import RunFailed

    failed = await last_event(store, store.names.run(run_id))
    assert isinstance(failed, RunFailed) and failed.attempts == 2


async def test_a_malformed_continuation_is_terminated_and_the_worker_goes_on(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    def register(w: layby.Worker) -> None:
        @w.flow("ok")
        async def ok(value: Any) -> Any:
            return value

    worker = await workers.new(register)
    await workers.serve(worker)
    names = store.names
    await store.js.publish(names.continuation("ok", "not-a-run", 0), b"{not json")
    await store.js.publish(names.continuation("ok", "not-a-run", 1), b'{"type": "continuation.v1"}')
    run_id = await worker.start("ok", {"n": 1})
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"n": 1}
    info = await store.js.consumer_info(names.continuations_stream, names.flow_durable("ok"))
    assert info.num_ack_pending == 0 and info.num_redelivered == 0


# -- visibility: GET /api/runs/{id}, GET /api/runs, the CLI, rebuild ---------------------------


async def test_runs_door_shows_a_parked_run_with_its_open_questions_and_deadlines_then_its_result(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    deadline = soon(30)

    def register(w: layby.Worker) -> None:
        @w.flow("show")
        async def show(_: Any) -> Any:
            a, b = await asyncio.gather(
                layby.ask_user("First?", mode="async", expiry_at=deadline),
                layby.ask_user("Second?", mode="async", expiry_at=deadline + timedelta(minutes=5)),
            )
            return {"a": a, "b": b}

    worker = await workers.new(register)
    await workers.serve(worker)
    alice = await system.sdk(ALICE)
    run_id = await alice.start_run("show")
    first, second = await open_asks(db, run_id, 2)
    assert await answer(system, first, "one", token=ALICE) == 200
    async with system.http(ALICE) as http:

        async def view() -> dict[str, Any]:
            return (await http.get(f"/api/runs/{run_id}")).json()["data"]  # type: ignore[no-any-return]

        body = await eventually(view, "only the second question open", until=lambda b: b["open"] == [second])
        assert body["status"] == "parked"
        assert body["flow"] == "show" and body["identity"] == "alice" and body["generation"] == 1
        assert datetime.fromisoformat(body["expiry_at"]) == deadline.replace(microsecond=deadline.microsecond)
        assert [(a["question"], a["status"]) for a in body["asks"]] == [
            ("First?", "answered"),
            ("Second?", "pending"),
        ]
        assert body["asks"][0]["answered_by"] == "alice"
        assert datetime.fromisoformat(body["asks"][1]["expiry_at"]) == deadline + timedelta(minutes=5)
        listed = (await http.get("/api/runs", params={"status": "parked"})).json()["data"]
        assert [r["run_id"] for r in listed["items"]] == [run_id]
        assert (await http.get("/api/runs", params={"status": "nope"})).json() == {
            "error": "status must be one of running, parked, resumed, finished, failed, cancelled",
            "field": "status",
        }
    assert await answer(system, second, "two", token=ALICE) == 200
    await wait_status(db, run_id, "finished")
    async with system.http(ALICE) as http:
        body = (await http.get(f"/api/runs/{run_id}")).json()["data"]
    assert body["status"] == "finished" and body["result"] == {"a": "one", "b": "two"}
    assert body["resume_id"] == f"{run_id}:1"


async def test_runs_door_needs_a_token_and_hides_other_identities_runs_behind_a_uniform_404(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    def register(w: layby.Worker) -> None:
        @w.flow("mine")
        async def mine(_: Any) -> Any:
            return await layby.ask_user("Mine?", mode="async", expiry_at=soon())

    worker = await workers.new(register)
    await workers.serve(worker)
    alice = await system.sdk(ALICE)
    run_id = await alice.start_run("mine")
    await open_asks(db, run_id, 1)
    async with system.http(None) as anon:
        assert (await anon.get(f"/api/runs/{run_id}")).status_code == 401
        assert (await anon.get("/api/runs")).status_code == 401
    async with system.http(BOB) as bob:
        hidden = await bob.get(f"/api/runs/{run_id}")
        unknown = await bob.get("/api/runs/00000000-0000-4000-8000-000000000000")
        garbage = await bob.get("/api/runs/not-a-run<script>")
        assert (await bob.get("/api/runs")).json()["data"]["total"] == 0
    assert hidden.status_code == unknown.status_code == garbage.status_code == 404
    assert hidden.content == unknown.content == garbage.content
    async with system.http(OPERATOR) as ops:
        assert (await ops.get(f"/api/runs/{run_id}")).json()["data"]["status"] == "parked"


async def test_cli_starts_lists_and_shows_runs(
    system: System,
    workers: Workers,
    db: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from layby import cli

    def register(w: layby.Worker) -> None:
        @w.flow("cli")
        async def flow(value: Any) -> Any:
            ok = await layby.ask_user(
                f"Approve {value['n']}?", answer_format="confirm", mode="async", expiry_at=soon()
            )
            return {"n": value["n"], "ok": ok}

    worker = await workers.new(register)
    await workers.serve(worker)
    for key, value in {
        "LAYBY_URL": system.url,
        "LAYBY_TOKEN": OPERATOR,
        "LAYBY_NATS_URL": system.settings.nats_url or "",
        "LAYBY_NAMESPACE": system.settings.namespace,
    }.items():
        monkeypatch.setenv(key, value)
    assert await asyncio.to_thread(cli.main, ["runs", "start", "cli", "--input", '{"n": 5}']) == 0
    run_id = capsys.readouterr().out.strip().splitlines()[-1]
    [ix] = await open_asks(db, run_id, 1)
    assert await asyncio.to_thread(cli.main, ["runs", "list", "--status", "parked"]) == 0
    out = capsys.readouterr().out
    assert run_id in out and "parked" in out
    assert await asyncio.to_thread(cli.main, ["runs", "show", run_id]) == 0
    out = capsys.readouterr().out
    assert ix in out and "Approve 5?" in out and "pending" in out
    assert await asyncio.to_thread(cli.main, ["interactions", "answer", ix, "--answer", "true"]) == 0
    await wait_status(db, run_id, "finished")
    capsys.readouterr()
    assert await asyncio.to_thread(cli.main, ["runs", "show", run_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == {"n": 5, "ok": True}
    assert await asyncio.to_thread(cli.main, ["runs", "start", "bad name"]) == 1
    assert "flow must be" in capsys.readouterr().err


async def test_rebuild_reproduces_the_runs_table(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    from layby_server.projection.projector import rebuild

    def register(w: layby.Worker) -> None:
        @w.flow("rb")
        async def rb(n: int) -> Any:
            value = await layby.ask_user(f"Value {n}?", mode="async", expiry_at=soon())
            if n == 2:
                raise ValueError("two")
            return value

    with_failures = system.settings
    assert with_failures.continuation_max_attempts >= 1
    worker = await workers.new(register)
    await workers.serve(worker)
    parked = await worker.start("rb", 0)
    finished = await worker.start("rb", 1)
    await open_asks(db, parked, 1)
    [ix] = await open_asks(db, finished, 1)
    assert await answer(system, ix, "done") == 200
    await wait_status(db, finished, "finished")
    snapshot = "SELECT * FROM runs ORDER BY run_id"
    before = [dict(r) for r in await db.fetch(snapshot)]
    await rebuild(db, store)
    after = [dict(r) for r in await db.fetch(snapshot)]
    assert after == before
    assert {r["status"] for r in after} == {"parked", "finished"}


@pytest.mark.settings(continuation_ack_wait_seconds=1.0, continuation_max_attempts=1)
async def test_a_worker_that_may_not_act_for_the_run_leaves_it_to_one_that_may(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Bob's worker (a user token) cannot act for alice's run; it neither drops nor fails the
    run, and an operator worker resumes it."""

    def register(w: layby.Worker) -> None:
        @w.flow("guarded")
        async def guarded(_: Any) -> Any:
            return await layby.ask_user("Guarded?", mode="async", expiry_at=soon())

    bobs = await workers.new(register, token=BOB)
    await workers.serve(bobs)
    alice = await system.sdk(ALICE)
    run_id = await alice.start_run("guarded")
    # A time window on purpose: for 1.5 s (past the 1 s ack wait, so Bob's worker has had the run
    # and let it go) nothing may happen to the run; there is no event to wait for.
    await asyncio.sleep(1.5)
    row = await run_row(db, run_id)
    assert row is not None and row["status"] == "running"
    assert await db.fetchval("SELECT count(*) FROM interactions") == 0
    ops = await workers.new(register)
    await workers.serve(ops)
    [ix] = await open_asks(db, run_id, 1)
    assert await answer(system, ix, "fine", token=ALICE) == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == "fine"


async def test_a_person_cannot_fake_the_expiry_marker_through_the_answer_door(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    def register(w: layby.Worker) -> None:
        @w.flow("fake")
        async def fake(_: Any) -> Any:
            return await layby.ask_user(
                "Details?", answer_format="form", schema={"type": "object"}, mode="async", expiry_at=soon()
            )

    worker = await workers.new(register)
    await workers.serve(worker)
    run_id = await worker.start("fake")
    [ix] = await open_asks(db, run_id, 1)
    async with system.http() as http:
        resp = await http.post(
            f"/api/interactions/{ix}/answer", json={"answer": {"layby:interaction_expired": True}}
        )
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "answer must not carry the reserved key 'layby:interaction_expired'",
        "field": "answer.layby:interaction_expired",
    }
    assert await answer(system, ix, {"name": "real"}) == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"name": "real"}


@pytest.mark.settings(max_concurrent=1, continuation_max_attempts=3)
async def test_a_retried_execution_re_asks_under_the_same_id_without_taking_another_slot(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Attempt 1 records its ask while another branch raises; attempt 2 asks again: the question
    exists already, so it neither takes a second slot (the cap is 1) nor appears twice."""
    attempts: list[int] = []

    def register(w: layby.Worker) -> None:
        @w.flow("retry")
        async def retry(_: Any) -> Any:
            attempts.append(1)

            async def flaky() -> None:
                await asyncio.sleep(0)  # the ask is being recorded now
                if len(attempts) == 1:
                    raise ConnectionResetError("the first attempt fails while asking")

            value, _ = await asyncio.gather(layby.ask_user("Once?", mode="async", expiry_at=soon()), flaky())
            return value

    worker = await workers.new(register)
    await workers.serve(worker)
    run_id = await worker.start("retry")
    [ix] = await open_asks(db, run_id, 1, timeout=30)
    assert len(attempts) == 2
    assert await db.fetchval("SELECT count(*) FROM interactions") == 1
    assert await answer(system, ix, "yes") == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == "yes"
