"""``layby backup`` and ``layby restore`` (docs/operations.md#backup-and-restore): back up, wipe,
restore, and the system goes on where it was. Real NATS and PostgreSQL; the five services
in-process; the two commands as the operator runs them, in their own processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import nats
import pytest
from nats.js.api import StreamConfig

import layby
from layby.connection import connect_nats
from layby_contracts.commands import Continuation
from layby_contracts.events import EVENT_SCHEMA, RunParked, RunResumed, RunStarted
from layby_domain.clock import ManualClock
from layby_server.operations.backup import MANIFEST, backed_up_streams
from layby_server.operations.restore import prune_orphan_continuations
from layby_server.projection.db import migrations
from layby_server.projection.projector import read_range
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_server.store.snapshots import restore_stream, snapshot_stream
from tests.conftest import System, start_system, stop_system
from tests.helpers import SSE, eventually, serving, wait_total

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@contextlib.asynccontextmanager
async def stream_from(system: System, last_event_id: str | None = None) -> AsyncIterator[SSE]:
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    async with (
        system.http() as http,
        http.stream("GET", "/api/interactions/stream", headers=headers, timeout=None) as resp,
    ):
        assert resp.status_code == 200
        reader = SSE(resp)
        try:
            yield reader
        finally:
            await reader.close()


async def layby_cli(settings: Settings, *args: str, seed: str | None = None) -> tuple[int, str]:
    """Run ``layby <args>`` in its own process with the settings' URLs, namespace and schema
    (and ``seed`` as its NATS key)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYBY_")}
    if seed is not None:
        env["LAYBY_NATS_SEED"] = seed
    env.update(
        LAYBY_NATS_URL=str(settings.nats_url),
        LAYBY_DATABASE_URL=str(settings.database_url),
        LAYBY_NAMESPACE=settings.namespace,
        LAYBY_DB_SCHEMA=settings.db_schema,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "layby.cli", *args, env=env, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 90)
    return int(proc.returncode or 0), err.decode()


async def stream_states(store: EventStore) -> dict[str, tuple[int, int, int]]:
    """(first, last, messages) of every stream of the namespace that exists (an empty stream's
    first sequence counts as 0: the server sets it as it likes)."""
    states = {}
    for name in backed_up_streams(store.names):
        with contextlib.suppress(nats.js.errors.NotFoundError):
            s = (await store.js.stream_info(name)).state
            states[name] = (s.first_seq if s.messages else 0, s.last_seq, s.messages)
    return states


async def durables(store: EventStore) -> set[str]:
    """The durable consumers of the event log (ephemeral ones come and go by themselves)."""
    names = await store.js.consumers_info(store.names.events_stream)
    return {c.name for c in names if c.config.durable_name}


async def wipe(store: EventStore, db: asyncpg.Pool, schema: str) -> None:
    """What a lost server leaves: no stream of the namespace, no schema."""
    for name in backed_up_streams(store.names):
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await store.js.delete_stream(name)
    async with db.acquire() as conn:
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def run_status(db: asyncpg.Pool, run_id: str, *statuses: str) -> asyncpg.Record:
    return await eventually(
        lambda: db.fetchrow("SELECT * FROM runs WHERE run_id = $1", run_id),
        f"run {run_id} to be {' or '.join(statuses)}",
        until=lambda row: row is not None and row["status"] in statuses,
        timeout=20,
    )


async def test_a_restored_backup_brings_back_every_pending_question_and_parked_run_and_they_resume_once(
    settings: Settings, store: EventStore, db: asyncpg.Pool, tmp_path: Path
) -> None:
    """Backed up, wiped and restored, the inbox lists the same questions under the same ids, a
    parked run resumes exactly once on its answer, a deadline still expires its park, and every
    stream keeps its sequences, so an SSE id from before the backup still resumes
    (docs/operations.md#backup-and-restore)."""
    clock = ManualClock(datetime.now(UTC))
    after: list[str] = []

    def register(w: layby.Worker) -> None:
        @w.flow("approve")
        async def approve(n: int) -> Any:
            ok = await layby.ask_user(
                f"Approve {n}?",
                answer_format="confirm",
                mode="async",
                expiry_at=clock.now() + timedelta(hours=2),
            )
            after.append(f"approve {n}")
            return {"approved": ok}

        @w.flow("expiring")
        async def expiring(_: Any) -> Any:
            return await layby.ask_user(
                "Still there?", mode="async", expiry_at=clock.now() + timedelta(minutes=5)
            )

    # Before: two parked runs (two pending questions in the inbox) and one finished run.
    system = await start_system(settings, clock)
    try:
        worker = layby.Worker(await system.sdk(), settings=settings)
        register(worker)
        async with serving(worker), stream_from(system) as live:
            parked = await worker.start("approve", 1)
            first_add = await live.next()
            done = await worker.start("approve", 2)
            second_add = await live.next()
            expiring = await worker.start("expiring")
            third_add = await live.next()
            assert (first_add.event, second_add.event, third_add.event) == ("interaction.add",) * 3
            async with system.http() as http:
                answered = await http.post(
                    f"/api/interactions/{second_add.data['interaction_id']}/answer", json={"answer": True}
                )
            assert answered.status_code == 200
            await run_status(db, done, "finished")
            await run_status(db, parked, "parked")
            await run_status(db, expiring, "parked")
        listed = (await wait_total(system, 2))["items"]
        pending_ids = {item["interaction_id"] for item in listed}
        assert pending_ids == {first_add.data["interaction_id"], third_add.data["interaction_id"]}
        code, err = await layby_cli(settings, "backup", str(tmp_path / "bk"))
        assert code == 0, err
        before = await stream_states(store)
        consumers = await durables(store)
    finally:
        await stop_system(system)
    assert f"backup of namespace {settings.namespace} written to {tmp_path / 'bk'}" in err
    manifest = json.loads((tmp_path / "bk" / MANIFEST).read_text())
    assert (manifest["event_schema"], manifest["migration_version"], manifest["namespace"]) == (
        EVENT_SCHEMA,
        migrations()[-1].version,
        settings.namespace,
    )
    assert [s["name"] for s in manifest["streams"]] == backed_up_streams(store.names)
    assert {s["name"]: s["state"]["last_seq"] for s in manifest["streams"]} == {
        name: state[1] for name, state in before.items()
    }
    await wipe(store, db, settings.db_schema)
    assert await stream_states(store) == {}

    code, err = await layby_cli(settings, "restore", str(tmp_path / "bk"))
    assert code == 0, err
    assert f"restore of namespace {settings.namespace} complete: start the services" in err
    assert await stream_states(store) == before
    assert await durables(store) == consumers
    assert await db.fetchval("SELECT count(*) FROM admissions") == 2  # open questions hold their slots

    system = await start_system(settings, clock)
    try:
        listed = (await wait_total(system, 2))["items"]
        assert {item["interaction_id"] for item in listed} == pending_ids
        async with system.http() as http:
            run = (await http.get(f"/api/runs/{parked}")).json()["data"]
        assert run["status"] == "parked"

        # The SSE id of the first question, taken before the backup, resumes after it: the next
        # frame is the second question's, under the id it had then.
        async with stream_from(system, first_add.id) as resumed:
            missed = await resumed.next()
        assert (missed.id, missed.event, missed.data) == (second_add.id, second_add.event, second_add.data)

        worker = layby.Worker(await system.sdk(), settings=settings)
        register(worker)
        async with serving(worker):
            async with system.http() as http:
                r = await http.post(
                    f"/api/interactions/{first_add.data['interaction_id']}/answer", json={"answer": True}
                )
            assert r.status_code == 200
            row = await run_status(db, parked, "finished")
            assert json.loads(row["result"]) == {"approved": True}
            clock.advance(10 * 60)
            row = await run_status(db, expiring, "finished")
            assert json.loads(row["result"]) == {"layby:interaction_expired": True}
        assert after.count("approve 1") == 1
        first, last = await store.bounds()
        resumes = [
            s.event
            for s in await read_range(store, first, last)
            if isinstance(s.event, RunResumed) and s.event.run_id == parked
        ]
        assert len(resumes) == 1
    finally:
        await stop_system(system)


async def test_a_damaged_backup_file_is_refused_before_anything_is_touched(
    settings: Settings, store: EventStore, tmp_path: Path
) -> None:
    """Every file's checksum is verified before the restore deletes or creates anything
    (docs/operations.md#backup-and-restore)."""
    code, err = await layby_cli(settings, "backup", str(tmp_path))
    assert code == 0, err
    for name in backed_up_streams(store.names):
        await store.js.delete_stream(name)
    damaged = tmp_path / f"{store.names.events_stream}.snapshot"
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))

    code, err = await layby_cli(settings, "restore", "--force", str(tmp_path))

    assert code == 1
    assert err.strip() == (
        f"error: {damaged} does not match its checksum in {MANIFEST}: the backup of "
        f"{store.names.events_stream} is damaged; nothing was restored"
    )
    assert await stream_states(store) == {}


async def test_a_restore_into_a_namespace_with_messages_is_refused_without_force(
    settings: Settings, store: EventStore, tmp_path: Path
) -> None:
    """A restore never replaces streams that hold messages unless told to with ``--force``, and
    a refused or interrupted restore can be run again with it (docs/operations.md#backup-and-restore)."""
    code, err = await layby_cli(settings, "backup", str(tmp_path))
    assert code == 0, err
    before = await stream_states(store)

    code, err = await layby_cli(settings, "restore", str(tmp_path))

    assert code == 1
    assert err.splitlines()[-1] == (
        f"error: namespace {settings.namespace!r} is not empty ({store.names.meta_stream} hold "
        "messages): restore refuses to overwrite it; stop the services and run it again with "
        "--force to replace those streams"
    )
    assert await stream_states(store) == before
    code, err = await layby_cli(settings, "restore", "--force", str(tmp_path))
    assert code == 0, err
    assert f"{store.names.meta_stream}: deleted (1 message)" in err
    assert await stream_states(store) == before


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (
            "event_schema",
            "the backup was written with event schema {newer}, newer than this build's {ours}: "
            "restore it with a Layby release at least as new (0.1.0)",
        ),
        (
            "migration_version",
            "the backup was taken at database migration {newer}, newer than this build's {ours}: "
            "restore it with a Layby release at least as new (0.1.0)",
        ),
    ],
)
async def test_a_backup_from_a_newer_release_is_refused(
    settings: Settings, store: EventStore, tmp_path: Path, field: str, message: str
) -> None:
    """A backup whose event schema or database migration is newer than this build's is refused
    with the release to use, before anything is touched (docs/operations.md#backup-and-restore)."""
    code, err = await layby_cli(settings, "backup", str(tmp_path))
    assert code == 0, err
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    ours = EVENT_SCHEMA if field == "event_schema" else migrations()[-1].version
    manifest[field] = ours + 1
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    for name in backed_up_streams(store.names):
        await store.js.delete_stream(name)

    code, err = await layby_cli(settings, "restore", str(tmp_path))

    assert code == 1
    assert err.strip() == "error: " + message.format(newer=ours + 1, ours=ours)
    assert await stream_states(store) == {}


def _machine_nats_reachable() -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", 4222), timeout=1):
        return True
    return False


@pytest.fixture(params=["pinned", "machine"])
async def any_nats(request: pytest.FixtureRequest, settings: Settings) -> AsyncIterator[Any]:
    """The pinned server the tests use, and the machine's own NATS (2.9 on the CI machine) when
    one listens on 127.0.0.1:4222."""
    if request.param == "machine":
        if not _machine_nats_reachable():
            pytest.skip("no NATS listens on 127.0.0.1:4222")
        url = "nats://127.0.0.1:4222"
    else:
        url = str(settings.nats_url)
    nc = await connect_nats(url, name="test-snapshots")
    yield nc
    await nc.close()


async def test_a_snapshot_restores_a_stream_with_its_sequences_gaps_and_consumers(
    any_nats: Any, settings: Settings, tmp_path: Path
) -> None:
    """The snapshot protocol keeps every message's stream sequence, the gaps deleted messages
    left, and a durable consumer's position, on every NATS Layby runs on
    (docs/decisions/0025-backup-and-restore.md)."""
    nc = any_nats
    js = nc.jetstream()
    name = f"{settings.namespace.upper()}_SNAP"
    await js.add_stream(StreamConfig(name=name, subjects=[f"{settings.namespace}.snap.>"]))
    try:
        for i in range(40):
            await js.publish(f"{settings.namespace}.snap.{i % 4}", f"m{i}".encode() * 500)
        await js.delete_msg(name, 7)
        await js.purge_stream(name, seq=3)  # messages 1 and 2 go: the stream starts at 3
        sub = await js.pull_subscribe(f"{settings.namespace}.snap.>", durable="reader", stream=name)
        for msg in await sub.fetch(5):
            await msg.ack()
        await sub.unsubscribe()
        info = await js.stream_info(name)
        reader = await js.consumer_info(name, "reader")
        with (tmp_path / "snap").open("wb") as out:
            config, state = await snapshot_stream(nc, name, out, chunk_size=4096)
        await js.delete_stream(name)

        with (tmp_path / "snap").open("rb") as data:
            restored = await restore_stream(nc, name, config, state, data)

        again = await js.stream_info(name)
        assert (restored["first_seq"], restored["last_seq"], restored["messages"]) == (3, 40, 37)
        assert (again.state.first_seq, again.state.last_seq, again.state.messages) == (
            info.state.first_seq,
            info.state.last_seq,
            info.state.messages,
        )
        assert (await js.get_msg(name, 8)).data == b"m7" * 500
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.get_msg(name, 7)
        floor = (await js.consumer_info(name, "reader")).ack_floor
        assert (floor.consumer_seq, floor.stream_seq) == (
            reader.ack_floor.consumer_seq,
            reader.ack_floor.stream_seq,
        )
        assert floor.stream_seq == 8  # five messages acknowledged, 7 skipped
    finally:
        with contextlib.suppress(Exception):
            await js.delete_stream(name)


async def test_a_restored_continuation_whose_resume_the_restored_log_lacks_is_dropped(
    store: EventStore,
) -> None:
    """The continuations stream is snapshotted after the log, so it may hold a continuation of a
    resume the restored log does not record: the restore drops it and keeps every other one; it
    reads only the continuations stored since the log's snapshot (docs/operations.md#backup-and-restore)."""
    names = store.names
    now = datetime.now(UTC)
    started = RunStarted(run_id="r1", flow="f", identity="ops", started_at=now)
    await store.append(names.run("r1"), started, msg_id="s-r1", expected_seq=0)
    parked = RunParked(run_id="r1", generation=1, asks=[], parked_at=now)
    await store.append(names.run("r1"), parked, msg_id="p-r1", expected_seq=None)
    older = Continuation(run_id="r0", flow="f", generation=0, resume_id="r0-0", identity="ops")
    subject = names.continuation("f", "r0", 0)
    assert await store.publish_once(subject, msgspec.json.encode(older), msg_id=older.resume_id)
    stored = await store.js.get_msg(names.continuations_stream, seq=1)
    assert stored.time is not None
    since = stored.time + timedelta(microseconds=1)
    for run_id, generation in (("r1", 0), ("r1", 1), ("r2", 0)):
        cont = Continuation(
            run_id=run_id, flow="f", generation=generation, resume_id=f"{run_id}-{generation}", identity="ops"
        )
        assert await store.publish_once(
            names.continuation("f", run_id, generation), msgspec.json.encode(cont), msg_id=cont.resume_id
        )
    lines: list[str] = []

    dropped = await prune_orphan_continuations(store, lines.append, since=since)

    assert dropped == 2
    for run_id, seq in (("r0", 1), ("r1", 2)):  # r0's is older than the log's snapshot: not read
        kept = await store.js.get_last_msg(names.continuations_stream, names.continuation("f", run_id, 0))
        assert kept.seq == seq
    for run_id, generation in (("r1", 1), ("r2", 0)):
        with pytest.raises(nats.js.errors.NotFoundError):
            await store.js.get_last_msg(
                names.continuations_stream, names.continuation("f", run_id, generation)
            )
    assert lines == [
        f"{names.continuations_stream}: dropped the continuation of run r1 generation 1: the restored log does not record it",
        f"{names.continuations_stream}: dropped the continuation of run r2 generation 0: the restored log does not record it",
    ]


async def test_a_stream_that_fails_to_restore_stops_the_restore_naming_it_and_force_runs_it_again(
    settings: Settings, store: EventStore, tmp_path: Path
) -> None:
    """A stream the server refuses stops the restore with its name, the streams after it are not
    restored, and ``--force`` runs the whole restore again (docs/operations.md#backup-and-restore)."""
    started = RunStarted(run_id="r1", flow="f", identity="ops", started_at=datetime.now(UTC))
    await store.append(store.names.run("r1"), started, msg_id="s-r1", expected_seq=0)
    code, err = await layby_cli(settings, "backup", str(tmp_path))
    assert code == 0, err
    for name in backed_up_streams(store.names):
        await store.js.delete_stream(name)
    original = (tmp_path / MANIFEST).read_text()
    manifest = json.loads(original)
    tickets = next(s for s in manifest["streams"] if s["name"] == store.names.tickets_stream)
    tickets["config"]["subjects"] = [store.names.events_all]  # the log's subjects: the server refuses
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))

    code, err = await layby_cli(settings, "restore", str(tmp_path))

    assert code == 1
    last = err.splitlines()[-1]
    assert last.startswith(
        f"error: {store.names.tickets_stream}: the restore of {store.names.tickets_stream} refused by the server: "
    )
    assert last.endswith(
        "; the restore stopped here (the streams before it are restored, the others are not): fix "
        "the cause and run `layby restore --force` again"
    )
    restored = await stream_states(store)
    assert store.names.events_stream in restored
    assert store.names.tickets_stream not in restored
    assert store.names.meta_stream not in restored

    (tmp_path / MANIFEST).write_text(original)
    code, err = await layby_cli(settings, "restore", str(tmp_path))
    assert code == 1, err  # the log, restored before the failure, holds a message
    code, err = await layby_cli(settings, "restore", "--force", str(tmp_path))
    assert code == 0, err
    assert set(await stream_states(store)) == set(backed_up_streams(store.names))
    assert (await store.last(store.names.run("r1"))) is not None


async def test_a_backup_covers_every_stream_layby_provisions(store: EventStore) -> None:
    """Every stream a start provisions for the namespace is in a backup, so a new stream cannot
    be left out of backups unnoticed (docs/operations.md#backup-and-restore)."""
    prefix = f"{store.names.namespace.upper()}_"
    provisioned: set[str] = set()
    offset = 0
    while True:  # the server lists a page at a time, and a shared server holds many namespaces
        page = await store.js.streams_info_iterator(offset=offset)
        names = [info.config.name for info in page]
        provisioned |= {name for name in names if name and name.startswith(prefix)}
        offset += len(names)
        if not names or offset >= page.total:
            break
    assert provisioned == set(backed_up_streams(store.names))
