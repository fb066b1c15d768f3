"""Commands the door sends to the ask service, the authority that decides them (the door
definitions today): one core-NATS request each, its refusal raised as the error the ask service
raised, so the door's one error mapping (``errors.py``) answers it."""

from __future__ import annotations

import msgspec

from layby.requests import Retry, request
from layby_contracts.commands import Command, DoorCommand, Notify, Refused, Reply
from layby_contracts.refusals import from_refused
from layby_server.observability import tracing
from layby_server.store.eventstore import EventStore

REQUEST_TIMEOUT = 10.0
"""How long the door waits for the ask service (a door save compiles its programs first)."""
_enc = msgspec.json.Encoder()


async def send(
    store: EventStore, subject: str, cmd: Command | DoorCommand | Notify, *, timeout: float = REQUEST_TIMEOUT
) -> Reply:
    """The ask service's reply to ``cmd`` on ``subject``; a refusal is raised. No ask service, or
    no answer in time, is ``Unavailable`` (503: nothing was decided, or a retry decides the same)."""
    payload = _enc.encode(cmd)
    reply = await request(
        store.nc, subject, payload, retry=Retry(timeout=timeout), headers=tracing.headers_or_none()
    )
    if isinstance(reply, Refused):
        raise from_refused(reply)
    return reply


async def door_command(store: EventStore, cmd: DoorCommand) -> Reply:
    """A door command (a door's save or delete): ``send`` on the door-command subject."""
    return await send(store, store.names.cmd_door, cmd)
