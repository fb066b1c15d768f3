"""``POST /api/channels/{name}/events``: a chat channel's inbound webhook (docs/doors/channels.md),
and ``GET`` on the same path for a provider's subscription handshake (WhatsApp's
``hub.challenge``): the plugin is handed the query and answers it itself.

Public: the provider's signature is the authentication, checked by the channel's plugin over
the raw body before anything is read or recorded. In order: the channel (a name that is not a
configured chat channel is the uniform 404), the size cap (413), the signature (401, nothing
recorded, nothing of the request echoed), the body (400), then each reply is decided on the log
(``layby_server.chat.inbound``) before the provider is acknowledged. A failure to record is a
503, so the provider delivers the request again.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.params import PathParameter

from layby_contracts.channels import InboundMalformed, InboundRefused, InboundRequest
from layby_contracts.errors import NotFound
from layby_contracts.http import Error
from layby_server.chat.inbound import ChatInbound
from layby_server.observability.logs import get_logger
from layby_services.door.deps import Door, DoorState, read_capped_body
from layby_services.door.messages import NOT_FOUND, PAYLOAD_TOO_LARGE, UNAUTHORIZED_CHANNEL
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import JSON, TEXT, UNAVAILABLE_503, text

log = get_logger("layby.door.channels")
CHANNEL_NAME = "^[A-Za-z0-9_-]{1,64}$"


_PROVIDER_ANSWER = {TEXT: {"schema": {"type": "string"}}, JSON: {"schema": {"type": "object"}}}
_EVENTS_DOC = documented(
    ok={
        "description": "The provider's acknowledgement: empty, or what the channel's provider expects back "
        "(Slack's `url_verification` challenge, a modal's field errors).",
        "content": _PROVIDER_ANSWER,
    },
    body={
        "required": False,
        "content": {
            JSON: {"schema": {"type": "object", "additionalProperties": True}},
            "application/x-www-form-urlencoded": {
                "schema": {"type": "object", "additionalProperties": {"type": "string"}}
            },
        },
        "description": "Exactly what the provider sends, signed as the provider signs it "
        "(docs/doors/channels.md).",
    },
    responses=UNAVAILABLE_503,
)
_HANDSHAKE_DOC = documented(
    ok={
        "description": "The plugin's answer to its provider's subscription handshake (WhatsApp: the "
        "`hub.challenge` back as text when `hub.verify_token` matches).",
        "content": _PROVIDER_ANSWER,
    },
    responses={
        "403": {
            "description": "The handshake's token does not match (plain text).",
            "content": {TEXT: {"schema": text("Forbidden")}},
        },
        **UNAVAILABLE_503,
    },
)


ChannelName = Annotated[
    str,
    PathParameter(
        description="The channel's name in `LAYBY_CHANNELS`.", schema_extra={"pattern": CHANNEL_NAME}
    ),
]
"""The ``name`` path parameter of every channel door."""
_UNKNOWN_CHANNEL = refusal(
    "No chat channel of that name is configured: the same response for any name.", NOT_FOUND
)


@post(
    "/api/channels/{name:str}/events",
    operation_id="postChannelEvents",
    tags=["channels"],
    operation_class=_EVENTS_DOC,
    summary="A chat channel's inbound webhook (public: the provider's signature authenticates it)",
    status_code=200,
    responses={
        400: refusal(
            "A signed request the channel cannot read.", field=False, name="ChannelInboundMalformed"
        ),
        401: refusal(
            "A missing, stale or wrong provider signature: nothing is recorded.", UNAUTHORIZED_CHANNEL
        ),
        404: _UNKNOWN_CHANNEL,
        413: refusal("The body is larger than the door's cap.", PAYLOAD_TOO_LARGE),
    },
)
async def channel_events(
    request: Request[Any, Any, Any],
    door: Door,
    name: ChannelName,
) -> Response[bytes]:
    _plugin(door, name)  # an unknown channel is the uniform 404 before its body is read
    body = await read_capped_body(request, door.settings.max_body_bytes)
    return await _handle(request, door, name, body)


@get(
    "/api/channels/{name:str}/events",
    operation_id="getChannelEvents",
    tags=["channels"],
    operation_class=_HANDSHAKE_DOC,
    summary="A chat channel's subscription handshake (public: the plugin checks the provider's token)",
    status_code=200,
    responses={
        400: refusal("A handshake the channel cannot read.", field=False, name="ChannelHandshakeMalformed"),
        401: refusal("The channel takes no handshake, or its check failed.", UNAUTHORIZED_CHANNEL),
        404: _UNKNOWN_CHANNEL,
    },
)
async def channel_handshake(
    request: Request[Any, Any, Any],
    door: Door,
    name: ChannelName,
) -> Response[bytes]:
    """The plugin answers (WhatsApp: the challenge as text when the verify token matches, 403
    otherwise); a plugin without a handshake refuses it as an unsigned request (401)."""
    return await _handle(request, door, name, b"")


def _plugin(door: DoorState, name: str) -> tuple[ChatInbound, Any]:
    """The chat channels' inbound side and the plugin of channel ``name``, or the uniform 404."""
    chat = door.chat
    plugin = chat.plugins.get(name) if chat is not None else None
    if chat is None or plugin is None:
        raise NotFound(NOT_FOUND)
    return chat, plugin


async def _handle(
    request: Request[Any, Any, Any], door: DoorState, name: str, body: bytes
) -> Response[bytes]:
    chat, plugin = _plugin(door, name)
    inbound = InboundRequest(
        method=request.method,
        url=str(request.url),
        headers={k.lower(): v for k, v in request.headers.items()},
        query=dict(request.query_params.items()),
        body=body,
    )
    try:
        response = await chat.handle(name, plugin, inbound)
    except InboundRefused as exc:
        log.warning("chat.refused", channel=name, why=str(exc))
        return _error(401, UNAUTHORIZED_CHANNEL)
    except InboundMalformed as exc:
        return _error(400, f"unreadable {name} request: {exc}"[:500])
    return Response(response.body, status_code=response.status, media_type=response.content_type)


def _error(status: int, message: str) -> Response[bytes]:
    return Response(
        msgspec.json.encode(Error(error=message)),
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )
