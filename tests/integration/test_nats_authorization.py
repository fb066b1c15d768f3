"""NATS authorization (docs/security.md#nats-authorization): the bus admits only Layby's keys, a
``user`` token reads nothing of another identity's and publishes nothing but commands, and the
whole system works under those rules."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import nats.errors
import pytest
from nats.aio.client import Client as NATS

import layby
from layby.connection import connect_nats
from layby.natskeys import client_inbox, client_seed, key_id, service_inbox
from layby.sdk import Client
from layby_contracts.commands import Ask
from layby_contracts.errors import Unavailable
from layby_server.operations.embedded import EmbeddedNats, free_port
from layby_server.operations.natsauth import authorization_for
from layby_server.projection.db import create_pool
from layby_server.settings import load_settings
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, BOB, OPERATOR, SECRETS_KEY, TOKENS, System, start_system, stop_system
from tests.helpers import eventually
from tests.integration.test_parks import Workers, answer, open_asks, wait_status

pytestmark = pytest.mark.timeout(120)


class Secured(msgspec.Struct):
    system: System
    server: EmbeddedNats
    seeds: dict[str, str]
    db: Any


@pytest.fixture
async def secured(pg_url: str) -> AsyncIterator[Secured]:
    ns = "a" + uuid.uuid4().hex[:10]
    with tempfile.TemporaryDirectory(prefix="layby-auth-") as tmp:
        settings = load_settings(
            {},
            namespace=ns,
            db_schema=ns,
            database_url=pg_url,
            api_tokens=TOKENS,
            http_port=free_port(),
            sweep_interval_seconds=0.1,
            secrets_key=SECRETS_KEY,
        )
        text, seeds = authorization_for(settings.names, Path(tmp) / "keys", TOKENS)
        server = EmbeddedNats(Path(tmp) / "nats", authorization=text).start()
        settings = msgspec.structs.replace(settings, nats_url=server.url)
        pool = await create_pool(pg_url, ns)
        system = await start_system(settings, seeds=seeds)
        try:
            yield Secured(system, server, seeds, pool)
            await stop_system(system)
            # No Layby process ever did what NATS forbids: every service's work fits its rules.
            log = (Path(tmp) / "nats" / "nats.log").read_text(encoding="utf-8", errors="replace")
            refused = [ln for ln in log.splitlines() if "Violation" in ln and ":layby-" in ln]
            assert refused == [], refused
        finally:
            await stop_system(system)
            async with pool.acquire() as conn:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{ns}" CASCADE')
            await pool.close()
            server.stop()


class Violations:
    """Collects the permission errors NATS reports to a connection."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_error(self, exc: Exception) -> None:
        self.seen.append(str(exc))

    async def at_least(self, count: int) -> None:
        """Wait until NATS has reported ``count`` permission violations."""
        await eventually(
            lambda: [v for v in self.seen if "permissions violation" in v.lower()],
            f"{count} permission violations",
            until=lambda found: len(found) >= count,
        )


async def as_token(url: str, token: str, violations: Violations) -> NATS:
    nc = NATS()
    await nc.connect(
        url,
        nkeys_seed_str=client_seed(token),
        inbox_prefix=client_inbox(token),
        error_cb=violations.on_error,
        allow_reconnect=False,
    )
    return nc


async def test_a_connection_without_a_key_is_refused(secured: Secured) -> None:
    with pytest.raises(Unavailable, match=r"Authorization Violation|authorization"):
        await connect_nats(secured.server.url, name="anonymous", first_connect_timeout=5)


async def test_an_unknown_key_is_refused(secured: Secured) -> None:
    with pytest.raises(Unavailable, match=r"(?i)authorization"):
        await connect_nats(
            secured.server.url,
            name="stranger",
            first_connect_timeout=5,
            seed=client_seed("not-a-layby-token-0123456789"),
        )


async def test_a_user_token_reads_nothing_of_another_identity(secured: Secured) -> None:
    """Alice listens everywhere while Bob asks a sensitive question and gets its answer: NATS
    refuses every one of her subscriptions and she sees none of his traffic (not his bearer
    token in the ask command, not the answer on his wake)."""
    system = secured.system
    names = system.settings.names
    violations = Violations()
    alice = await as_token(secured.server.url, ALICE, violations)
    got: list[bytes] = []

    async def record(msg: Any) -> None:
        got.append(msg.data)

    for subject in (
        ">",
        f"{names.namespace}.>",
        names.cmd_ask,
        f"{names.namespace}.wake.>",
        f"{names.namespace}.wake.{key_id(BOB)}.>",
        "_INBOX.>",
        f"_INBOX.{key_id(BOB)}.>",
        f"{names.namespace}.ev.>",
        f"{names.namespace}.secret.>",
        "$JS.>",
    ):
        await alice.subscribe(subject, cb=record)
    await alice.flush()

    bob = await system.sdk(BOB)
    asking = asyncio.create_task(bob.ask_user("Bob's PIN?", sensitive=True, timeout=30))
    interaction_id = await wait_pending(secured.db, system)
    assert await answer(system, interaction_id, "4711") == 200
    value = await asking
    assert value.reveal() == "4711"

    # A round trip on Alice's connection: whatever NATS routed to her before it (Bob's traffic,
    # which has all happened) has reached her by the time it returns.
    await alice.flush()
    await violations.at_least(9)
    assert got == []
    assert len([v for v in violations.seen if "permissions violation" in v.lower()]) >= 9, violations.seen
    await alice.close()


async def test_a_user_token_publishes_only_commands(secured: Secured) -> None:
    system = secured.system
    names = system.settings.names
    violations = Violations()
    alice = await as_token(secured.server.url, ALICE, violations)
    fake = msgspec.json.encode({"type": "interaction.answered.v1"})
    await alice.publish(names.ix("forged"), fake)
    await alice.publish(names.continuation("f", "r", 0), fake)
    await alice.publish(names.wake("x", f"{key_id(BOB)}.waiter"), fake)
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await alice.request(f"$JS.API.STREAM.INFO.{names.events_stream}", b"", timeout=1)
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await alice.request(
            f"$JS.API.CONSUMER.MSG.NEXT.{names.continuations_stream}.{names.flow_durable('f')}",
            b'{"batch":1}',
            timeout=1,
        )
    await alice.flush()
    await violations.at_least(5)
    assert len([v for v in violations.seen if "permissions violation" in v.lower()]) >= 5, violations.seen

    # Commands are allowed, and a command names its sender by the token inside it, which only
    # the ask service can read.
    cmd = Ask(token=ALICE, interaction_id=str(uuid.uuid4()), question="Mine?", timeout=5)
    reply = await alice.request(names.cmd_ask, msgspec.json.encode(cmd), timeout=5)
    assert b'"type":"ok"' in reply.data
    # Nothing forged reached the log (read with the admin key).
    admin = await connect_nats(
        secured.server.url, name="admin", seed=secured.seeds["admin"], inbox_prefix=service_inbox("admin")
    )
    try:
        assert await EventStore(admin, names).last(names.ix("forged")) is None
    finally:
        await admin.close()
    await alice.close()


async def test_the_system_works_under_authorization(secured: Secured) -> None:
    """A sync ask, a park resumed by an operator worker, and the SDK's clients all on keys."""
    system = secured.system
    client: Client = await system.sdk(ALICE)
    asking = asyncio.create_task(client.ask_user("Ship it?", answer_format="confirm", timeout=30))
    interaction_id = await wait_pending(secured.db, system)
    assert await answer(system, interaction_id, True, token=ALICE) == 200
    assert await asking is True

    workers = Workers(system)

    def register(w: layby.Worker) -> None:
        @w.flow("secured")
        async def secured_flow(_: Any) -> Any:
            return await layby.ask_user("Approve?", mode="async", expiry_at=soon())

    worker = await workers.new(register)
    await workers.serve(worker)
    run_id = await client.start_run("secured")
    (asked,) = await open_asks(secured.db, run_id, 1)
    assert await answer(system, asked, "yes", token=ALICE) == 200
    try:
        await wait_status(secured.db, run_id, "finished")
    finally:
        await workers.stop_all()


def soon() -> Any:
    from datetime import UTC, datetime, timedelta

    return datetime.now(UTC) + timedelta(minutes=5)


async def wait_pending(db: asyncpg.Pool, system: System, timeout: float = 20) -> str:
    async with system.http(OPERATOR) as http:

        async def listed() -> list[dict[str, Any]]:
            return (await http.get("/api/interactions")).json()["data"]["items"]  # type: ignore[no-any-return]

        items = await eventually(listed, "a pending question", timeout=timeout)
    return str(items[0]["interaction_id"])


async def test_media_timeouts_and_late_answers_work_under_authorization(secured: Secured) -> None:
    """The door serves an inline image, the ask service prunes a timed-out ask, and every service
    reads only what its rules allow (the fixture checks NATS's log for refusals)."""
    from tests.integration.test_media import PNG, PNG_URI

    system = secured.system
    client = await system.sdk(ALICE)
    asking = asyncio.create_task(
        client.ask_user(
            "Look?", answer_format="confirm", media=[{"kind": "image", "url": PNG_URI}], timeout=30
        )
    )
    await wait_pending(secured.db, system)
    async with system.http(OPERATOR) as http:
        [item] = (await http.get("/api/interactions")).json()["data"]["items"]
    async with system.http(None) as anon:
        image = await anon.get(item["media"][0]["url"])
    assert image.status_code == 200 and image.content == PNG
    assert await answer(system, item["interaction_id"], True, token=ALICE) == 200
    assert await asking is True

    with pytest.raises(layby.InteractionTimeoutError):
        await client.ask_user("Anyone?", timeout=0.5)


async def test_the_admin_key_backs_up_and_restores_a_namespace_under_authorization(
    secured: Secured, tmp_path: Path
) -> None:
    """``layby backup`` and ``layby restore`` need nothing beyond the admin key's permissions,
    flow control of a snapshot in many chunks included (docs/operations.md#backup-and-restore);
    the fixture fails on any permission violation."""
    from layby_server.store.snapshots import snapshot_stream
    from tests.integration.test_backup_restore import layby_cli

    settings = secured.system.settings
    client = await secured.system.sdk()
    tasks = [
        asyncio.create_task(client.ask_user(f"Backed up {i}? " + "x" * 4000, timeout=60)) for i in range(3)
    ]
    async with secured.system.http() as http:
        await eventually(
            lambda: http.get("/api/interactions"),
            "the questions to be listed",
            until=lambda r: r.json()["data"]["total"] == 3,
        )
    admin = await connect_nats(
        secured.server.url,
        name="layby-admin",
        seed=secured.seeds["admin"],
        inbox_prefix=service_inbox("admin"),
    )
    try:
        with (tmp_path / "chunked").open("wb") as out:
            _, state = await snapshot_stream(admin, settings.names.events_stream, out, chunk_size=1024)
        assert state["messages"] == 3
    finally:
        await admin.close()
    code, err = await layby_cli(settings, "backup", str(tmp_path / "bk"), seed=secured.seeds["admin"])
    assert code == 0, err
    for task in tasks:
        task.cancel()
    await stop_system(secured.system)
    code, err = await layby_cli(
        settings, "restore", "--force", str(tmp_path / "bk"), seed=secured.seeds["admin"]
    )
    assert code == 0, err
    assert f"{settings.names.events_stream}: restored, 3 messages, last sequence 3" in err
