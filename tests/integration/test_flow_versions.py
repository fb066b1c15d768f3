"""Versioned flows (docs/versions.md): a run records the version of its flow it started on, only
workers serving that version execute it, a run nobody serves waits and says why, and an operator
moves runs between versions on the log. Real NATS and PostgreSQL, the five services and the
workers in-process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

import layby
from layby_contracts.errors import BadInput, Conflict, Forbidden
from layby_contracts.events import RunParked, RunResumed
from layby_server.store.eventstore import EventStore
from tests.conftest import BOB, System
from tests.helpers import eventually, soon
from tests.integration.test_parks import Workers, answer, open_asks, run_row, wait_status

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def workers(system: System) -> AsyncIterator[Workers]:
    w = Workers(system)
    yield w
    await w.stop_all()


def release(version: int, executed: list[tuple[int, str]]) -> Any:
    """A worker registering version ``version`` of the flow ``release``: it asks once, then
    returns which version finished it; ``executed`` records (version, run id) per execution."""

    def register(w: layby.Worker) -> None:
        @w.flow("release", version=version)
        async def flow(inp: dict[str, Any]) -> dict[str, Any]:
            executed.append((version, layby.current_run().run_id))
            ok = await layby.ask_user("Ship it?", answer_format="confirm", mode="async", expiry_at=soon())
            return {"ok": ok, "finished_on": version}

    return register


async def serving_versions(
    workers: Workers, executed: list[tuple[int, str]], *versions: int
) -> list[layby.Worker]:
    """A serving worker of each version of ``release``, in order."""
    started = [await workers.new(release(v, executed)) for v in versions]
    for worker in started:
        await workers.serve(worker)
    return started


async def run_view(system: System, run_id: str) -> dict[str, Any]:
    async with system.http() as http:
        response = await http.get(f"/api/runs/{run_id}")
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data


async def test_a_run_parked_on_version_1_resumes_on_a_version_1_worker_while_version_2_runs(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    executed: list[tuple[int, str]] = []
    old, new = await serving_versions(workers, executed, 1, 2)
    run_id = await old.start("release", {})
    [ix] = await open_asks(db, run_id, 1)
    assert (await run_row(db, run_id))["version"] == 1  # type: ignore[index]
    assert (await run_view(system, run_id))["version"] == 1
    # A start without a version takes the newest one a live worker serves.
    newer = await new.start("release", {})
    await open_asks(db, newer, 1)
    assert (await run_row(db, newer))["version"] == 2  # type: ignore[index]
    assert await answer(system, ix, True) == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"ok": True, "finished_on": 1}
    assert {v for v, r in executed if r == run_id} == {1}  # never executed by the version 2 worker
    assert {v for v, r in executed if r == newer} == {2}
    # Each worker says which versions it serves.
    async with system.http() as http:
        listed = (await http.get("/api/workers")).json()["data"]["items"]
    by_id = {w["worker_id"]: w for w in listed}
    assert by_id[new.worker_id]["versions"] == {"release": 2}
    assert "versions" not in by_id[old.worker_id]


async def test_with_no_worker_of_its_version_a_run_waits_and_says_why_then_a_move_resumes_it_on_the_new_one(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    executed: list[tuple[int, str]] = []
    old = await workers.new(release(1, executed))
    await workers.serve(old)
    run_id = await old.start("release", {})
    [ix] = await open_asks(db, run_id, 1)
    await workers.stop(old)  # version 1 is no longer deployed
    new = await workers.new(release(2, executed))
    await workers.serve(new)
    # Parked: it says it will wait once it resumes.
    view = await eventually(
        lambda: run_view(system, run_id), "the run to warn", until=lambda v: "warning" in v, timeout=40
    )
    assert "no worker serves version 1 of flow 'release'" in view["warning"]
    assert "will wait" in view["warning"]
    assert await answer(system, ix, True) == 200
    await wait_status(db, run_id, "resumed")
    view = await run_view(system, run_id)
    assert view["status"] == "resumed"
    assert "no worker serves version 1 of flow 'release'; the run waits for one" in view["warning"]
    assert "layby runs migrate" in view["warning"]
    assert [v for v, r in executed if r == run_id] == [1]  # the version 2 worker did not take it

    async with system.http() as http:
        moved = await http.post(f"/api/runs/{run_id}/move", json={"version": 2})
    assert moved.status_code == 200, moved.text
    assert moved.json()["data"] == {
        "run_id": run_id,
        "version": 2,
        "from_version": 1,
        "status": "resumed",
        "moved_by": "ops",
    }
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"ok": True, "finished_on": 2}
    assert [v for v, r in executed if r == run_id] == [1, 2]
    # The move is on the run's log: the resumed event again, with the new version and who moved it.
    history = [s.event for s in await store.events_on(store.names.run(run_id), limit=50)]
    moves = [e for e in history if isinstance(e, RunResumed) and e.moved is not None]
    assert len(moves) == 1
    assert moves[0].version == 2
    assert moves[0].moved is not None
    assert (moves[0].moved.from_version, moves[0].moved.by) == (1, "ops")
    async with system.http() as http:
        timeline = (await http.get(f"/api/runs/{run_id}/timeline")).json()["data"]["entries"]
    kinds = [e["kind"] for e in timeline if e["kind"] in ("parked", "resumed", "moved", "finished")]
    assert kinds == ["parked", "resumed", "moved", "finished"]
    assert next(e for e in timeline if e["kind"] == "moved")["detail"] == "version 1 to 2"


async def test_a_parked_run_moved_before_its_answer_resumes_on_the_new_version(
    system: System, workers: Workers, db: asyncpg.Pool, store: EventStore
) -> None:
    executed: list[tuple[int, str]] = []
    old, _new = await serving_versions(workers, executed, 1, 2)
    run_id = await old.start("release", {})
    [ix] = await open_asks(db, run_id, 1)
    client = await system.sdk()
    await client.move_run(run_id, 2)
    await client.move_run(run_id, 2)  # already there: nothing more is recorded
    last = await store.last(store.names.run(run_id), leader=True)
    assert last is not None
    assert isinstance(last.event, RunParked)
    assert last.event.version == 2
    moved = await eventually(
        lambda: run_row(db, run_id), "the move projected", until=lambda r: r["version"] == 2
    )
    assert moved["status"] == "parked"
    # Still parked on the same question: the inbox keeps it, the answer resumes it on version 2.
    assert await answer(system, ix, False) == 200
    row = await wait_status(db, run_id, "finished")
    assert json.loads(row["result"]) == {"ok": False, "finished_on": 2}
    assert [v for v, r in executed if r == run_id] == [1, 2]
    history = [s.event for s in await store.events_on(store.names.run(run_id), limit=50)]
    assert sum(isinstance(e, RunParked) and e.moved is not None for e in history) == 1


async def test_a_move_is_refused_with_its_reason(system: System, workers: Workers, db: asyncpg.Pool) -> None:
    executed: list[tuple[int, str]] = []
    worker = await workers.new(release(1, executed))
    await workers.serve(worker)
    run_id = await worker.start("release", {})
    [ix] = await open_asks(db, run_id, 1)
    async with system.http(token=BOB) as http:
        refused = await http.post(f"/api/runs/{run_id}/move", json={"version": 2})
        assert refused.status_code == 403
    async with system.http() as http:
        for body, field in (({"version": 0}, "version"), ({"version": "2"}, "version"), ({"to": 2}, "to")):
            refused = await http.post(f"/api/runs/{run_id}/move", json=body)
            assert refused.status_code == 400, refused.text
            assert refused.json()["field"] in (field, "version")
    assert await answer(system, ix, True) == 200
    await wait_status(db, run_id, "finished")
    async with system.http() as http:
        refused = await http.post(f"/api/runs/{run_id}/move", json={"version": 2})
        assert refused.status_code == 409
        assert "only a parked run, a failed one, or one waiting for a worker can be moved" in refused.text
    client = await system.sdk()
    with pytest.raises(Conflict):
        await client.move_run(run_id, 2)
    user = await system.sdk(BOB)
    with pytest.raises((Forbidden, BadInput)):
        await user.move_run(run_id, 2)


async def test_the_version_a_flow_declares_is_checked() -> None:
    worker = layby.Worker(settings=None)
    for bad in (0, -1, True, "2", 1.5):
        with pytest.raises(BadInput) as refused:
            worker.flow("f", version=bad)  # type: ignore[arg-type]
        assert refused.value.field == "version"


async def test_the_cli_moves_every_run_of_a_flow_on_a_version(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    import asyncio
    import os
    import sys
    from pathlib import Path

    from tests.conftest import OPERATOR

    executed: list[tuple[int, str]] = []
    old = await workers.new(release(1, executed))
    await workers.serve(old)
    runs = [await old.start("release", {}) for _ in range(3)]
    for run_id in runs:
        await open_asks(db, run_id, 1)
    env = {**os.environ, "LAYBY_URL": system.url, "LAYBY_TOKEN": OPERATOR}
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("layby")),
        "runs",
        "migrate",
        "--flow",
        "release",
        "--from",
        "1",
        "--to",
        "3",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    for run_id in runs:
        assert f"{run_id} parked on version 3 (from version 1)" in out.decode()
        assert (await run_row(db, run_id))["version"] == 3  # type: ignore[index]
