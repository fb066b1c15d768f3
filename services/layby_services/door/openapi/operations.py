"""What the doors' OpenAPI document says of each operation beyond what its handler declares:
its id, tag, security, links, the headers the door sets, and the responses that are not JSON
(the stream, the callback pages, the media bytes)."""

from __future__ import annotations

import msgspec

from layby_domain.media import IMAGE_TYPES
from layby_services.door.callback_pages import FORM_PAGE_CSP, PAGE_CSP
from layby_services.door.messages import (
    INTERNAL_ERROR,
    NOT_FOUND_TEXT,
    SERVER_ERROR_TEXT,
    STREAM_UNAVAILABLE,
    TOO_MANY_STREAMS,
)
from layby_services.door.openapi.components import (
    BEARER,
    ERROR_HEADERS,
    JSON,
    NO_STORE,
    NOSNIFF,
    PUBLIC,
    TEXT,
    Json,
    error,
    header,
    ref,
    text,
)
from layby_services.door.routes.stream import STREAM_RETRY_AFTER

UNAVAILABLE_503 = {"503": ref("responses", "Unavailable")}
SEQ = {"type": "string", "pattern": "^[0-9]+$"}


class Operation(msgspec.Struct, frozen=True, kw_only=True):
    """What the document says of one operation beyond what its handler declares."""

    operation_id: str
    tag: str
    security: list[Json]
    rate_limited: bool = True
    ok: Json | None = None
    """The 200 response, when the handler cannot declare it (not JSON)."""
    ok_headers: Json | None = None
    responses: Json = {}
    parameters: list[Json] = []
    request_body: Json | None = None
    links: Json | None = None


def _callback_page_responses() -> Json:
    page_headers = {
        **ERROR_HEADERS,
        "Content-Security-Policy": header(
            text(PAGE_CSP, FORM_PAGE_CSP), "The form page's policy adds what its one inline script needs."
        ),
        "X-Frame-Options": header(text("DENY"), "Never framed."),
        "Referrer-Policy": header(text("no-referrer"), "The ticket never leaks in a Referer."),
    }
    return {
        "404": {
            "description": "The uniform 404, in plain text: unknown, expired, malformed or dead ticket, or a "
            "verifier-bound question.",
            "headers": ERROR_HEADERS,
            "content": {TEXT: {"schema": text(NOT_FOUND_TEXT)}},
        },
        "500": {
            "description": "A stored form schema the page cannot render (plain text, logged), or something "
            "unexpected (the JSON envelope).",
            "headers": ERROR_HEADERS,
            "content": {
                TEXT: {"schema": text(SERVER_ERROR_TEXT)},
                JSON: {
                    "schema": {
                        "type": "object",
                        "properties": {"error": text(INTERNAL_ERROR)},
                        "required": ["error"],
                        "additionalProperties": False,
                    }
                },
            },
        },
        "200": {
            "description": "The constant Done, confirm or awaiting page, or the question's form "
            "(docs/doors/callback.md#the-pages-behind-a-link).",
            "headers": page_headers,
            "content": {"text/html": {"schema": {"type": "string"}}},
        },
    }


def _sse_stream(operation_id: str, tag: str, frames: str, seq: str) -> Operation:
    """A Server-Sent Events door: its frames, its headers, and the 503 of the streams' shared
    capacity (docs/doors/stream.md#capacity)."""
    return Operation(
        operation_id=operation_id,
        tag=tag,
        security=BEARER,
        ok={
            "description": frames,
            "headers": {
                "Cache-Control": header(text("no-cache"), "Never cached."),
                "X-Accel-Buffering": header(text("no"), "Proxies must not buffer."),
                "Layby-Stream-Seq": header(SEQ, seq),
            },
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        responses={
            "503": error(
                "This door process serves `LAYBY_SSE_MAX_CLIENTS` streams already, or the consumer of "
                "the stream's shared tail could not be created (docs/doors/stream.md#capacity).",
                (TOO_MANY_STREAMS, STREAM_UNAVAILABLE),
                headers={
                    "Retry-After": header(
                        {"type": "integer", "const": STREAM_RETRY_AFTER}, "Seconds to wait."
                    )
                },
            )
        },
    )


def operations() -> dict[tuple[str, str], Operation]:
    interactions, runs, doors, health = "interactions", "runs", "doors", "health"
    notifications = "notifications"
    return {
        ("/api/interactions", "get"): Operation(
            operation_id="listInteractions",
            tag=interactions,
            security=BEARER,
            ok_headers={
                "Cache-Control": NO_STORE,
                "Layby-Stream-Seq": header(SEQ, "The stream sequence this page and its total reflect."),
            },
            links={
                "AnswerTheFirstItem": {
                    "operationId": "answerInteraction",
                    "parameters": {"interaction_id": "$response.body#/data/items/0/interaction_id"},
                    "description": "Answer the first pending question of the page.",
                }
            },
        ),
        ("/api/interactions/done", "get"): Operation(
            operation_id="listDoneInteractions",
            tag=interactions,
            security=BEARER,
            ok_headers={"Cache-Control": NO_STORE},
        ),
        ("/api/interactions/stream", "get"): _sse_stream(
            "streamInteractions",
            interactions,
            "The feed: `interaction.add` frames (data: a PendingQuestion), `interaction.answered` and "
            "`interaction.removed` frames (data: exactly `{interaction_id, group_id}`), and `: keepalive` "
            "comments.",
            "The frames follow this stream sequence (docs/doors/stream.md).",
        ),
        ("/api/interactions/{interaction_id}/answer", "post"): Operation(
            operation_id="answerInteraction",
            tag=interactions,
            security=BEARER,
            request_body={"required": True, "content": {JSON: {"schema": ref("schemas", "AnswerRequest")}}},
            responses=UNAVAILABLE_503,
        ),
        ("/api/interactions/{interaction_id}/webhook", "get"): Operation(
            operation_id="getInteractionWebhook", tag=interactions, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/interactions/media/{media_id}", "get"): Operation(
            operation_id="getMedia",
            tag=interactions,
            security=PUBLIC,
            ok={
                "description": "The stored bytes, with their stored (sniffed) type.",
                "headers": {
                    "Cache-Control": header(
                        {"type": "string", "pattern": "^private, max-age=[0-9]+$"},
                        "Whole seconds of retention left.",
                    ),
                    "X-Content-Type-Options": NOSNIFF,
                    "Content-Security-Policy": header(text("default-src 'none'"), "Inert."),
                },
                "content": {mime: {} for mime in sorted(IMAGE_TYPES)},
            },
            responses=UNAVAILABLE_503,
        ),
        ("/api/interactions/callback/{ticket}", "post"): Operation(
            operation_id="postCallback",
            tag="callback",
            security=PUBLIC,
            ok_headers=ERROR_HEADERS,
            parameters=[
                {
                    "name": "answer",
                    "in": "query",
                    "required": False,
                    "style": "form",
                    "explode": True,
                    "schema": {"type": "object", "additionalProperties": {"type": "string"}},
                    "description": "An external question with an empty body: the query parameters are the "
                    "answer (a repeated key maps to the list of its values). Ignored otherwise.",
                }
            ],
            request_body={
                "required": False,
                "content": {
                    JSON: {
                        "schema": {
                            "type": "object",
                            "additionalProperties": True,
                            "description": "An external question: the whole answer. A channel-delivered "
                            'question: `{"answer": <value>}`, validated as at the answer door.',
                        }
                    }
                },
            },
            responses=UNAVAILABLE_503,
        ),
        ("/api/channels/{name}/events", "post"): Operation(
            operation_id="postChannelEvents",
            tag="channels",
            security=PUBLIC,
            ok={
                "description": "The provider's acknowledgement: empty, or what the channel's provider "
                "expects back (Slack's `url_verification` challenge, a modal's field errors).",
                "content": {TEXT: {"schema": {"type": "string"}}, JSON: {"schema": {"type": "object"}}},
            },
            request_body={
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
        ),
        ("/api/channels/{name}/events", "get"): Operation(
            operation_id="getChannelEvents",
            tag="channels",
            security=PUBLIC,
            ok={
                "description": "The plugin's answer to its provider's subscription handshake (WhatsApp: "
                "the `hub.challenge` back as text when `hub.verify_token` matches).",
                "content": {TEXT: {"schema": {"type": "string"}}, JSON: {"schema": {"type": "object"}}},
            },
            responses={
                "403": {
                    "description": "The handshake's token does not match (plain text).",
                    "content": {TEXT: {"schema": text("Forbidden")}},
                },
                **UNAVAILABLE_503,
            },
        ),
        ("/api/messages/stream", "get"): _sse_stream(
            "streamMessages",
            "channels",
            "`message` frames (data: an InboundMessage) and `: keepalive` comments.",
            "The frames follow this messages-stream sequence (docs/doors/messages.md).",
        ),
        ("/api/interactions/callback/{ticket}", "get"): Operation(
            operation_id="getCallbackPage",
            tag="callback",
            security=PUBLIC,
            responses={**_callback_page_responses(), **UNAVAILABLE_503},
        ),
        ("/api/runs", "get"): Operation(
            operation_id="listRuns",
            tag=runs,
            security=BEARER,
            links={
                "ShowTheFirstRun": {
                    "operationId": "getRun",
                    "parameters": {"run_id": "$response.body#/data/items/0/run_id"},
                    "description": "The first run of the page.",
                }
            },
        ),
        ("/api/runs", "post"): Operation(
            operation_id="startRun",
            tag=runs,
            security=BEARER,
            request_body={"required": True, "content": {JSON: {"schema": ref("schemas", "StartRunRequest")}}},
        ),
        ("/api/asks", "post"): Operation(
            operation_id="ask",
            tag=interactions,
            security=BEARER,
            request_body={"required": True, "content": {JSON: {"schema": ref("schemas", "AskRequest")}}},
        ),
        ("/api/interactions/{interaction_id}/outcome", "get"): Operation(
            operation_id="getOutcome",
            tag=interactions,
            security=BEARER,
            responses={
                "503": {"headers": {**ERROR_HEADERS, "Retry-After": ref("headers", "RetryAfter")}},
            },
        ),
        ("/api/interactions/{interaction_id}", "delete"): Operation(
            operation_id="withdrawInteraction", tag=interactions, security=BEARER
        ),
        ("/api/runs/summary", "get"): Operation(operation_id="summarizeRuns", tag=runs, security=BEARER),
        ("/api/runs/{run_id}", "get"): Operation(operation_id="getRun", tag=runs, security=BEARER),
        ("/api/runs/{run_id}/cancel", "post"): Operation(
            operation_id="cancelRun", tag=runs, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/runs/{run_id}/retry", "post"): Operation(
            operation_id="retryRun", tag=runs, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/workers", "get"): Operation(operation_id="listWorkers", tag=runs, security=BEARER),
        ("/api/doors", "get"): Operation(
            operation_id="listDoors",
            tag=doors,
            security=BEARER,
            links={
                "ShowTheFirstDoor": {
                    "operationId": "getDoor",
                    "parameters": {"name": "$response.body#/data/items/0/name"},
                    "description": "The first door of the page.",
                }
            },
        ),
        ("/api/doors/{name}", "get"): Operation(operation_id="getDoor", tag=doors, security=BEARER),
        ("/api/doors/{name}", "put"): Operation(
            operation_id="putDoor",
            tag=doors,
            security=BEARER,
            request_body={"required": True, "content": {JSON: {"schema": ref("schemas", "DoorSpecRequest")}}},
            responses=UNAVAILABLE_503,
        ),
        ("/api/doors/{name}", "delete"): Operation(
            operation_id="deleteDoor", tag=doors, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/hooks/{name}", "post"): Operation(
            operation_id="visitHook",
            tag=doors,
            # A bearer token, or (a hook whose door binds a webhook verifier) the sender's signature.
            security=[*BEARER, {}],
            request_body={
                "required": False,
                "description": "The hook's input document (any JSON; an empty body is `{}`).",
                "content": {JSON: {"schema": {}}},
            },
        ),
        ("/api/conversations/{subject}/messages", "post"): Operation(
            operation_id="postConversationMessage",
            tag=doors,
            security=BEARER,
            request_body={
                "required": False,
                "description": "The message: the route's input document (any JSON).",
                "content": {JSON: {"schema": {}}},
            },
        ),
        ("/api/notifications", "post"): Operation(
            operation_id="notify",
            tag=notifications,
            security=BEARER,
            request_body={"required": True, "content": {JSON: {"schema": ref("schemas", "NotifyRequest")}}},
            responses={
                "503": {"headers": {**ERROR_HEADERS, "Retry-After": ref("headers", "RetryAfter")}},
            },
        ),
        ("/api/notifications", "get"): Operation(
            operation_id="listNotifications", tag=notifications, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/subjects/{subject}/parked", "get"): Operation(
            operation_id="listParked", tag=doors, security=BEARER
        ),
        ("/healthz", "get"): Operation(
            operation_id="healthz", tag=health, security=PUBLIC, rate_limited=False
        ),
        ("/readyz", "get"): Operation(
            operation_id="readyz",
            tag=health,
            security=PUBLIC,
            rate_limited=False,
            responses={"503": {"headers": {**ERROR_HEADERS, "Retry-After": ref("headers", "RetryAfter")}}},
        ),
        ("/schema/openapi.json", "get"): Operation(
            operation_id="openapi",
            tag=health,
            security=PUBLIC,
            ok={
                "description": "This OpenAPI 3.1 document, generated from the doors' handlers.",
                "headers": {"Cache-Control": header(text("no-cache"), "Revalidated on every use.")},
                "content": {
                    JSON: {
                        "schema": {"type": "object", "required": ["openapi", "info", "paths", "components"]}
                    }
                },
            },
        ),
    }
