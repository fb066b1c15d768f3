"""The notification doors (docs/doors/notifications.md): ``POST /api/notifications`` sends a
one-way notification in the caller's name, ``GET /api/notifications`` lists the caller's feed.

A notification is decided, sent and recorded by the ask service (``cmd.notify.v1``): the door
reads the body under the cap, decodes it strictly (an unknown key or a wrong type is a 400 naming
the field), forwards it with the caller's token, and answers the reply. The feed is read straight
from its stream: a restricted identity's own feed, an unrestricted identity's the shared one.
"""

from __future__ import annotations

import uuid

import msgspec
from litestar import get, post
from litestar.di import NamedDependency

from layby.requests import expect
from layby_contracts.commands import Notified, Notify
from layby_contracts.http import (
    Notification,
    Notifications,
    NotificationsData,
    NotifyRequest,
    NotifyResult,
)
from layby_server.write.feed import Feed
from layby_services.door.bodies import decode_struct
from layby_services.door.commands import send
from layby_services.door.deps import Door, DoorState, Token, Who, json_body
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import RETRY_503, UNAVAILABLE_503

REQUEST_TIMEOUT = 15.0
"""How long the door waits for the ask service: longer than its one send attempt's bound."""
RECORDED = "notification recorded to the internal sink"
_enc = msgspec.json.Encoder()


def sent_via(channel: str) -> str:
    return f"notification sent via '{channel}'"


def parse_notify_body(raw: bytes) -> NotifyRequest:
    """The body as a ``NotifyRequest``: a JSON object of known keys with the right types; every
    refusal names the field (an unknown key: none)."""
    return decode_struct(raw, NotifyRequest, name_unknown=False)


async def send_notify(state: DoorState, cmd: Notify) -> Notified:
    """The ask service's reply; a refusal is raised as the error the ask service raised."""
    reply = await send(state.store, state.store.names.cmd_notify, cmd, timeout=REQUEST_TIMEOUT)
    return expect(reply, Notified, "a notification")


def feed_of(state: DoorState) -> Feed:
    settings = state.settings
    return Feed(
        state.store.js,
        state.store.names,
        max_entries=settings.notifications_feed_max,
        ttl_seconds=settings.notifications_feed_ttl_seconds,
        now=state.clock.now,
    )


@post(
    "/api/notifications",
    operation_id="notify",
    tags=["notifications"],
    operation_class=documented(body=NotifyRequest, responses=RETRY_503),
    status_code=200,
    dependencies={"payload": json_body(parse_notify_body)},
    summary="Send a one-way notification",
    description="Nothing is asked and nothing waits: with no `channel` it is recorded to the feed; with "
    "one it is sent on that channel (one attempt) and, with an `audience`, recorded as well. Every rule "
    "is checked before anything is recorded or sent (docs/notifications.md).",
    responses={
        400: refusal(
            "The body (not JSON, not an object, an unknown key, a wrong type), a rule of the "
            "notification (docs/notifications.md#the-rules), an unknown channel, or the channel's "
            "permanent refusal of the input's shape; `field` names the input at fault.",
            field=True,
        ),
        403: refusal("A `user` identity naming another identity's `audience`.", field=True),
        501: refusal(
            "The channel cannot send notifications, or lacks the capability a field needs: "
            "`channel '<name>' does not support ...`; nothing was recorded or sent.",
            field=True,
        ),
        502: refusal("The channel's medium refused the send for good; nothing was recorded.", field=True),
        503: refusal(
            "The channel's medium failed this attempt and another may succeed (`Retry-After` when "
            "it named a pause), or the ask service is unavailable; nothing was recorded.",
            field=True,
        ),
    },
)
async def notify_door(door: Door, token: Token, payload: NamedDependency[NotifyRequest]) -> NotifyResult:
    """Body: a ``NotifyRequest`` (read under the body cap by the door itself)."""
    body = payload
    reply = await send_notify(
        door,
        Notify(
            token=token,
            notification_id=str(uuid.uuid4()),
            message=body.message,
            channel=body.channel,
            recipient=body.recipient,
            audience=body.audience,
            media=body.media,
            template=body.template,
            options=body.options,
            schema=body.schema,
            data=body.data,
            pages=body.pages,
            sender_identity=body.sender_identity,
        ),
    )
    if reply.outcome == "sent" and reply.channel is not None:
        return NotifyResult(data=sent_via(reply.channel))
    return NotifyResult(data=RECORDED)


@get(
    "/api/notifications",
    operation_id="listNotifications",
    tags=["notifications"],
    operation_class=documented(responses=UNAVAILABLE_503),
    summary="The caller's notification feed, newest first",
    description="A `user` identity reads its own feed (empty once its newest notification is older "
    "than INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS); an operator reads the shared feed. Each feed "
    "keeps its newest INTERACTIONS_NOTIFICATIONS_FEED_MAX (docs/notifications.md#the-feed).",
)
async def notifications_door(door: Door, who: Who) -> Notifications:
    entries = await feed_of(door).read(who.identity if who.restricted else None)
    return Notifications(
        data=NotificationsData(
            notifications=[
                Notification(
                    id=e.id,
                    message=e.message,
                    recipient=e.recipient,
                    audience=e.audience,
                    created_at=e.created_at.isoformat(),
                )
                for e in entries
            ]
        )
    )
