"""The event-schema version recorded with the log, checked at every start
(docs/engineering.md#evolving-event-schemas).

Two records, because the servers Layby runs on differ: NATS 2.10 and later keep stream
``metadata``, so the event stream's configuration carries the version where an operator sees it
(``nats stream info``); NATS 2.9 accepts the same field and silently drops it. So the record the
check relies on is a message on ``<ns>.meta.event_schema`` in the small ``<NS>_META`` stream,
which every server keeps, written compare-and-set so an older build never lowers a newer one's
number. The metadata is written only when the connected server's version says it is kept, and
read (when present) as a second witness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import nats.js.errors
from nats.aio.client import Client as NATS

from layby.connection import NO_MESSAGE_FOUND, WRONG_LAST_SEQUENCE
from layby.settings import SettingsError
from layby_contracts.errors import Conflict
from layby_contracts.events import EVENT_SCHEMA
from layby_server.observability.logs import get_logger

if TYPE_CHECKING:
    from layby_server.store.eventstore import EventStore

log = get_logger("layby_server.store.eventschema")

METADATA_KEY = "layby_event_schema"
"""The event stream's metadata key holding the version (NATS 2.10 and later)."""
_ATTEMPTS = 5


def keeps_metadata(nc: NATS) -> bool:
    """Whether the connected server keeps stream metadata (2.10 and later; 2.9 drops it)."""
    try:
        version = nc.connected_server_version
        return (version.major, version.minor) >= (2, 10)
    except (ValueError, TypeError):
        return False  # an unparsable version: rely on the message record only


def stream_metadata(nc: NATS) -> dict[str, str] | None:
    """The metadata the event stream is provisioned with: the version, where it is kept."""
    return {METADATA_KEY: str(EVENT_SCHEMA)} if keeps_metadata(nc) else None


def refuse_newer(recorded: int, stream: str) -> None:
    if recorded > EVENT_SCHEMA:
        raise SettingsError(
            f"the event log {stream} was written with event schema {recorded}, newer than this "
            f"build's {EVENT_SCHEMA}: run a Layby release at least as new"
        )


async def check_before_provisioning(store: EventStore) -> None:
    """Refuse a log a newer build wrote, before this build's provisioning touches its streams."""
    names = store.names
    try:
        info = await store.js.stream_info(names.events_stream)
    except nats.js.errors.NotFoundError:
        return  # a new log: nothing recorded yet
    metadata = info.config.metadata or {}
    if METADATA_KEY in metadata:
        refuse_newer(int(metadata[METADATA_KEY]), names.events_stream)
    recorded, _ = await _read_record(store)
    refuse_newer(recorded, names.events_stream)


async def record(store: EventStore) -> None:
    """Record this build's version on the log unless it holds one as high (after provisioning)."""
    for _ in range(_ATTEMPTS):
        recorded, seq = await _read_record(store)
        refuse_newer(recorded, store.names.events_stream)
        if recorded == EVENT_SCHEMA:
            return
        headers = {"Nats-Expected-Last-Subject-Sequence": str(seq)}
        try:
            await store.js.publish(store.names.event_schema, str(EVENT_SCHEMA).encode(), headers=headers)
        except nats.js.errors.APIError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                continue  # another start wrote meanwhile: read what it wrote
            raise
        log.info("event_schema.recorded", version=EVENT_SCHEMA, previous=recorded or None)
        return
    raise Conflict(f"{store.names.event_schema} kept changing while this start recorded it")


async def _read_record(store: EventStore) -> tuple[int, int]:
    """(version, subject sequence) of the record; (0, 0) when there is none. From the leader."""
    try:
        raw = await store.js.get_last_msg(store.names.meta_stream, store.names.event_schema)
    except nats.js.errors.NotFoundError:
        return 0, 0
    except nats.js.errors.APIError as exc:
        if exc.err_code == NO_MESSAGE_FOUND:
            return 0, 0
        raise
    assert raw.data is not None
    assert raw.seq is not None
    return int(raw.data), int(raw.seq)
