"""``layby backup`` and ``layby restore`` (docs/operations.md#backup-and-restore,
docs/decisions/0025-backup-and-restore.md).

A backup is a folder: one JetStream snapshot per stream of the namespace (sequences, gaps and
durable consumers kept) and ``manifest.json`` (versions, each stream's configuration, state and
SHA-256), written last, so a folder without a manifest is an unfinished backup. PostgreSQL is
not in it: every table that matters is a projection of the log or is derived from it again, so a
restore (``layby_server.operations.restore``) rebuilds the database from the restored streams and the two
can never disagree.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS

from layby import __version__
from layby.connection import NO_MESSAGE_FOUND
from layby_contracts.events import EVENT_SCHEMA
from layby_contracts.subjects import Names
from layby_server.projection.db import migrations
from layby_server.store.snapshots import SnapshotError, snapshot_stream
from layby_server.store.streams import stream_names

__all__ = [
    "MANIFEST",
    "BackupError",
    "Manifest",
    "Progress",
    "StreamEntry",
    "backed_up_streams",
    "load_backup",
    "messages_text",
    "stream_bounds",
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
    the streams whose messages the log refers to (``layby_server.store.streams`` says why)."""
    return stream_names(names)


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
        first, last, messages = stream_bounds(state)
        progress(f"{stream}: {messages_text(messages)}, sequences {first}-{last}, {entry.size} bytes")
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


def stream_bounds(state: dict[str, Any]) -> tuple[int, int, int]:
    """(first, last, messages) of a stream state; an empty stream's first sequence is whatever
    the server makes of it, so it counts as 0."""
    messages = int(state.get("messages", 0))
    return (int(state.get("first_seq", 0)) if messages else 0, int(state.get("last_seq", 0)), messages)


def messages_text(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"
