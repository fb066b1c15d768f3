"""Door definitions in the log and in the ``doors`` projection (docs/doors/doors.md).

A door's subject (``<ns>.ev.door.<name>``) holds its ``DoorSaved`` and ``DoorDeleted`` events; the
last one is the door as it stands, so a read of it is always the latest write. The ``doors`` table
is a read model of the same events for listing, maintained by the projector with the helpers
below: each row keeps the stream sequence of the event it shows, so a replayed or reordered event
changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from layby_contracts.doors import Door
from layby_contracts.events import DoorDeleted, DoorSaved, Event
from layby_server.store.eventstore import EventStore, Stored

if TYPE_CHECKING:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

    Conn = asyncpg.Connection[Any] | PoolConnectionProxy[Any]

DOOR_NOT_FOUND = "Door not found"
"""The one 404 of a door definition: unknown, deleted, or a name no door can have."""
OPERATORS_ONLY = "only an operator may save or delete doors"
"""A door is platform configuration: it starts flows and resolves parks on its own rules."""


_json = msgspec.json.Encoder()


def door_of(event: Event | None) -> Door | None:
    """The door a door subject's last event shows: None once deleted (or for no event)."""
    if not isinstance(event, DoorSaved):
        return None
    return Door(name=event.name, spec=event.spec, updated_by=event.by, updated_at=event.saved_at.isoformat())


async def last_door_event(store: EventStore, name: str) -> Stored | None:
    """The last event of a door, from the stream leader: decisions and read-your-writes rest on
    it. ``name`` must already be a door name (``layby_domain.doors.is_door_name``): it becomes a
    subject token."""
    return await store.last(store.names.door(name), leader=True)


_SAVED = """
INSERT INTO doors AS d (name, kind, target, subject, spec, updated_by, updated_at, deleted, last_seq)
VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, false, $8)
ON CONFLICT (name) DO UPDATE SET
    kind = EXCLUDED.kind, target = EXCLUDED.target, subject = EXCLUDED.subject, spec = EXCLUDED.spec,
    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at, deleted = false,
    last_seq = EXCLUDED.last_seq
WHERE d.last_seq < EXCLUDED.last_seq
"""

# A deletion applied before the save it follows (replicas applying neighbouring batches) leaves a
# tombstone row the older save cannot overwrite: the row's sequence says the deletion is newer.
_DELETED = """
INSERT INTO doors AS d (name, updated_by, updated_at, deleted, last_seq)
VALUES ($1, $2, $3, true, $4)
ON CONFLICT (name) DO UPDATE SET
    updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at, deleted = true,
    last_seq = EXCLUDED.last_seq
WHERE d.last_seq < EXCLUDED.last_seq
"""


def door_rows(batch: Sequence[Stored]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows a batch of events writes to ``doors``: (saved, deleted)."""
    saved: list[tuple[Any, ...]] = []
    deleted: list[tuple[Any, ...]] = []
    for stored in batch:
        ev = stored.event
        if isinstance(ev, DoorSaved):
            spec = ev.spec
            row = (ev.name, spec.kind, spec.target, spec.subject, _json.encode(spec).decode(), ev.by)
            saved.append((*row, ev.saved_at, stored.seq))
        elif isinstance(ev, DoorDeleted):
            deleted.append((ev.name, ev.by, ev.deleted_at, stored.seq))
    return saved, deleted


async def apply_door_rows(conn: Conn, rows: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]) -> None:
    """Write ``door_rows`` inside the projector's transaction (order-insensitive: each statement
    is guarded by the row's sequence)."""
    saved, deleted = rows
    if saved:
        await conn.executemany(_SAVED, saved)
    if deleted:
        await conn.executemany(_DELETED, deleted)
