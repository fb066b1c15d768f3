"""Exactly-once resume under crashes (docs/aggregates/run.md#resumed-exactly-once).

The services and the workers run as separate processes. Failpoints (``layby.faults``) SIGKILL a
process at the worst moments: a worker after executing a continuation and before recording
its outcome, a worker after recording and before acking, the resume service after recording
the resume and before publishing, and after publishing and before acking. The NATS server is
restarted under parked runs. Each test ends with every run resumed exactly once: one
``RunResumed`` per park, one ``RunFinished`` per run, one committed effect per resume id.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import msgspec
import nats.js.errors
import pytest

from layby_contracts.events import RunFinished, RunResumed
from layby_server.projection.projector import read_range
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import OPERATOR
from tests.e2e.park_flows import SCHEMA_SQL
from tests.e2e.test_processes import SERVICES, service_env, spawn, stop_processes, wait_ready
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
RUNS = 6
ROOT = Path(__file__).resolve().parents[2]


def worker_env(settings: Settings, failpoints: str = "") -> dict[str, str]:
    env = service_env(settings)
    env.update(
        LAYBY_TOKEN=OPERATOR,
        LAYBY_CONTINUATION_ACK_WAIT_SECONDS="2",
        LAYBY_FAILPOINTS=failpoints,
        PARKS_DSN=str(settings.database_url),
        PARKS_SCHEMA=settings.db_schema,
        PYTHONPATH=str(ROOT),
    )
    return env


def spawn_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "layby.cli", "worker", "tests.e2e.park_flows:worker"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
async def effects(settings: Settings, db: asyncpg.Pool) -> AsyncIterator[asyncpg.Pool]:
    await db.execute(SCHEMA_SQL)
    return db


async def start_and_park(
    settings: Settings, db: asyncpg.Pool, flow: str = "crashy", runs: int = RUNS
) -> dict[str, str]:
    """Start ``runs`` runs of ``flow`` (input 0, 1, ...); once each has parked, return run id -> the
    interaction it parked on."""
    from layby.sdk import connect

    client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
    try:
        run_ids = [await client.start_run(flow, n) for n in range(runs)]
    finally:
        await client.close()

    async def parked() -> dict[str, str] | None:
        rows = await db.fetch("SELECT run_id, asks FROM runs WHERE status = 'parked'")
        found = {r["run_id"]: msgspec.json.decode(r["asks"])[0]["interaction_id"] for r in rows}
        return {k: v for k, v in found.items() if k in run_ids} if set(found) >= set(run_ids) else None

    return await eventually(parked, "every run to park", timeout=60, interval=0.1)  # type: ignore[return-value]


async def answer_all(settings: Settings, asks: dict[str, str]) -> None:
    url = f"http://127.0.0.1:{settings.http_port}"
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {OPERATOR}"}) as http:
        for ix in asks.values():
            resp = await eventually(
                lambda ix=ix: http.post(f"/api/interactions/{ix}/answer", json={"answer": "yes"}),
                f"the answer door to take the answer to {ix}",
                timeout=30,
                interval=0.2,
                retry=httpx.HTTPError,
            )
            assert resp.status_code == 200, resp.text


async def assert_exactly_once(store: EventStore, db: asyncpg.Pool, asks: dict[str, str]) -> None:
    async def finished() -> bool:
        rows = await db.fetch("SELECT status FROM runs WHERE run_id = ANY($1::text[])", list(asks))
        return len(rows) == len(asks) and all(r["status"] == "finished" for r in rows)

    await eventually(finished, "every run to finish", timeout=90, interval=0.1)
    first, last = await store.bounds()
    events = [s.event for s in await read_range(store, max(first, 1), last)]
    for run_id in asks:
        resumed = [e for e in events if isinstance(e, RunResumed) and e.run_id == run_id]
        ended = [e for e in events if isinstance(e, RunFinished) and e.run_id == run_id]
        assert len(resumed) == 1, f"run {run_id} resumed {len(resumed)} times"
        assert len(ended) == 1, f"run {run_id} finished {len(ended)} times"
        assert ended[0].result == {"n": ended[0].result["n"], "value": "yes"}
    effects = await db.fetch("SELECT resume_id, run_id FROM effects")
    assert sorted(r["run_id"] for r in effects) == sorted(asks)
    assert {r["resume_id"] for r in effects} == {f"{run_id}:1" for run_id in asks}


@pytest.mark.parametrize("failpoint", ["worker.after_flow", "worker.before_ack"])
async def test_a_worker_killed_between_receiving_and_acking_a_continuation_resumes_each_run_once(
    settings: Settings, store: EventStore, effects: asyncpg.Pool, failpoint: str
) -> None:
    procs = {name: spawn(name, service_env(settings)) for name in SERVICES}
    try:
        await wait_ready(f"http://127.0.0.1:{settings.http_port}")
        procs["worker-a"] = spawn_worker(worker_env(settings, failpoint))
        asks = await start_and_park(settings, effects)
        await answer_all(settings, asks)
        await eventually(lambda: procs["worker-a"].poll() is not None, "worker A to die", timeout=60)
        assert procs["worker-a"].returncode == -9
        procs["worker-b"] = spawn_worker(worker_env(settings))
        await assert_exactly_once(store, effects, asks)
        executions = await effects.fetch("SELECT resume_id, pid FROM executions")
        if failpoint == "worker.after_flow":
            # The killed execution had committed its effect; the redelivery executed it again.
            assert len(executions) > len(asks)
            assert len({r["pid"] for r in executions}) == 2
    finally:
        stop_processes(procs)


RESUME_ACK_WAIT_SECONDS = 5.0
"""The resume consumer's ack wait in these tests: the killed service's message comes back after
it (the service's own 30 s would only make the test wait longer for the same redelivery)."""


async def shorten_resume_ack_wait(store: EventStore) -> None:
    """Once the resume service has created its durable consumer, lower its ack wait (an editable
    field: the same config sent again updates it). A restarted service binds to the consumer as
    it finds it."""
    durable = store.names.durable("resume")
    info = await eventually(
        lambda: store.js.consumer_info(store.names.events_stream, durable),
        f"the resume consumer {durable} to exist",
        timeout=30,
        retry=nats.js.errors.NotFoundError,
    )
    config = info.config
    config.ack_wait = RESUME_ACK_WAIT_SECONDS
    updated = await store.js.add_consumer(store.names.events_stream, config)
    assert updated.config.ack_wait == RESUME_ACK_WAIT_SECONDS


@pytest.mark.parametrize("failpoint", ["resume.after_claim", "resume.after_publish"])
async def test_the_resume_service_killed_around_its_publish_resumes_each_run_once(
    settings: Settings, store: EventStore, effects: asyncpg.Pool, failpoint: str
) -> None:
    env = service_env(settings)
    procs = {name: spawn(name, env) for name in SERVICES if name != "resume"}
    procs["resume"] = spawn("resume", {**env, "LAYBY_FAILPOINTS": failpoint})
    try:
        await wait_ready(f"http://127.0.0.1:{settings.http_port}")
        await shorten_resume_ack_wait(store)
        procs["worker"] = spawn_worker(worker_env(settings))
        asks = await start_and_park(settings, effects)
        await answer_all(settings, asks)
        await eventually(lambda: procs["resume"].poll() is not None, "the resume service to die", timeout=60)
        assert procs["resume"].returncode == -9
        procs["resume"] = spawn("resume", env)
        await assert_exactly_once(store, effects, asks)
    finally:
        stop_processes(procs)


async def test_a_nats_restart_under_parked_runs_resumes_each_run_once(
    settings: Settings, tmp_path: Path, effects: asyncpg.Pool
) -> None:
    from layby.connection import connect_nats
    from layby_server.operations.embedded import EmbeddedNats

    server = EmbeddedNats(tmp_path / "nats").start()
    own = msgspec.structs.replace(settings, nats_url=server.url)
    procs = {name: spawn(name, service_env(own)) for name in SERVICES}
    procs["worker"] = spawn_worker(worker_env(own))
    try:
        await wait_ready(f"http://127.0.0.1:{own.http_port}")
        asks = await start_and_park(own, effects)
        server.stop()
        await asyncio.sleep(1.0)  # a time window on purpose: the parked runs live through a 1 s outage
        server.start()
        await wait_ready(f"http://127.0.0.1:{own.http_port}")
        await answer_all(own, asks)
        nc = await connect_nats(server.url, name="test")
        try:
            await assert_exactly_once(EventStore(nc, own.names), effects, asks)
        finally:
            await nc.close()
        assert all(p.poll() is None for p in procs.values()), "a process died with NATS"
    finally:
        stop_processes(procs)
        server.stop()
