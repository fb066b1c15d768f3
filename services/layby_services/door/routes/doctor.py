"""The doctor's doors (docs/operations.md#layby-doctor).

- ``GET /api/doctor`` (operators): every check of ``layby doctor``, as this door sees the
  installation — its NATS, its database, its channels and secrets, its clock.
- ``GET /api/doctor/probe/{nonce}`` (public): a door that serves it says so on NATS, so the doctor,
  having asked for it through the public base URL, knows that URL reaches this installation's doors.
  It answers 204 and nothing else; anything but 32 lowercase hex digits is the uniform 404. It
  proves only that the request arrived: it reads nothing and changes nothing.
"""

from __future__ import annotations

import re
from typing import Annotated

from litestar import Response, get
from litestar.params import PathParameter

from layby_contracts.errors import NotFound
from layby_contracts.http.doctor import DoctorView
from layby_server.operations.runtime import resolve_urls
from layby_server.write.doors import OPERATORS_ONLY
from layby_services.door.deps import Door, operators_only
from layby_services.door.messages import NOT_FOUND
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503

NONCE = re.compile(r"[0-9a-f]{32}")
Nonce = Annotated[
    str,
    PathParameter(description="32 lowercase hex digits, fresh for each check; anything else is 404."),
]


@get(
    "/api/doctor",
    operation_id="getDoctor",
    tags=["health"],
    operation_class=documented(responses=UNAVAILABLE_503),
    guards=[operators_only],
    summary="Check the installation",
    description="The checks of `layby doctor`, run by this door: NATS reachable, demanding credentials, "
    "syncing every append, streams replicated to the cluster's size; PostgreSQL reachable and migrated; "
    "every service answering; clocks within a bound; the public base URL reaching this installation's "
    "door over HTTPS; each channel's credentials accepted by its provider; the sealing key and webhook "
    "secrets present. `ok` is false when a check failed (docs/operations.md#layby-doctor).",
    responses={403: refusal("A `user` token: only an operator runs the doctor.", OPERATORS_ONLY)},
)
async def doctor_door(door: Door) -> DoctorView:
    # Loaded on first use: its HTTP client is not something the door's requests need.
    from layby_server.operations.doctor import Reach, diagnose

    settings = door.settings
    nats_url, db_url = resolve_urls(settings)
    reach = Reach(
        settings=settings,
        nats_url=nats_url,
        db_url=db_url,
        nc=door.store.nc,
        pool=door.pool,
        monitor_urls=[u for u in (settings.nats_monitor_url or "").split(",") if u],
    )
    return DoctorView(data=await diagnose(reach))


@get(
    "/api/doctor/probe/{nonce:str}",
    operation_id="doctorProbe",
    tags=["health"],
    status_code=204,
    summary="Say on NATS that this door served a doctor's nonce",
    description="Public: `layby doctor` requests it through the public base URL and listens on NATS for "
    "a door of its installation saying it served the nonce (docs/operations.md#layby-doctor). "
    "Nothing is read or changed; the answer is empty. Anything but 32 lowercase hex digits is 404.",
    responses={404: refusal("Not a nonce.", NOT_FOUND)},
)
async def doctor_probe(door: Door, nonce: Nonce) -> Response[None]:
    if NONCE.fullmatch(nonce) is None:
        raise NotFound(NOT_FOUND)
    await door.store.nc.publish(door.settings.names.doctor_probe(nonce), b"")
    return Response(None, status_code=204)
