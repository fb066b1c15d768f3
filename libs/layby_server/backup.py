"""``layby backup`` and ``layby restore`` (docs/operations.md#backup-and-restore,
docs/decisions/0025-backup-and-restore.md).

A backup is a folder: one JetStream snapshot per stream of the namespace (sequences, gaps and
durable consumers kept) and ``manifest.json`` (versions, each stream's configuration, state and
SHA-256), written last, so a folder without a manifest is an unfinished backup. PostgreSQL is
not in it: every table that matters is a projection of the log or is derived from it again
(``rederive_reservations``), so a restore rebuilds the database from the restored streams and
the two can never disagree.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.js.api import RawStreamMsg

from layby import __version__
from layby.connection import NO_MESSAGE_FOUND
from layby_contracts.commands import CONTINUATION_DECODER
from layby_contracts.events import EVENT_SCHEMA, RunParked
from layby_contracts.subjects import Names
from layby_domain.tickets import ASYNC_MARGIN_SECONDS
from layby_server.db import migrations
from layby_server.eventstore import EventStore
from layby_server.snapshots import SnapshotError, restore_stream, snapshot_stream

__all__ = [
    "MANIFEST",
    "BackupError",
    "Manifest",
    "StreamEntry",
    "backed_up_streams",
    "check_target",
    "load_backup",
    "prune_orphan_continuations",
    "rederive_reservations",
    "restore_streams",
    "snapshot_time",
    "take_backup",
]

MANIFEST = "manifest.json"
FORMAT = 1
"""The layout of a backup folder; a restore refuses a format it does not know."""
Progress = Callable[[str], None]


class BackupError(Exception):
    """A backup or a restore that cannot go on; the message names the stream or file and why."""


class StreamEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One stream in a backup: its snapshot file and what the server said when it took it."""

    name: str
    file: str
    sha256: str
    size: int
    config: dict[str, Any]
    state: dict[str, Any]


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    format: int = FORMAT
    layby_version: str
    event_schema: int
    """The event-schema version the log records (docs/engineering.md#evolving-event-schemas)."""
    migration_version: int
    """The newest SQL migration of the release that took the backup."""
    namespace: str
    nats_server: str
    created_at: datetime
    streams: list[StreamEntry]


def backed_up_streams(names: Names) -> list[str]:
    """Every stream of a namespace, in the order a backup takes them: the event log first, then
    the streams whose messages the log refers to. Those are always written before the event that
    refers to them (a ticket, an image, a sealed answer, a step record), so each one's later
    snapshot holds everything the log's snapshot refers to (docs/operations.md#backup-and-restore)."""
    return [
        names.events_stream,
        *names.steps_streams,
        names.secrets_stream,
        names.tickets_stream,
        names.media_stream,
        names.chat_stream,
        names.messages_stream,
        names.continuations_stream,
        names.meta_stream,
    ]


def _newest_migration() -> int:
    return migrations()[-1].version


async def _recorded_event_schema(nc: NATS, names: Names) -> int:
    """The version the log records, or this build's when the log records none yet."""
    try:
        raw = await nc.jetstream().get_last_msg(names.meta_stream, names.event_schema)
    except nats.js.errors.NotFoundError:
        return EVENT_SCHEMA
    except nats.js.errors.APIError as exc:
        if exc.err_code == NO_MESSAGE_FOUND:
            return EVENT_SCHEMA
        raise
    return int(raw.data or b"0") or EVENT_SCHEMA


def _server_version(nc: NATS) -> str:
    version = nc.connected_server_version
    return f"{version.major}.{version.minor}.{version.patch}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _refuse_existing(directory: Path) -> None:
    if (directory / MANIFEST).exists():
        raise BackupError(f"{directory} already holds a backup ({MANIFEST}): choose an empty folder")


def _prepare(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)


async def take_backup(nc: NATS, names: Names, directory: Path, progress: Progress) -> Manifest:
    """Snapshot every stream of the namespace into ``directory``; the manifest is written last."""
    _refuse_existing(directory)
    js = nc.jetstream()
    try:
        await js.stream_info(names.events_stream)
    except nats.js.errors.NotFoundError:
        raise BackupError(
            f"the event log {names.events_stream} does not exist: nothing to back up in namespace "
            f"{names.namespace!r} (is LAYBY_NAMESPACE right?)"
        ) from None
    _prepare(directory)
    event_schema = await _recorded_event_schema(nc, names)
    entries: list[StreamEntry] = []
    for stream in backed_up_streams(names):
        try:
            await js.stream_info(stream)
        except nats.js.errors.NotFoundError:
            progress(f"{stream}: absent, skipped")
            continue
        path = directory / f"{stream}.snapshot"
        partial = path.with_suffix(".partial")
        try:
            with partial.open("wb") as out:
                config, state = await snapshot_stream(nc, stream, out)
                out.flush()
                os.fsync(out.fileno())
        except SnapshotError as exc:
            partial.unlink(missing_ok=True)
            raise BackupError(f"{stream}: {exc}") from None
        partial.replace(path)
        entry = StreamEntry(
            name=stream,
            file=path.name,
            sha256=_sha256(path),
            size=path.stat().st_size,
            config=config,
            state=state,
        )
        entries.append(entry)
        first, last, messages = _bounds(state)
        progress(f"{stream}: {_messages(messages)}, sequences {first}-{last}, {entry.size} bytes")
    manifest = Manifest(
        layby_version=__version__,
        event_schema=event_schema,
        migration_version=_newest_migration(),
        namespace=names.namespace,
        nats_server=_server_version(nc),
        created_at=datetime.now(UTC),
        streams=entries,
    )
    partial = directory / f"{MANIFEST}.partial"
    partial.write_bytes(msgspec.json.format(msgspec.json.encode(manifest)) + b"\n")
    partial.replace(directory / MANIFEST)
    return manifest


def load_backup(directory: Path, names: Names) -> Manifest:
    """The backup's manifest, once every file's checksum and every version check passed; nothing
    is touched before this returns."""
    path = directory / MANIFEST
    if not path.is_file():
        raise BackupError(f"{path} is missing: {directory} is not a finished backup")
    try:
        manifest = msgspec.json.decode(path.read_bytes(), type=Manifest)
    except msgspec.DecodeError as exc:
        raise BackupError(f"{path} cannot be read: {exc}") from None
    if manifest.format != FORMAT:
        raise BackupError(
            f"{path} has backup format {manifest.format}; this build reads format {FORMAT}: "
            "restore it with the Layby release that took it"
        )
    if manifest.event_schema > EVENT_SCHEMA:
        raise BackupError(
            f"the backup was written with event schema {manifest.event_schema}, newer than this "
            f"build's {EVENT_SCHEMA}: restore it with a Layby release at least as new "
            f"({manifest.layby_version})"
        )
    if manifest.migration_version > _newest_migration():
        raise BackupError(
            f"the backup was taken at database migration {manifest.migration_version}, newer than "
            f"this build's {_newest_migration()}: restore it with a Layby release at least as new "
            f"({manifest.layby_version})"
        )
    if manifest.namespace != names.namespace:
        raise BackupError(
            f"the backup holds namespace {manifest.namespace!r}, not {names.namespace!r}: a stream "
            "keeps its name and subjects, so set LAYBY_NAMESPACE to the backup's"
        )
    for entry in manifest.streams:
        file = directory / entry.file
        if not file.is_file():
            raise BackupError(f"{file} is missing: the backup is incomplete ({entry.name})")
        if file.stat().st_size != entry.size or _sha256(file) != entry.sha256:
            raise BackupError(
                f"{file} does not match its checksum in {MANIFEST}: the backup of {entry.name} is "
                "damaged; nothing was restored"
            )
    return manifest


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
        progress(f"{stream}: deleted ({_messages(count) if count else 'empty'})")
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
        want, got = _bounds(entry.state), _bounds(state)
        if got != want:
            raise BackupError(
                f"{entry.name}: restored with (first, last, messages) = {got}, the backup says {want}; "
                "the restore stopped here: run `layby restore --force` again"
            )
        progress(f"{entry.name}: restored, {_messages(got[2])}, last sequence {got[1]}")


def _bounds(state: dict[str, Any]) -> tuple[int, int, int]:
    """(first, last, messages) of a stream state; an empty stream's first sequence is whatever
    the server makes of it, so it counts as 0."""
    messages = int(state.get("messages", 0))
    return (int(state.get("first_seq", 0)) if messages else 0, int(state.get("last_seq", 0)), messages)


def _messages(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"


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
