"""Commands the door sends to the ask service, the authority that decides them (the door
definitions today): one core-NATS request each, its refusal raised as the error the ask service
raised, so the door's one error mapping (``errors.py``) answers it."""

from __future__ import annotations

import msgspec
import nats.errors

from layby_contracts.commands import REPLY_DECODER, DoorCommand, Refused, Reply
from layby_contracts.errors import Unavailable
from layby_contracts.refusals import from_refused
from layby_server import tracing
from layby_server.eventstore import EventStore

REQUEST_TIMEOUT = 10.0
"""How long the door waits for the ask service (a door save compiles its programs first)."""
_enc = msgspec.json.Encoder()


async def door_command(store: EventStore, cmd: DoorCommand) -> Reply:
    """The ask service's reply to ``cmd``; a refusal is raised. No ask service, or no answer in
    time, is ``Unavailable`` (503: nothing was decided, or a retry decides the same)."""
    subject = store.names.cmd_door
    try:
        msg = await store.nc.request(
            subject, _enc.encode(cmd), timeout=REQUEST_TIMEOUT, headers=tracing.headers_or_none()
        )
    except nats.errors.NoRespondersError:
        raise Unavailable(f"no ask service answers on {subject}") from None
    except (nats.errors.TimeoutError, TimeoutError):
        raise Unavailable(f"the ask service did not answer on {subject}") from None
    reply = REPLY_DECODER.decode(msg.data)
    if isinstance(reply, Refused):
        raise from_refused(reply)
    return reply
