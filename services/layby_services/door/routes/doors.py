"""The door-definition doors (docs/doors/doors.md): ``PUT``, ``GET`` and ``DELETE
/api/doors/{name}``, and ``GET /api/doors``.

Doors are platform configuration: any authenticated identity reads them, only an operator saves
or deletes one. A save or a delete is decided by the ask service (it checks the definition and
compiles its programs); the door forwards it in the caller's name and answers its reply. One
door is read from its last event in the log, so a save that returned is what the next read
shows; the list reads the ``doors`` projection.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import delete, get, put
from litestar.di import NamedDependency
from litestar.params import PathParameter

from layby_contracts.commands import DeleteDoor, DoorReply, PutDoor
from layby_contracts.doors import Door as Definition
from layby_contracts.doors import DoorSpec
from layby_contracts.errors import NotFound, Unavailable
from layby_contracts.http import DoorBody, DoorPage, DoorPageData, DoorRemoved, DoorRemovedData, DoorView
from layby_contracts.limits import PAGE_SIZE_MAX
from layby_domain.doors import is_door_name
from layby_server.write.doors import DOOR_NOT_FOUND, OPERATORS_ONLY, door_of, last_door_event
from layby_services.door.bodies import decode_object
from layby_services.door.commands import door_command
from layby_services.door.deps import Door, Token, Who, json_body, operators_only
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import JSON, UNAVAILABLE_503, ref
from layby_services.door.query import DEFAULT_PAGE_SIZE, Page, PageSize
from layby_services.door.routes.inbox import PAGING_400, first_item_link, next_page

NAME_PATTERN = "^[a-z0-9_-]{1,64}$"
DoorName = Annotated[
    str,
    PathParameter(
        description="1-64 of [a-z0-9_-]. Read and delete: anything else is the same 404 as an unknown door.",
        schema_extra={"pattern": NAME_PATTERN},
    ),
]
DOOR_404 = refusal("Unknown, deleted, or a name no door can have: indistinguishable.", DOOR_NOT_FOUND)
OPERATORS_403 = refusal("A `user` token: only an operator saves or deletes doors.", OPERATORS_ONLY)

_FILTER = " FROM doors WHERE NOT deleted"
_COUNT = "SELECT count(*)" + _FILTER
_PAGE = (
    "SELECT name, spec::text AS spec, updated_by, updated_at" + _FILTER + " ORDER BY name LIMIT $1 OFFSET $2"
)


def _view(found: Definition) -> DoorView:
    return DoorView(
        name=found.name, spec=found.spec, updated_by=found.updated_by, updated_at=found.updated_at
    )


_PUT_DOC = documented(
    body={"required": True, "content": {JSON: {"schema": ref("schemas", "DoorSpecRequest")}}},
    responses=UNAVAILABLE_503,
)


@put(
    "/api/doors/{name:str}",
    operation_id="putDoor",
    tags=["doors"],
    operation_class=_PUT_DOC,
    status_code=200,
    guards=[operators_only],
    dependencies={"payload": json_body(decode_object)},
    summary="Save a door definition (create or replace)",
    description="Checks, in order: credentials (401), an operator (403), the body under the cap (413), "
    "JSON (400), then the definition: unknown keys, types, the name and the kind's rules, each jq "
    "program compiled, a schedule's cron (400, naming the field) (docs/doors/doors.md#save).",
    responses={
        400: refusal(
            "The body is not a JSON object, or the definition breaks a rule; `field` names the key "
            "(docs/doors/doors.md#what-a-save-checks).",
            field=True,
        ),
        403: OPERATORS_403,
    },
)
async def put_door(
    door: Door, token: Token, payload: NamedDependency[dict[str, Any]], name: DoorName
) -> DoorBody:
    """Body: the definition (a DoorSpec, read under the body cap by the door itself; the ask
    service checks it); 200 with the door as saved."""
    reply = await door_command(door.store, PutDoor(token=token, name=name, spec=payload))
    if not isinstance(reply, DoorReply) or reply.door is None:
        raise Unavailable("the ask service answered a save with something else")
    return DoorBody(data=_view(reply.door))


@get(
    "/api/doors/{name:str}",
    operation_id="getDoor",
    tags=["doors"],
    summary="One door definition",
    description="Read from the door's last event in the log: a save that returned is what this shows "
    "(docs/doors/doors.md#show).",
    responses={404: DOOR_404},
)
async def get_door(door: Door, name: DoorName) -> DoorBody:
    if not is_door_name(name):
        raise NotFound(DOOR_NOT_FOUND)
    stored = await last_door_event(door.store, name)
    found = door_of(stored.event if stored is not None else None)
    if found is None:
        raise NotFound(DOOR_NOT_FOUND)
    return DoorBody(data=_view(found))


@delete(
    "/api/doors/{name:str}",
    operation_id="deleteDoor",
    tags=["doors"],
    operation_class=documented(responses=UNAVAILABLE_503),
    status_code=200,
    guards=[operators_only],
    summary="Delete a door definition",
    description="The door stops at once: the next visit or fire finds no door (docs/doors/doors.md#delete).",
    responses={403: OPERATORS_403, 404: DOOR_404},
)
async def delete_door(door: Door, who: Who, token: Token, name: DoorName) -> DoorRemoved:
    if not is_door_name(name):
        raise NotFound(DOOR_NOT_FOUND)
    await door_command(door.store, DeleteDoor(token=token, name=name))
    return DoorRemoved(data=DoorRemovedData(name=name, status="deleted", deleted_by=who.identity))


_DOORS_DOC = documented(
    links=first_item_link("ShowTheFirstDoor", "getDoor", "name", "The first door of the page.")
)


@get(
    "/api/doors",
    operation_id="listDoors",
    tags=["doors"],
    operation_class=_DOORS_DOC,
    summary="Door definitions, by name",
    description="Deleted doors are left out; read from the projection, which follows the log by "
    "milliseconds (docs/doors/doors.md#list).",
    responses={400: refusal(PAGING_400, field=True)},
)
async def list_doors(door: Door, page: Page = 1, page_size: PageSize = DEFAULT_PAGE_SIZE) -> DoorPage:
    """``page``, ``pageSize`` (the list door's paging rules)."""
    size = min(page_size, PAGE_SIZE_MAX)
    async with door.pool.acquire() as conn:
        total = int(await conn.fetchval(_COUNT))
        rows = await conn.fetch(_PAGE, size, (page - 1) * size) if total else []
    items = [
        DoorView(
            name=r["name"],
            spec=msgspec.json.decode(r["spec"], type=DoorSpec),
            updated_by=r["updated_by"],
            updated_at=r["updated_at"].isoformat(),
        )
        for r in rows
    ]
    return DoorPage(
        data=DoorPageData(
            items=items, total=total, page=page, page_size=size, next_page=next_page(page, size, total)
        )
    )
