"""What a Kubernetes deployment relies on: the health port of the services without a door, and
``layby migrate`` (docs/kubernetes.md#probes, docs/kubernetes.md#upgrades)."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
import msgspec
import pytest

from layby import cli
from layby_contracts.http import ReadyChecks
from layby_server.observability.health import serve_health
from layby_server.operations.embedded import free_port
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_services.sweeper.main import serve as serve_sweeper
from tests.helpers import eventually

pytestmark = pytest.mark.integration


async def _get(url: str) -> httpx.Response | None:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            return await http.get(url)
    except httpx.TransportError:
        return None


async def test_a_consumer_only_service_answers_liveness_and_readiness_on_its_health_port(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """With LAYBY_HEALTH_PORT set, the sweeper answers /healthz while it runs and /readyz once
    JetStream and PostgreSQL answer, with the door's bodies."""
    port = free_port()
    settings = msgspec.structs.replace(settings, health_port=port)
    stop = asyncio.Event()
    task = asyncio.create_task(serve_sweeper(settings, stop))
    try:
        ready = await eventually(
            lambda: _get(f"http://127.0.0.1:{port}/readyz"),
            "the sweeper's health port to answer",
            until=lambda r: r is not None,
        )
        assert ready is not None
        assert (ready.status_code, ready.json()) == (
            200,
            {"data": {"status": "ready", "nats": True, "postgres": True}},
        )
        alive = await _get(f"http://127.0.0.1:{port}/healthz")
        assert alive is not None
        assert (alive.status_code, alive.json()) == (200, {"data": {"status": "ok"}})
        assert alive.headers["cache-control"] == "no-store"
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert await _get(f"http://127.0.0.1:{port}/healthz") is None  # the port closes with the service


async def test_readiness_names_the_dependency_that_does_not_answer() -> None:
    """/readyz is 503 with ``checks`` naming the failed dependency; anything but GET is a 400."""

    async def postgres_down() -> ReadyChecks:
        return ReadyChecks(nats=True, postgres=False)

    port = free_port()
    async with (
        serve_health("127.0.0.1", port, postgres_down),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as http,
    ):
        ready = await http.get("/readyz")
        assert (ready.status_code, ready.json()) == (
            503,
            {"error": "not ready", "checks": {"nats": True, "postgres": False}},
        )
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/other")).status_code == 404
        refused = await http.post("/healthz", content=b"x")
        assert (refused.status_code, refused.json()) == (
            400,
            {"error": "only GET /healthz, /readyz or /metrics"},
        )


async def test_migrate_creates_the_schema_and_exits(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``layby migrate`` applies every SQL file to LAYBY_DB_SCHEMA and exits 0; run again, it changes nothing."""
    schema = f"mig{free_port()}"
    monkeypatch.setenv("LAYBY_DATABASE_URL", pg_url)
    monkeypatch.setenv("LAYBY_DB_SCHEMA", schema)
    try:
        assert await asyncio.to_thread(cli.main, ["migrate"]) == 0
        first = capsys.readouterr().err.splitlines()
        assert first[-1] == f"schema {schema} migrated"
        assert any("db.migration.applied" in line for line in first)
        assert await asyncio.to_thread(cli.main, ["migrate"]) == 0
        assert capsys.readouterr().err == f"schema {schema} migrated\n"  # nothing applied again
        conn = await asyncpg.connect(pg_url)
        try:
            tables = await conn.fetch(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema
            )
        finally:
            await conn.close()
        assert {"interactions", "runs", "doors", "parked_entries"} <= {t["table_name"] for t in tables}
    finally:
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


def test_migrate_without_a_database_url_says_which_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    """Without LAYBY_DATABASE_URL (and no `layby up` beside it) ``layby migrate`` exits 2 naming it."""
    monkeypatch.delenv("LAYBY_DATABASE_URL", raising=False)
    monkeypatch.setenv("LAYBY_DATA_DIR", str(tmp_path))
    assert cli.main(["migrate"]) == 2
    assert capsys.readouterr().err == "error: LAYBY_DATABASE_URL must be set: it is the database to migrate\n"
