"""``GET /api/messages/stream``: inbound chat messages that answered nothing, live
(docs/doors/messages.md).

Late replies, bridged mismatches and ordinary messages to a bot are recorded on the messages
stream (``ChannelMessageReceived``); this door follows it as Server-Sent Events, each frame's
``id:`` the message's stream sequence, resumable with ``Last-Event-ID`` within the resume window
exactly like the interactions stream. ``?channel=`` keeps one channel's messages. A restricted
identity sees only replies to questions addressed to it; a message about no question is for
unrestricted readers only.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, get
from litestar.params import QueryParameter
from litestar.response import Stream
from msgspec import UNSET

from layby_contracts.events import ChannelMessageReceived, decode_event
from layby_contracts.http import InboundMessage
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_services.door.deps import Door, Who
from layby_services.door.listeners import Entry, sees
from layby_services.door.openapi import refusal
from layby_services.door.query import LastEventId, LastEventIdHeader
from layby_services.door.routes.stream import audience_of, documented_stream, tail, writer_of

log = get_logger("layby.door.messages")
_enc = msgspec.json.Encoder()
CHANNEL = "^[A-Za-z0-9_-]{1,64}$"


class MessageFeed:
    """How an inbound message on the messages stream becomes an entry: its audience is the
    question's (none for a message about no question), its topic its channel."""

    name = "messages"

    def entry(self, seq: int, data: bytes, headers: dict[str, str] | None, *, live: bool) -> Entry | None:
        try:
            ev = decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("messages.skip_malformed", seq=seq)
            return None
        if not isinstance(ev, ChannelMessageReceived):
            return None
        body = _enc.encode(
            InboundMessage(
                message_id=ev.message_id,
                channel=ev.channel,
                sender=ev.sender,
                sender_name=_given(ev.sender_name),
                chat=ev.chat,
                received_at=ev.received_at,
                reason=ev.reason,
                text=_given(ev.text),
                value=_given(ev.value),
                interaction_id=_given(ev.interaction_id),
                notification_id=_given(ev.notification_id),
                params=_given(ev.params),
            )
        )
        return Entry(seq, b"id: %d\nevent: message\ndata: %s\n\n" % (seq, body), ev.audience, ev.channel)


def message_frame(seq: int, data: bytes, who: Principal) -> bytes | None:
    """The SSE frame of one inbound message for this caller, or None when it is not theirs."""
    entry = MessageFeed().entry(seq, data, None, live=False)
    return entry.frame if entry is not None and sees(entry, audience_of(who), None) else None


def _given(value: Any) -> Any:
    return UNSET if value is None else value


_MESSAGES_DOC = documented_stream(
    "`message` frames (data: an InboundMessage) and `: keepalive` comments.",
    "The frames follow this messages-stream sequence (docs/doors/messages.md).",
)


@get(
    "/api/messages/stream",
    operation_id="streamMessages",
    tags=["channels"],
    operation_class=_MESSAGES_DOC,
    summary="Inbound chat messages that answered nothing (Server-Sent Events)",
    description="Late replies, bridged mismatches and ordinary messages to a bot, each frame's `id:` "
    "the messages stream's sequence; resumable with `Last-Event-ID` (docs/doors/messages.md).",
    responses={
        400: refusal(
            "A `channel` that is not 1-64 of `[A-Za-z0-9_-]`: `channel is not valid` (field `channel`); "
            "or a request the HTTP parser cannot read (`invalid HTTP request`).",
            field=True,
        )
    },
)
async def messages_stream(
    request: Request[Any, Any, Any],
    door: Door,
    who: Who,
    *,
    channel: Annotated[
        str | None,
        QueryParameter(name="channel", description="Only this channel's messages.", pattern=CHANNEL),
    ] = None,
    last_event_id_header: LastEventIdHeader = None,
    last_event_id: LastEventId = None,
) -> Stream:
    names = door.store.names
    raw = last_event_id_header or last_event_id or None
    # One shared tail follows every channel; a client asking for one channel filters on it
    # (docs/doors/stream.md#one-shared-tail).
    return await tail(
        door,
        who,
        raw,
        stream=names.messages_stream,
        subject=names.messages_all,
        feed=_FEED,
        logger=log,
        topic=channel,
        direct=writer_of(request),
    )


_FEED = MessageFeed()
