"""Durable steps under kill -9 (docs/aggregates/run.md#steps, docs/parks.md#steps).

The services and two workers run as separate processes. The ``charger`` flow charges (a step)
before and after a park; the charge has no idempotency of its own, so the ``charges`` table
counts every execution of the step's function.
"""

from __future__ import annotations

import asyncpg
import msgspec
import pytest

from layby_server.settings import Settings
from tests.conftest import OPERATOR
from tests.e2e.test_park_crashes import effects, spawn_worker, start_and_park, worker_env  # noqa: F401 - fixture
from tests.e2e.test_processes import SERVICES, service_env, spawn, stop_processes, wait_ready
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
RUNS = 4


async def test_a_step_before_and_after_a_park_charges_exactly_twice_across_replays_and_kill_9(
    settings: Settings,
    effects: asyncpg.Pool,  # noqa: F811 - the fixture
) -> None:
    """Worker A is killed after executing a resumed flow (both charges done and recorded) and
    before recording its outcome; worker B replays the run. Every run was charged exactly twice,
    and the run's result holds the receipts of those two charges (the replay got the recorded
    receipts, not fresh ones)."""
    import httpx

    procs = {name: spawn(name, service_env(settings)) for name in SERVICES}
    try:
        await wait_ready(f"http://127.0.0.1:{settings.http_port}")
        procs["worker-a"] = spawn_worker(worker_env(settings, "worker.after_flow"))
        asks = await start_and_park(settings, effects, "charger", RUNS)
        url = f"http://127.0.0.1:{settings.http_port}"
        first, *rest = asks.values()
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {OPERATOR}"}) as http:
            # One resume at a time reaches worker A, so it dies with nothing else half-done.
            assert (
                await http.post(f"/api/interactions/{first}/answer", json={"answer": "yes"})
            ).status_code == 200
            await eventually(lambda: procs["worker-a"].poll() is not None, "worker A to die", timeout=60)
            assert procs["worker-a"].returncode == -9
            procs["worker-b"] = spawn_worker(worker_env(settings))
            for ix in rest:
                assert (
                    await http.post(f"/api/interactions/{ix}/answer", json={"answer": "yes"})
                ).status_code == 200

        async def finished() -> list[asyncpg.Record] | None:
            rows = await effects.fetch(
                "SELECT run_id, status, result FROM runs WHERE run_id = ANY($1::text[])", list(asks)
            )
            return rows if len(rows) == RUNS and all(r["status"] == "finished" for r in rows) else None

        rows = await eventually(finished, "every run to finish", timeout=120, interval=0.1)
        charges = await effects.fetch("SELECT step_key, what, receipt, pid FROM charges")
        assert len(charges) == 2 * RUNS, [dict(c) for c in charges]
        by_key = {c["step_key"]: c for c in charges}
        assert len(by_key) == 2 * RUNS  # one charge per (run, call): none repeated
        for row in rows:
            result = msgspec.json.decode(row["result"])
            assert by_key[f"{row['run_id']}:step:0"]["receipt"] == result["before"]
            assert by_key[f"{row['run_id']}:step:2"]["receipt"] == result["after"]
            assert result["value"] == "yes"
        # The killed run's two charges were both made by worker A; worker B only replayed them.
        killed = next(r for r in rows if r["run_id"] == next(iter(asks)))
        assert {c["pid"] for c in charges if c["step_key"].startswith(killed["run_id"])} == {
            procs["worker-a"].pid
        }
    finally:
        stop_processes(procs)
