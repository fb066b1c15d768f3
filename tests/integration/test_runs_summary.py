"""The runs summary door, the runs list's flow filter and the addressee of a run's questions
(docs/doors/runs.md#summary, the ops dashboard). Real NATS and PostgreSQL, the
services and a worker in-process."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.conftest import ALICE, BOB, OPERATOR, System
from tests.helpers import order_flows
from tests.integration.test_parks import Workers, open_asks, wait_status

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


async def get(system: System, path: str, token: str = OPERATOR) -> tuple[int, dict[str, Any]]:
    async with system.http(token) as http:
        r = await http.get(path)
        return r.status_code, r.json()


async def _serve(workers: Workers) -> None:
    await workers.serve_failing_fast(order_flows)


async def test_the_summary_counts_every_status_and_names_the_oldest_open_question(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """The summary counts the runs in each status (zero included), names the flows and the oldest
    question a run waits on, narrows to ``flow``, and a user counts only its own runs
    (docs/doors/runs.md#summary)."""
    await _serve(workers)
    alice, ops = await system.sdk(ALICE), await system.sdk()
    first = await alice.start_run("approve", 1)
    await open_asks(db, first, 1)
    second = await ops.start_run("approve", 2)
    await open_asks(db, second, 1)
    failed = await ops.start_run("explode")
    await wait_status(db, failed, "failed", timeout=60)

    status, body = await get(system, "/api/runs/summary")
    assert status == 200, body
    data = body["data"]
    assert data["counts"] == {
        "running": 0,
        "parked": 2,
        "resumed": 0,
        "finished": 0,
        "failed": 1,
        "cancelled": 0,
    }
    assert data["total"] == 3
    assert data["flows"] == ["approve", "explode"]
    oldest = data["oldest_open"]
    assert oldest["run_id"] == first and oldest["flow"] == "approve"
    assert oldest["question"] == "Approve order 1?" and oldest["audience"] == "alice"
    assert {"interaction_id", "created_at", "expiry_at"} <= set(oldest)

    _, narrowed = await get(system, "/api/runs/summary?flow=explode")
    assert narrowed["data"]["counts"]["failed"] == 1 and narrowed["data"]["total"] == 1
    assert narrowed["data"]["oldest_open"] is None
    assert narrowed["data"]["flows"] == ["approve", "explode"]  # the filter's choices stay

    _, own = await get(system, "/api/runs/summary", ALICE)
    assert own["data"]["total"] == 1 and own["data"]["counts"]["parked"] == 1
    assert own["data"]["flows"] == ["approve"]
    assert own["data"]["oldest_open"]["run_id"] == first
    _, none = await get(system, "/api/runs/summary", BOB)
    assert none["data"] == {
        "counts": dict.fromkeys(("running", "parked", "resumed", "finished", "failed", "cancelled"), 0),
        "total": 0,
        "flows": [],
        "oldest_open": None,
    }


async def test_the_runs_list_narrows_to_a_flow(system: System, workers: Workers, db: asyncpg.Pool) -> None:
    """``flow`` keeps only that flow's runs and ``total`` counts them; each item carries its step
    count (docs/doors/runs.md#runs-list)."""
    await _serve(workers)
    ops = await system.sdk()
    parked = await ops.start_run("approve", 7)
    failed = await ops.start_run("explode")
    await open_asks(db, parked, 1)
    await wait_status(db, failed, "failed", timeout=60)
    _, body = await get(system, "/api/runs?flow=explode")
    assert body["data"]["total"] == 1 and [r["run_id"] for r in body["data"]["items"]] == [failed]
    assert body["data"]["items"][0]["steps"] == 0  # every item says how many steps it recorded
    _, body = await get(system, "/api/runs?flow=approve&status=failed")
    assert body["data"]["total"] == 0 and body["data"]["items"] == []
    _, body = await get(system, "/api/runs?flow=nosuchflow")
    assert body["data"]["total"] == 0


async def test_a_parked_runs_questions_say_who_they_are_addressed_to(
    system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Each question of a parked run names its audience (docs/doors/runs.md#one-run)."""
    await _serve(workers)
    run_id = await (await system.sdk()).start_run("approve", 3)
    (asked,) = await open_asks(db, run_id, 1)
    _, body = await get(system, f"/api/runs/{run_id}")
    (ask,) = body["data"]["asks"]
    assert ask["interaction_id"] == asked and ask["audience"] == "alice" and ask["status"] == "pending"
    assert "channel" not in ask and "recipient" not in ask  # unset values are left out
