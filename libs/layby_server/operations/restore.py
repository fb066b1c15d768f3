"""The restore half of ``layby restore`` (docs/operations.md#backup-and-restore,
docs/decisions/0025-backup-and-restore.md): replace the namespace's streams with a verified
backup's (``layby_server.operations.backup.load_backup``), then make PostgreSQL agree with the restored log.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.js.api import RawStreamMsg

from layby_contracts.commands import CONTINUATION_DECODER
from layby_contracts.events import RunParked
from layby_contracts.subjects import Names
from layby_domain.tickets import ASYNC_MARGIN_SECONDS
from layby_server.operations.backup import (
    BackupError,
    Manifest,
    Progress,
    backed_up_streams,
    messages_text,
    stream_bounds,
)
from layby_server.projection.db import open_pool
from layby_server.projection.projector import rebuild
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_server.store.snapshots import SnapshotError, restore_stream

__all__ = [
    "check_target",
    "prune_orphan_continuations",
    "rederive_reservations",
    "restore_namespace",
    "restore_streams",
    "snapshot_time",
]


async def _existing(nc: NATS, streams: list[str]) -> dict[str, int]:
    """The streams among ``streams`` that exist, with their message counts."""
    js = nc.jetstream()
    found: dict[str, int] = {}
    for stream in streams:
        try:
            info = await js.stream_info(stream)
        except nats.js.errors.NotFoundError:
            continue
        found[stream] = int(info.state.messages or 0) or int(info.state.last_seq or 0)
    return found


async def restore_namespace(
    nc: NATS,
    settings: Settings,
    db_url: str,
    manifest: Manifest,
    directory: Path,
    *,
    force: bool,
    progress: Progress,
) -> None:
    """Restore a verified backup (``load_backup``) into the settings' namespace and schema.

    In order: refuse a namespace with messages (unless ``force``); migrate the schema (refuses one
    a newer release migrated); replace the streams; drop continuations the restored log does not
    record; rebuild the projections from the log; hold the open questions' slots again."""
    existing = await check_target(nc, settings.names, force=force)
    pool = await open_pool(db_url, settings.db_schema)
    try:
        await restore_streams(nc, manifest, directory, existing, progress)
        store = EventStore(nc, settings.names)
        await store.detect_replicas()
        since = snapshot_time(manifest, settings.names.events_stream)
        await prune_orphan_continuations(store, progress, since=since)
        retention = settings.waiting_outcome_retention_seconds
        count = await rebuild(pool, store, waiting_retention=retention)
        progress(f"projections in schema {settings.db_schema} rebuilt from {count} events")
        user, caller = await rederive_reservations(pool, waiting_retention=retention)
        progress(f"concurrency slots held again: {user} questions, {caller} caller asks")
    finally:
        await pool.close()


async def check_target(nc: NATS, names: Names, *, force: bool) -> dict[str, int]:
    """The namespace's streams that exist, with their message counts. Refuses when one holds
    messages, unless ``force`` (nothing is deleted here)."""
    existing = await _existing(nc, backed_up_streams(names))
    busy = sorted(s for s, count in existing.items() if count)
    if busy and not force:
        raise BackupError(
            f"namespace {names.namespace!r} is not empty ({', '.join(busy)} hold messages): "
            "restore refuses to overwrite it; stop the services and run it again with --force "
            "to replace those streams"
        )
    return existing


async def restore_streams(
    nc: NATS, manifest: Manifest, directory: Path, existing: dict[str, int], progress: Progress
) -> None:
    """Delete the ``existing`` streams (``check_target``: empty ones, or any with ``--force``), then
    restore every stream of the backup in its order. A stream that fails stops the restore,
    naming it."""
    js = nc.jetstream()
    for stream, count in existing.items():
        await js.delete_stream(stream)
        progress(f"{stream}: deleted ({messages_text(count) if count else 'empty'})")
    for entry in manifest.streams:
        progress(f"{entry.name}: restoring {entry.size} bytes")
        try:
            with (directory / entry.file).open("rb") as data:
                state = await restore_stream(nc, entry.name, entry.config, entry.state, data)
        except (SnapshotError, nats.errors.Error, OSError) as exc:
            raise BackupError(
                f"{entry.name}: {exc}; the restore stopped here (the streams before it are restored, "
                "the others are not): fix the cause and run `layby restore --force` again"
            ) from None
        want, got = stream_bounds(entry.state), stream_bounds(state)
        if got != want:
            raise BackupError(
                f"{entry.name}: restored with (first, last, messages) = {got}, the backup says {want}; "
                "the restore stopped here: run `layby restore --force` again"
            )
        progress(f"{entry.name}: restored, {messages_text(got[2])}, last sequence {got[1]}")


async def prune_orphan_continuations(
    store: EventStore, progress: Progress, *, since: datetime | None = None
) -> int:
    """Delete each restored continuation whose resume the restored log does not hold.

    The continuations stream is snapshotted after the log, so it may hold a continuation
    published after the log's snapshot: its ``run.resumed`` is not in the restored log. Left in
    place, a worker would find the run still parked and drop it, and the resume service's
    redelivered trigger would record the resume again but find the continuation's subject taken.
    Deleted, the redelivered trigger publishes it again, once. Only continuations stored from
    ``since`` on are read (the log's snapshot time: anything older was published after its
    resume was in the log); None reads them all. Returns how many were deleted."""
    names = store.names
    first, last = await store.bounds(names.continuations_stream)
    if last == 0:
        return 0
    seq = await _first_at(store, first, last, since) if since is not None else first
    deleted = 0
    while seq <= last:
        raw = await _next_continuation(store, seq)
        if raw is None or raw.seq is None or raw.seq > last:
            break
        seq = int(raw.seq) + 1
        try:
            cont = CONTINUATION_DECODER.decode(raw.data or b"{}")
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue  # not a continuation: the worker that meets it terminates it
        known = await store.last(names.run(cont.run_id), leader=True)
        event = known.event if known is not None else None
        waiting = isinstance(event, RunParked) and cont.generation > 0 and event.generation <= cont.generation
        if event is None or waiting:
            await store.js.delete_msg(names.continuations_stream, int(raw.seq))
            deleted += 1
            progress(
                f"{names.continuations_stream}: dropped the continuation of run {cont.run_id} "
                f"generation {cont.generation}: the restored log does not record it"
            )
    return deleted


async def _next_continuation(store: EventStore, seq: int) -> RawStreamMsg | None:
    """The first continuation at or after ``seq`` (deleted messages leave gaps), or None."""
    try:
        return await store.js.get_msg(store.names.continuations_stream, seq=seq, next=True)
    except nats.js.errors.NotFoundError:
        return None


async def _first_at(store: EventStore, first: int, last: int, since: datetime) -> int:
    """The sequence of the first continuation stored at or after ``since`` (a binary search over
    the stream's sequences, whose times only grow); ``last + 1`` when there is none."""
    low, high = first, last + 1
    while low < high:
        mid = (low + high) // 2
        raw = await _next_continuation(store, mid)
        if raw is None or raw.seq is None or raw.seq > last:
            high = mid
        elif raw.time is not None and raw.time < since:
            low = int(raw.seq) + 1
        else:
            high = mid
    return low


def snapshot_time(manifest: Manifest, stream: str) -> datetime | None:
    """When ``stream``'s snapshot was taken, at the earliest: its last message's time, less a
    minute for the clocks of a cluster's servers; None when it held no message."""
    for entry in manifest.streams:
        if entry.name == stream and entry.state.get("messages"):
            return datetime.fromisoformat(str(entry.state["last_ts"])) - timedelta(minutes=1)
    return None


_USER_SLOTS = """
INSERT INTO admissions (interaction_id, deadline)
SELECT interaction_id, timeout_at FROM interactions
WHERE status = 'pending' AND timeout_at IS NOT NULL
ON CONFLICT (interaction_id) DO UPDATE SET deadline = GREATEST(admissions.deadline, EXCLUDED.deadline)
"""

_CALLER_SLOTS = """
INSERT INTO caller_admissions (interaction_id, deadline)
SELECT interaction_id, CASE
        WHEN status = 'asking' THEN expiry_at + make_interval(secs => $1)
        ELSE coalesce(settled_at, expiry_at) + make_interval(secs => $2)
    END
FROM parked_entries
WHERE status IN ('asking', 'running', 'finished', 'failed') AND expiry_at IS NOT NULL
ON CONFLICT (interaction_id) DO UPDATE
    SET deadline = GREATEST(caller_admissions.deadline, EXCLUDED.deadline)
"""


async def rederive_reservations(pool: asyncpg.Pool, *, waiting_retention: float) -> tuple[int, int]:
    """Hold a concurrency slot again for every question still open in the rebuilt projections.

    The slot tables are the ask service's reservations, not projections: a restored database
    starts without them, and every question the log says is open must count against the caps
    again (docs/asking.md#concurrency-cap). A to-user question holds its slot until its deadline;
    a caller ask until its deadline and margin, and a settled one for the waiting-outcome
    retention (the projector's own rule). Returns (to-user, caller) slots held."""
    async with pool.acquire() as conn, conn.transaction():
        user = await conn.execute(_USER_SLOTS)
        caller = await conn.execute(_CALLER_SLOTS, float(ASYNC_MARGIN_SECONDS), waiting_retention)
    return int(user.rsplit(" ", 1)[-1]), int(caller.rsplit(" ", 1)[-1])
