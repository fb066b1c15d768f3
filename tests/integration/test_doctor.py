"""``layby doctor`` and ``GET /api/doctor`` (docs/operations.md#layby-doctor): each check failing and
passing on real servers — NATS with and without ``sync_interval: always`` and authorization, a
cluster whose streams are under-replicated, a database with missing migrations, a public URL that
reaches the door and one that reaches something else, channel tokens right and wrong on the
stand-ins, a clock off, a service missing."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import httpx
import msgspec
import pytest
import trustme
import uvicorn
from litestar import Litestar, Response, get
from litestar.params import PathParameter

from layby.connection import connect_nats
from layby.natskeys import service_inbox
from layby_contracts.http.doctor import DoctorCheck, DoctorReport
from layby_server.operations.doctor import diagnose, reach_from
from layby_server.operations.embedded import EmbeddedNats, EmbeddedNatsCluster, free_port
from layby_server.operations.natsauth import authorization_for
from layby_server.projection.db import migrations
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore, wait_for_jetstream
from tests.conftest import BOB as USER
from tests.conftest import System, start_system, stop_system
from tests.helpers import eventually
from tests.integration.chat_systems import (
    SLACK_SECRETS,
    TELEGRAM_SECRETS,
    WHATSAPP_SECRETS,
    slack_channel,
    telegram_channel,
    whatsapp_channel,
)
from tests.standins.serving import serve
from tests.standins.slack import serve_slack_standin
from tests.standins.telegram import serve_telegram_standin
from tests.standins.twilio import AUTH_TOKEN as TWILIO_TOKEN
from tests.standins.twilio import serve_twilio_standin
from tests.standins.whatsapp import serve_whatsapp_standin


def check(report: DoctorReport, name: str) -> DoctorCheck:
    found = [c for c in report.checks if c.name == name]
    assert found, f"no check {name!r} in {[c.name for c in report.checks]}"
    return found[0]


async def run_doctor(settings: Settings, **changes: Any) -> DoctorReport:
    async with reach_from(settings) as reach:
        for key, value in changes.items():
            setattr(reach, key, value)
        return await diagnose(reach)


@pytest.fixture
async def system(settings: Settings, store: EventStore, db: asyncpg.Pool) -> AsyncIterator[System]:
    running = await start_system(settings)
    yield running
    await stop_system(running)


# -- NATS ---------------------------------------------------------------------------------------


@pytest.fixture
def nats_dir(tmp_path: Path) -> Path:
    return tmp_path / "nats"


async def _streams_on(url: str, settings: Settings, seed: str | None = None, replicas: int = 1) -> None:
    nc = await connect_nats(
        url, name="provision", seed=seed, inbox_prefix=service_inbox("admin") if seed else None
    )
    try:
        await wait_for_jetstream(nc, timeout=20)
        await EventStore(nc, settings.names, replicas=replicas).provision()
    finally:
        await nc.close()


async def test_a_nats_that_does_not_sync_every_append_fails_and_one_that_does_passes(
    settings: Settings, nats_dir: Path
) -> None:
    for sync_always, expected in ((False, "fail"), (True, "ok")):
        server = EmbeddedNats(
            nats_dir / str(sync_always), monitor_port=free_port(), sync_always=sync_always
        ).start()
        try:
            here = msgspec.structs.replace(settings, nats_url=server.url)
            await _streams_on(server.url, here)
            report = await run_doctor(here, monitor_urls=[f"http://127.0.0.1:{server.monitor_port}"])
            found = check(report, "nats.sync")
            assert found.status == expected, found
            if expected == "fail":
                assert "sync_interval: always" in (found.fix or "")
                assert not report.ok
            # One node, streams at R1: as it should be.
            assert check(report, "nats.replicas").status == "ok"
            # The monitoring port's clock was compared with ours.
            assert "NATS http://127.0.0.1" in check(report, "clocks").detail
        finally:
            server.stop()


async def test_without_a_monitoring_url_the_sync_check_says_it_cannot_tell(system: System) -> None:
    report = await run_doctor(system.settings)
    found = check(report, "nats.sync")
    assert found.status == "warn"
    assert "LAYBY_NATS_MONITOR_URL" in found.detail


async def test_a_nats_without_authorization_fails_and_one_with_it_passes(
    settings: Settings, nats_dir: Path
) -> None:
    # The shared test server runs without authorization: the check must say so.
    report = await run_doctor(settings)
    assert check(report, "nats.authorization").status == "fail"
    authorization, seeds = authorization_for(
        settings.names, nats_dir / "keys", "tok-op-0123456789:op:operator"
    )
    server = EmbeddedNats(nats_dir / "auth", authorization=authorization).start()
    try:
        here = msgspec.structs.replace(settings, nats_url=server.url, nats_seed=seeds["admin"])
        await _streams_on(server.url, here, seed=seeds["admin"])
        report = await run_doctor(here)
        assert check(report, "nats.reachable").status == "ok"
        assert check(report, "nats.authorization").status == "ok"
    finally:
        server.stop()


async def test_streams_below_the_cluster_size_fail_the_replicas_check(
    settings: Settings, tmp_path: Path
) -> None:
    cluster = EmbeddedNatsCluster(tmp_path / "cluster", 3).start()
    try:
        await eventually(cluster.meta_leader, "the cluster to elect a meta leader", timeout=30)
        monitors = [f"http://127.0.0.1:{node.monitor_port}" for node in cluster.nodes]
        here = msgspec.structs.replace(settings, nats_url=cluster.url, stream_replicas=1)
        await _streams_on(cluster.url, here, replicas=1)
        found = check(await run_doctor(here, monitor_urls=monitors), "nats.replicas")
        assert found.status == "fail", found
        assert "cluster of 3" in found.detail
        assert "LAYBY_STREAM_REPLICAS=3" in (found.fix or "")
        replicated = msgspec.structs.replace(here, namespace=here.namespace + "r", stream_replicas=3)
        await _streams_on(cluster.url, replicated, replicas=3)
        found = check(await run_doctor(replicated, monitor_urls=monitors), "nats.replicas")
        assert found.status == "ok", found
        assert "R3 on 3 node(s)" in found.detail
    finally:
        cluster.stop()


async def test_an_unreachable_nats_fails_and_the_checks_that_need_it_skip(settings: Settings) -> None:
    gone = msgspec.structs.replace(settings, nats_url=f"nats://127.0.0.1:{free_port()}")
    report = await run_doctor(gone)
    assert check(report, "nats.reachable").status == "fail"
    for name in ("nats.replicas", "services"):
        assert check(report, name).status == "skip"
    assert not report.ok


# -- PostgreSQL ---------------------------------------------------------------------------------


async def test_migrations_not_applied_fail_and_all_applied_pass(settings: Settings, db: asyncpg.Pool) -> None:
    report = await run_doctor(settings)
    assert check(report, "postgres.reachable").status == "ok"
    assert check(report, "postgres.migrations").status == "ok"
    last = migrations()[-1]
    await db.execute("DELETE FROM schema_migrations WHERE version = $1", last.version)
    found = check(await run_doctor(settings), "postgres.migrations")
    assert found.status == "fail"
    assert last.filename in found.detail
    assert "layby migrate" in (found.fix or "")
    empty = msgspec.structs.replace(settings, db_schema=settings.db_schema + "_none")
    found = check(await run_doctor(empty), "postgres.migrations")
    assert found.status == "fail"
    assert "no migrations applied" in found.detail


async def test_an_unreachable_postgresql_fails(settings: Settings) -> None:
    gone = msgspec.structs.replace(settings, database_url=f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    report = await run_doctor(gone)
    assert check(report, "postgres.reachable").status == "fail"
    assert check(report, "postgres.migrations").status == "skip"


# -- services and clocks ------------------------------------------------------------------------


async def test_every_service_answers_and_a_stopped_one_is_named(system: System) -> None:
    report = await run_doctor(system.settings)
    found = check(report, "services")
    assert found.status == "ok", found
    for name in ("ask", "door", "delivery", "resume", "sweeper"):
        assert f"{name} x1" in found.detail
    assert check(report, "clocks").status == "ok"
    await system.stop_service("resume")
    found = check(await run_doctor(system.settings), "services")
    assert found.status == "fail"
    assert "no resume service answered: no parked run resumes" in found.detail


async def test_a_clock_off_by_more_than_the_bound_fails(system: System) -> None:
    found = check(await run_doctor(system.settings, wall=lambda: time.time() + 5), "clocks")
    assert found.status == "fail"
    assert "NTP" in (found.fix or "")


# -- the public base URL ------------------------------------------------------------------------


async def test_a_public_url_that_reaches_the_door_is_proven_by_its_nonce(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    here = msgspec.structs.replace(settings, public_base_url=f"http://127.0.0.1:{settings.http_port}")
    running = await start_system(here)
    try:
        found = check(await run_doctor(here), "public_url")
        # Reached, over plain HTTP on this machine: works here, not for the outside.
        assert found.status == "warn", found
        assert "reaches this installation's door" in found.detail
    finally:
        await stop_system(running)


async def test_a_public_url_served_over_https_by_a_proxy_in_front_of_the_door_passes(
    settings: Settings, store: EventStore, db: asyncpg.Pool, tmp_path: Path
) -> None:
    """The shape of a deployment: TLS ends at a proxy that forwards to the door."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    door = f"http://127.0.0.1:{settings.http_port}"

    @get("/{path:path}")
    async def forward(path: Annotated[str, PathParameter()]) -> Response[bytes]:
        async with httpx.AsyncClient() as client:
            answered = await client.get(f"{door}{path}")
        return Response(answered.content, status_code=answered.status_code)

    port = free_port()
    config = uvicorn.Config(
        Litestar([forward]),
        port=port,
        log_level="warning",
        lifespan="off",
        ssl_certfile=str(cert_file),
        ssl_keyfile=str(key_file),
    )
    proxy = uvicorn.Server(config)
    serving = asyncio.create_task(proxy.serve())
    here = msgspec.structs.replace(settings, public_base_url=f"https://127.0.0.1:{port}")
    running = await start_system(here)
    try:
        await eventually(lambda: proxy.started, "the proxy to listen", timeout=10)
        context = ssl.create_default_context()
        ca.configure_trust(context)
        trusted = lambda: httpx.AsyncClient(verify=context, timeout=5)  # noqa: E731
        found = check(await run_doctor(here, http=trusted), "public_url")
        assert found.status == "ok", found
        assert "over HTTPS" in found.detail
        # Without trusting its certificate, the same URL cannot be reached.
        found = check(await run_doctor(here), "public_url")
        assert found.status == "fail"
        assert "certificate" in found.detail.lower() or "ssl" in found.detail.lower()
    finally:
        proxy.should_exit = True
        await serving
        await stop_system(running)


async def test_a_public_url_that_reaches_something_else_fails(system: System) -> None:
    @get("/{path:path}", sync_to_thread=False)
    def anything(path: Annotated[str, PathParameter()]) -> str:
        return "a proxy's default page"

    async with serve(Litestar([anything]), "another server") as url:
        elsewhere = msgspec.structs.replace(system.settings, public_base_url=url)
        found = check(await run_doctor(elsewhere), "public_url")
        assert found.status == "fail", found
        assert "no door of this installation served the probe" in found.detail
    nowhere = msgspec.structs.replace(system.settings, public_base_url=f"https://127.0.0.1:{free_port()}")
    found = check(await run_doctor(nowhere), "public_url")
    assert found.status == "fail"
    assert "cannot be reached" in found.detail


async def test_the_probe_door_takes_only_a_nonce_and_says_nothing_else(system: System) -> None:
    async with system.http(token=None) as http:
        for bad in ("zz" * 16, "abc", "A" * 32, "0" * 33):
            response = await http.get(f"/api/doctor/probe/{bad}")
            assert response.status_code == 404
            assert bad not in response.text
        response = await http.get(f"/api/doctor/probe/{'ab' * 16}")
        assert response.status_code == 204
        assert response.content == b""


# -- channels, secrets, the door ----------------------------------------------------------------


async def test_channel_tokens_are_checked_by_the_providers_identity_call(settings: Settings) -> None:
    async with (
        serve_slack_standin() as slack,
        serve_telegram_standin() as telegram,
        serve_twilio_standin() as tw,
        serve_whatsapp_standin() as wa,
    ):
        channels = {
            "team": slack_channel(slack),
            "tg": telegram_channel(telegram, 42),
            "wa": whatsapp_channel(wa, "+15550001111"),
            "sms": {
                "plugin": "twilio",
                "account_sid": tw.account_sid,
                "auth_token": "twilio-token",
                "api_url": tw.api_url,
                "from": "+15550002222",
                "public_url": "https://layby.example/api/channels/sms/events",
            },
        }
        right = SLACK_SECRETS | TELEGRAM_SECRETS | WHATSAPP_SECRETS | {"twilio-token": TWILIO_TOKEN}
        here = msgspec.structs.replace(
            settings,
            channels=json.dumps(channels),
            webhook_secrets=",".join(f"{k}:{v}" for k, v in right.items()),
        )
        report = await run_doctor(here)
        for name in ("channel.team", "channel.tg", "channel.wa", "channel.sms"):
            assert check(report, name).status == "ok", check(report, name)
        assert "@" in check(report, "channel.tg").detail
        assert tw.account_sid in check(report, "channel.sms").detail
        # Channels configured and no public base URL: their questions are refused.
        assert check(report, "public_url").status == "fail"
        wrong = right | {
            "slack-bot": "xoxb-not-the-token",
            "tg-bot": "123456:not-the-token",
            "wa-token": "not-the-token",
            "twilio-token": "not-the-token",
        }
        here = msgspec.structs.replace(here, webhook_secrets=",".join(f"{k}:{v}" for k, v in wrong.items()))
        report = await run_doctor(here)
        for name in ("channel.team", "channel.tg", "channel.wa", "channel.sms"):
            found = check(report, name)
            assert found.status == "fail", found
            assert "not-the-token" not in found.detail
        assert "invalid_auth" in check(report, "channel.team").detail
        missing = msgspec.structs.replace(here, webhook_secrets="")
        found = check(await run_doctor(missing), "channel.team")
        assert found.status == "fail"
        assert "slack-bot" in found.detail


async def test_a_missing_sealing_key_fails(settings: Settings) -> None:
    report = await run_doctor(settings)
    assert check(report, "secrets.sealing").status == "ok"
    assert check(report, "secrets.webhooks").status == "skip"
    found = check(await run_doctor(msgspec.structs.replace(settings, secrets_key=None)), "secrets.sealing")
    assert found.status == "fail"
    assert "layby secrets-key" in (found.fix or "")


async def test_the_doctor_door_is_for_operators(system: System) -> None:
    async with system.http() as http:
        response = await http.get("/api/doctor")
        assert response.status_code == 200
        body = response.json()["data"]
        names = [c["name"] for c in body["checks"]]
        assert names[:2] == ["nats.reachable", "nats.authorization"]
        assert {"services", "clocks", "postgres.migrations"} <= set(names)
        services = next(c for c in body["checks"] if c["name"] == "services")
        assert services["status"] == "ok"
        # The shared test NATS has no authorization: the door reports the failure.
        assert body["ok"] is False
    async with system.http(token=USER) as http:
        assert (await http.get("/api/doctor")).status_code == 403
    async with system.http(token=None) as http:
        assert (await http.get("/api/doctor")).status_code == 401


async def test_the_command_prints_each_check_and_exits_non_zero_on_a_failure(system: System) -> None:
    env = {
        **os.environ,
        "LAYBY_NATS_URL": system.settings.nats_url or "",
        "LAYBY_DATABASE_URL": system.settings.database_url or "",
        "LAYBY_NAMESPACE": system.settings.namespace,
        "LAYBY_DB_SCHEMA": system.settings.db_schema,
        "LAYBY_SECRETS_KEY": system.settings.secrets_key or "",
    }

    async def doctor(*args: str) -> tuple[int, str]:
        # Not subprocess.run: the services answering its ping run in this test's event loop.
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("layby")),
            "doctor",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode is not None, err
        return proc.returncode, out.decode()

    code, plain = await doctor()
    assert code == 1, plain
    assert "FAIL  nats.authorization" in plain
    assert "fix: give NATS an authorization block" in plain
    code, as_json = await doctor("--json")
    assert code == 1
    report = msgspec.json.decode(as_json.encode(), type=DoctorReport)
    assert check(report, "services").status == "ok"


async def test_a_healthy_answer_reaches_the_doctor_on_a_second_look(system: System) -> None:
    # The door's report and the command's agree on what they both can see.
    async with system.http() as http:

        async def door_report() -> dict[str, Any]:
            body: dict[str, Any] = (await http.get("/api/doctor")).json()["data"]
            return body

        from_door = await eventually(door_report, "the doctor door", until=lambda b: bool(b["checks"]))
    from_cli = await run_doctor(system.settings)
    door_status = {c["name"]: c["status"] for c in from_door["checks"]}
    for name in (
        "nats.reachable",
        "postgres.reachable",
        "postgres.migrations",
        "services",
        "secrets.sealing",
    ):
        assert door_status[name] == check(from_cli, name).status == "ok"
