"""Durable steps, cancel and retry (docs/aggregates/run.md#steps, docs/aggregates/run.md#cancel-and-retry,
docs/doors/runs.md). Real NATS and PostgreSQL, the services and the workers in-process."""

from __future__ import annotations

import asyncio
import secrets
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

import layby
from layby_contracts.commands import CheckCurrent, Current, RecordStep, Refused, RunAccepted
from layby_contracts.errors import Conflict, RunCancelledError
from layby_contracts.events import RunCancelled, StepResult, StepsClosed
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, BOB, OPERATOR, System
from tests.helpers import Booking, eventually, settled
from tests.integration.test_parks import Workers, answer, open_asks, run_row, soon, wait_status

pytestmark = pytest.mark.timeout(90)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def run_view(system: System, run_id: str, token: str = OPERATOR) -> tuple[int, dict[str, Any]]:
    async with system.http(token) as http:
        r = await http.get(f"/api/runs/{run_id}")
        return r.status_code, r.json()


async def post(system: System, path: str, token: str = OPERATOR) -> tuple[int, dict[str, Any]]:
    async with system.http(token) as http:
        r = await http.post(path)
        return r.status_code, r.json()


async def test_a_step_before_and_after_a_park_executes_once_and_replays_its_recorded_result(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    charged: Counter[str] = Counter()
    seen: list[str] = []

    @layby.step
    async def charge(what: str) -> dict[str, str]:
        charged[what] += 1
        return {"what": what, "nonce": secrets.token_hex(8)}

    def register(w: layby.Worker) -> None:
        @w.flow("charge")
        async def flow(_: Any) -> Any:
            before = await charge("before")
            seen.append(before["nonce"])
            ok = await layby.ask_user("Ship?", mode="async", expiry_at=soon())
            after = await charge("after")
            return {"before": before["nonce"], "after": after["nonce"], "ok": ok}

    await workers.serve(await workers.new(register))
    client = await system.sdk()
    run_id = await client.start_run("charge")
    (asked,) = await open_asks(db, run_id, 1)
    assert await answer(system, asked, "yes") == 200
    row = await wait_status(db, run_id, "finished")
    result = __import__("json").loads(row["result"])
    assert charged == Counter({"before": 1, "after": 1})
    # The replay got the nonce recorded by the first execution, not a fresh one.
    assert seen == [result["before"], result["before"]]
    status, view = await run_view(system, run_id)
    assert status == 200 and view["data"]["steps"] == 2


async def test_a_raising_step_is_retried_with_its_key_and_a_step_that_keeps_failing_is_recorded(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    attempts: list[tuple[str, int]] = []
    executions: Counter[str] = Counter()

    @layby.step(retries=3, backoff=0)
    async def flaky() -> str:
        info = layby.current_step()
        assert info is not None
        attempts.append((info.key, info.attempt))
        if info.attempt < 3:
            raise ConnectionError("the payment API is down")
        return "charged"

    @layby.step(name="always-fails", retries=1, backoff=0)
    def doomed() -> None:  # a sync step runs in a thread
        executions["doomed"] += 1
        raise ValueError("card declined")

    def register(w: layby.Worker) -> None:
        @w.flow("flaky")
        async def flow(_: Any) -> Any:
            first = await flaky()
            try:
                await doomed()
            except layby.StepFailedError as exc:
                failure = str(exc)
            await layby.ask_user("Continue?", mode="async", expiry_at=soon())
            return {"first": first, "failure": failure}

    await workers.serve(await workers.new(register))
    run_id = await (await system.sdk()).start_run("flaky")
    (asked,) = await open_asks(db, run_id, 1)
    assert await answer(system, asked, "go") == 200
    row = await wait_status(db, run_id, "finished")
    result = __import__("json").loads(row["result"])
    assert result["first"] == "charged"
    assert "card declined" in result["failure"] and "2 attempt" in result["failure"]
    assert [a for _, a in attempts] == [1, 2, 3]
    assert {k for k, _ in attempts} == {f"{run_id}:step:0"}
    assert executions["doomed"] == 2  # two attempts, never again on the replay


async def test_a_different_step_at_a_recorded_position_is_non_deterministic(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    executions = Counter[str]()

    @layby.step
    async def one() -> int:
        return 1

    @layby.step
    async def two() -> int:
        return 2

    def register(w: layby.Worker) -> None:
        @w.flow("shifty")
        async def flow(_: Any) -> Any:
            executions["flow"] += 1
            await (one() if executions["flow"] == 1 else two())
            return await layby.ask_user("Then?", mode="async", expiry_at=soon())

    # One attempt: the retries with backoff before the run fails are the worker's rule for any
    # raising execution (test_a_continuation_that_raises_is_retried_then_the_run_fails_with_an_event).
    await workers.serve_failing_fast(register)
    run_id = await (await system.sdk()).start_run("shifty")
    (asked,) = await open_asks(db, run_id, 1)
    assert await answer(system, asked, "x") == 200
    row = await wait_status(db, run_id, "failed", timeout=60)
    assert "NonDeterministicRunError" in row["error"] and "'" in row["error"]


async def test_the_first_record_of_a_step_wins_and_every_execution_goes_on_with_it(system: System) -> None:
    """Two executions of one generation (a redelivered continuation while the first still runs)
    record the same call at once: one record lands, the other execution gets that record back,
    and a replay of the generation starts from it. Steps of other calls merge into the record."""
    client = await system.sdk()
    run_id = await client.start_run("nobody-serves-this")  # stays in generation 0, running

    def record(call: int, nonce: str) -> RecordStep:
        step = StepResult(name="charge", result={"nonce": nonce})
        return RecordStep(token=OPERATOR, run_id=run_id, generation=0, call=call, step=step)

    first, second = await asyncio.gather(
        client.run_command(record(0, "a")), client.run_command(record(0, "b"))
    )
    assert isinstance(first, RunAccepted) and isinstance(second, RunAccepted)
    winner = "b" if first.step is not None else "a"
    loser = second if winner == "a" else first
    assert loser.step == StepResult(name="charge", result={"nonce": winner})
    # The loser's retry (its reply was lost) gets the same answer; the winner's is plain.
    again = await client.run_command(record(0, "b" if winner == "a" else "a"))
    assert isinstance(again, RunAccepted) and again.step == loser.step
    others = await asyncio.gather(*(client.run_command(record(call, f"n{call}")) for call in range(1, 6)))
    assert all(isinstance(r, RunAccepted) and r.step is None for r in others)
    current = await client.request_run(CheckCurrent(token=OPERATOR, run_id=run_id, generation=0))
    assert isinstance(current, Current) and current.status == "current"
    assert current.steps is not None
    assert {k: v.result for k, v in current.steps.items()} == {
        "0": {"nonce": winner},
        **{str(call): {"nonce": f"n{call}"} for call in range(1, 6)},
    }
    # The steps are the run's: another identity's token learns nothing of them.
    alice = await system.sdk(ALICE)
    refused = await alice.request_run(CheckCurrent(token=ALICE, run_id=run_id, generation=0))
    assert isinstance(refused, Refused) and refused.kind == "audience", refused
    # A generation that is not executing records nothing.
    stale = RecordStep(
        token=OPERATOR, run_id=run_id, generation=3, call=9, step=StepResult(name="charge", result=1)
    )
    assert isinstance(await client.run_command(stale), Conflict)


async def test_a_cancel_whose_canceller_stopped_half_way_still_stops_the_next_step(
    system: System, store: EventStore
) -> None:
    """The canceller records the cancel, then closes the running execution's step record; should
    it stop in between, the resume service closes the record from the event, and the execution's
    next step finds the run cancelled (even where the ask service remembers the record)."""
    client = await system.sdk()
    run_id = await client.start_run("nobody-serves-this")

    def record(call: int) -> RecordStep:
        return RecordStep(
            token=OPERATOR, run_id=run_id, generation=0, call=call, step=StepResult(name="s", result=call)
        )

    assert isinstance(await client.run_command(record(0)), RunAccepted)  # remembered by the ask service
    last = await store.last(store.names.run(run_id), leader=True)
    assert last is not None
    cancelled = RunCancelled(run_id=run_id, generation=0, by="ops", cancelled_at=NOW, was="running")
    await store.append(store.names.run(run_id), cancelled, msg_id=f"c-{run_id}", expected_seq=last.seq)

    async def closed() -> bool:
        found = await store.last_steps(run_id, 0, leader=True)
        return found is not None and isinstance(found.event, StepsClosed)

    await eventually(closed, "the resume service to close the record", timeout=20)
    closing = await store.last_steps(run_id, 0, leader=True)
    assert closing is not None and isinstance(closing.event, StepsClosed)
    assert closing.event.steps == {"0": StepResult(name="s", result=0)}
    assert isinstance(await client.run_command(record(1)), RunCancelledError)


async def test_outside_a_flow_a_step_is_just_the_function() -> None:
    @layby.step
    async def double(x: int) -> int:
        assert layby.current_step() is None
        return 2 * x

    @layby.step(retries=0)
    def sync_triple(x: int) -> int:
        return 3 * x

    assert await double(4) == 8
    assert await sync_triple(2) == 6


async def test_cancelling_a_parked_run_removes_its_questions_and_records_who(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    def register(w: layby.Worker) -> None:
        @w.flow("cancel-me")
        async def flow(_: Any) -> Any:
            return await layby.ask_user("Approve?", mode="async", expiry_at=soon())

    await workers.serve(await workers.new(register))
    alice = await system.sdk(ALICE)
    run_id = await alice.start_run("cancel-me")
    (asked,) = await open_asks(db, run_id, 1)
    # Another identity cannot cancel it (the same 404 as an unknown run).
    assert (await post(system, f"/api/runs/{run_id}/cancel", BOB))[0] == 404
    status, body = await post(system, f"/api/runs/{run_id}/cancel", ALICE)
    assert status == 200, body
    assert body["data"] == {"run_id": run_id, "status": "cancelled", "was": "parked", "cancelled_by": "alice"}
    # The question left the inbox before the door answered.
    assert await answer(system, asked, "late") in (404, 409)
    row = await wait_status(db, run_id, "cancelled")
    assert row["cancelled_by"] == "alice"
    _, view = await run_view(system, run_id, ALICE)
    assert view["data"]["status"] == "cancelled"
    # A cancelled run cannot be cancelled again, nor retried.
    assert (await post(system, f"/api/runs/{run_id}/cancel", ALICE))[0] == 409
    assert (await post(system, f"/api/runs/{run_id}/retry", ALICE))[0] == 409


async def test_a_running_run_is_cancelled_at_its_next_step(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    inside = asyncio.Event()
    release = asyncio.Event()
    after: list[str] = []

    @layby.step
    async def slow() -> str:
        inside.set()
        await release.wait()
        return "done"

    @layby.step
    async def never() -> None:
        after.append("ran")

    def register(w: layby.Worker) -> None:
        @w.flow("long")
        async def flow(_: Any) -> Any:
            await slow()
            await never()
            return "finished"

    await workers.serve(await workers.new(register))
    client = await system.sdk()
    run_id = await client.start_run("long")
    await asyncio.wait_for(inside.wait(), 20)
    await client.cancel_run(run_id)  # the SDK's command: same rules as the door
    release.set()
    await wait_status(db, run_id, "cancelled")
    await settled(db, store, "long")  # the execution has met the cancel and ended
    assert after == []
    row = await run_row(db, run_id)
    assert row is not None and row["status"] == "cancelled" and row["result"] is None


async def test_retrying_a_failed_run_resumes_from_its_recorded_steps(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    booking = Booking()
    await workers.serve_failing_fast(booking.register)
    run_id = await (await system.sdk()).start_run("book")
    row = await wait_status(db, run_id, "failed", timeout=60)
    assert "mail server" in row["error"]
    assert (await post(system, f"/api/runs/{run_id}/cancel"))[0] == 409
    booking.broken = False
    status, body = await post(system, f"/api/runs/{run_id}/retry")
    assert status == 200, body
    assert body["data"]["retried_by"] == "ops"
    row = await wait_status(db, run_id, "finished", timeout=60)
    assert __import__("json").loads(row["result"]) == "seat 12A"
    assert booking.effects["reserve"] == 1  # not from scratch: the recorded step is not executed again
    assert row["retried_by"] == "ops"


async def test_cancel_racing_an_answer_has_exactly_one_outcome(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    finished: list[str] = []

    @layby.step
    async def ship() -> None:
        finished.append("shipped")

    def register(w: layby.Worker) -> None:
        @w.flow("race")
        async def flow(_: Any) -> Any:
            await layby.ask_user("Ship?", mode="async", expiry_at=soon())
            await ship()
            return "shipped"

    await workers.serve(await workers.new(register))
    client = await system.sdk()
    for _ in range(5):
        finished.clear()
        run_id = await client.start_run("race")
        (asked,) = await open_asks(db, run_id, 1)
        answered, (cancelled, _) = await asyncio.gather(
            answer(system, asked, "go"), post(system, f"/api/runs/{run_id}/cancel")
        )
        row = await wait_status(db, run_id, "finished", "cancelled", timeout=30)
        await settled(db, store, "race")  # the losing side has played out too
        row = await run_row(db, run_id)
        assert row is not None
        if cancelled == 200:
            assert row["status"] == "cancelled"
            assert answered in (200, 404, 409)
        else:
            assert cancelled == 409 and row["status"] == "finished" and finished == ["shipped"]


async def test_a_started_run_is_never_a_404_and_an_answered_question_is_not_open(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Read your writes: once a start returns, the run view shows the run; once an answer door
    returns 200, the run view no longer lists the question as open."""

    def register(w: layby.Worker) -> None:
        @w.flow("ryw")
        async def flow(_: Any) -> Any:
            return await layby.ask_user("Now?", mode="async", expiry_at=soon())

        @w.flow("quick")
        async def quick(n: Any) -> Any:
            return n

    await workers.serve(await workers.new(register))
    client = await system.sdk()
    async with system.http(OPERATOR) as http:
        for n in range(1000):
            run_id = await client.start_run("quick", n)
            r = await http.get(f"/api/runs/{run_id}")
            assert r.status_code == 200, r.text
            assert r.json()["data"]["status"] in ("running", "finished")
    run_id = await client.start_run("ryw")
    (asked,) = await open_asks(db, run_id, 1)
    assert await answer(system, asked, "now") == 200
    _, view = await run_view(system, run_id)
    assert asked not in view["data"].get("open", [])


async def test_workers_report_in_and_a_start_of_a_flow_nobody_serves_is_flagged(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    def register(w: layby.Worker) -> None:
        @w.flow("alpha")
        async def alpha(_: Any) -> Any:
            return "a"

        @w.flow("beta")
        async def beta(_: Any) -> Any:
            return "b"

    worker = await workers.new(register)
    await workers.serve(worker)
    async with system.http(OPERATOR) as http:
        listed = (await http.get("/api/workers")).json()["data"]
    mine = [w for w in listed["items"] if w["worker_id"] == worker.worker_id]
    assert mine and mine[0]["alive"] is True and mine[0]["flows"] == ["alpha", "beta"]
    assert mine[0]["identity"] == "ops"
    async with system.http(BOB) as http:  # a user sees its own workers only
        assert (await http.get("/api/workers")).json()["data"]["items"] == []

    client = await system.sdk()
    from layby_contracts.commands import RunAccepted, StartRun

    served = await client.request_run(StartRun(token=OPERATOR, run_id=layby_run_id(), flow="alpha"))
    assert isinstance(served, RunAccepted) and served.warning is None
    orphan_id = layby_run_id()
    orphan = await client.request_run(StartRun(token=OPERATOR, run_id=orphan_id, flow="nosuchflow"))
    assert isinstance(orphan, RunAccepted) and orphan.warning is not None
    assert "no worker serves flow 'nosuchflow'" in orphan.warning and "alpha, beta" in orphan.warning
    _, view = await run_view(system, orphan_id)
    assert view["data"]["status"] == "running"
    assert view["data"]["warning"] == "no worker serves flow 'nosuchflow'; the run waits for one"


def layby_run_id() -> str:
    import uuid

    return str(uuid.uuid4())


async def test_a_worker_hosting_many_flows_lets_every_flow_make_progress(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Fair slots: with 8 flows, more runs than slots, and every flow busy, each flow's runs are
    executing within the first rounds; none waits for another flow's backlog to drain."""
    order: list[str] = []
    flows = [f"f{i}" for i in range(8)]

    def register(w: layby.Worker) -> None:
        for name in flows:

            async def run(_: Any, name: str = name) -> Any:
                order.append(name)
                await asyncio.sleep(0.02)
                return name

            w.flow(name)(run)

    client = await system.sdk()
    run_ids = [await client.start_run(name) for name in flows for _ in range(12)]
    worker = layby.Worker(await system.sdk(), settings=system.settings, concurrency=4)
    register(worker)
    await workers.serve(worker)
    for run_id in run_ids:
        await wait_status(db, run_id, "finished", timeout=60)
    first_rounds = order[: 2 * len(flows)]
    assert set(first_rounds) == set(flows), first_rounds
