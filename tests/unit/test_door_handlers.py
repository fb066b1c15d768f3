"""The ask service's door-definition handlers on the in-memory event store with a manual clock:
what a save checks and in which order, what a delete expects, and how long a read door is
trusted (docs/doors/doors.md). The doors themselves run against real NATS and PostgreSQL in
tests/integration/test_doors_api.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from layby_contracts.commands import DeleteDoor, PutDoor
from layby_contracts.doors import Column
from layby_contracts.errors import BadInput, NotFound
from layby_contracts.events import DoorDeleted
from layby_domain.clock import ManualClock
from layby_server.auth import Authenticator
from layby_server.settings import load_settings
from layby_server.store.memstore import MemoryEventStore
from layby_services.ask.doors import CACHE_SECONDS, DoorHandlers

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
OPERATOR = "op-token-0123456789abcdef"
HOOK = {"kind": "hook", "target": "agent"}


class Compiler:
    """Records the programs it is asked to compile; refuses the one named ``bad``."""

    def __init__(self) -> None:
        self.seen: list[Column] = []

    async def check(self, column: Column, program: str) -> None:
        self.seen.append(column)
        if program == "bad":
            raise BadInput(f"{column}_expr does not compile: bad", field=f"{column}_expr")


def _world() -> tuple[DoorHandlers, MemoryEventStore, ManualClock, Compiler]:
    clock = ManualClock(T0)
    settings = load_settings({}, api_tokens=f"{OPERATOR}:ops:operator")
    store = MemoryEventStore(settings.names, clock=clock)
    jq = Compiler()
    handlers = DoorHandlers(settings, store, Authenticator(settings.api_tokens), clock, jq)  # type: ignore[arg-type]
    return handlers, store, clock, jq


async def test_a_read_door_is_trusted_for_a_moment_and_this_process_s_writes_at_once() -> None:
    """``load`` keeps what it read for ``CACHE_SECONDS``: another replica's delete is seen after
    that, this process's own save and delete at once (docs/doors/doors.md#commands)."""
    handlers, store, clock, _ = _world()
    await handlers.put(PutDoor(token=OPERATOR, name="d", spec=HOOK))
    door = await handlers.load("d")
    assert door is not None and door.spec.target == "agent"
    await store.append(
        store.names.door("d"),
        DoorDeleted(name="d", by="elsewhere", deleted_at=T0),
        msg_id="x",
        expected_seq=None,
    )
    assert await handlers.load("d") == door
    clock.advance(CACHE_SECONDS)
    assert await handlers.load("d") is None
    await handlers.put(PutDoor(token=OPERATOR, name="d", spec={**HOOK, "target": "other"}))
    assert (await handlers.load("d")).spec.target == "other"  # type: ignore[union-attr]
    await handlers.delete(DeleteDoor(token=OPERATOR, name="d"))
    assert await handlers.load("d") is None
    assert await handlers.load("Not A Name") is None


async def test_the_programs_compile_in_the_contract_s_order_and_the_first_failure_is_the_answer() -> None:
    """Every present program is compiled, ``cancel_expr`` first; the first that does not compile
    is refused and nothing is saved (docs/doors/doors.md#what-a-save-checks)."""
    handlers, store, _, jq = _world()
    spec = {**HOOK, "extras_expr": "{}", "start_expr": "bad", "cancel_expr": "null", "resume_expr": "bad"}
    with pytest.raises(BadInput) as refused:
        await handlers.put(PutDoor(token=OPERATOR, name="d", spec=spec))
    assert (refused.value.message, refused.value.field) == (
        "resume_expr does not compile: bad",
        "resume_expr",
    )
    assert jq.seen == ["cancel", "resume"]
    assert await store.last(store.names.door("d")) is None


async def test_a_delete_of_a_deleted_door_is_not_found() -> None:
    """A delete expects the door's last event: a door already deleted, or never saved, is the
    uniform 404 and nothing is appended (docs/doors/doors.md#delete)."""
    handlers, store, _, _ = _world()
    with pytest.raises(NotFound):
        await handlers.delete(DeleteDoor(token=OPERATOR, name="d"))
    await handlers.put(PutDoor(token=OPERATOR, name="d", spec=HOOK))
    await handlers.delete(DeleteDoor(token=OPERATOR, name="d"))
    deleted = await store.last(store.names.door("d"))
    with pytest.raises(NotFound) as refused:
        await handlers.delete(DeleteDoor(token=OPERATOR, name="d"))
    assert refused.value.message == "Door not found"
    assert await store.last(store.names.door("d")) == deleted
