"""The hand-written parts of the doors' OpenAPI document (docs/doors/common.md#the-openapi-document).

Litestar generates the document from the route handlers: their paths, typed parameters, the
Structs they return (``layby_contracts.http``) and the refusals they declare (``refusal``).
Written here by hand is only what no handler can declare: the answers sent before any handler
runs (the connection limits of ``protocol.py``, the rate limits of ``ratelimit.py``, the
credentials check), the stream's Server-Sent Events, the callback pages' HTML and plain text,
the media bytes, the bodies the doors read themselves (under the body cap), and each
operation's id, tags, security, links and the headers the doors set.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Literal, cast

import msgspec
from litestar.openapi import ResponseSpec

from layby_contracts.http import AnswerRequest, Error
from layby_contracts.limits import MAX_BODY_BYTES_DEFAULT
from layby_domain.media import IMAGE_TYPES
from layby_server.auth import BAD_SCHEME, MISSING_CREDENTIALS, UNKNOWN_CREDENTIALS
from layby_services.door.callback_pages import FORM_PAGE_CSP, PAGE_CSP
from layby_services.door.messages import (
    HEADER_TIMEOUT,
    HEADERS_TOO_LARGE,
    INTERNAL_ERROR,
    MALFORMED,
    NOT_FOUND_TEXT,
    PAYLOAD_TOO_LARGE,
    SERVER_ERROR_TEXT,
    STREAM_UNAVAILABLE,
    TOO_MANY_REQUESTS,
    TOO_MANY_STREAMS,
    UNAVAILABLE,
)
from layby_services.door.routes.stream import STREAM_RETRY_AFTER

Json = dict[str, Any]

JSON = "application/json"
TEXT = "text/plain"
CAPABILITY = "^[A-Za-z0-9_-]{43}$"
"""A callback ticket and a media id: 43 characters of the URL-safe base64 alphabet."""
UUID4 = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"


@cache
def _closed_error(messages: tuple[str, ...], field: bool) -> type[msgspec.Struct]:
    """The error envelope whose ``error`` is exactly one of ``messages`` (a Literal)."""
    words = re.findall(r"[a-z]+", messages[0].lower())
    name = "".join(w.capitalize() for w in words)[:40] + ("Field" if field else "")
    fields: list[Any] = [("error", cast(Any, Literal)[messages])]
    if field:
        fields.append(("field", str | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct(
        name, fields, kw_only=True, frozen=True, forbid_unknown_fields=True, module="layby.refusals"
    )


def refusal(description: str, *messages: str, field: bool = False) -> ResponseSpec:
    """A documented refusal for a handler's ``responses``: the error envelope, its ``error`` pinned
    to ``messages`` (the constants the door raises) when the door has a closed set of them, and
    ``field`` when one input field may be blamed."""
    container = _closed_error(messages, field) if messages else Error
    return ResponseSpec(container, description=description, generate_examples=False)


def _ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def _header(schema: Json, description: str) -> Json:
    """A response header the door always sends."""
    return {"description": description, "required": True, "schema": schema}


def _text(*values: str) -> Json:
    """A string that is exactly one of ``values``."""
    if len(values) == 1:
        return {"type": "string", "const": values[0]}
    return {"type": "string", "enum": list(values)}


NO_STORE = _ref("headers", "NoStore")
NOSNIFF = _ref("headers", "NoSniff")
ERROR_HEADERS = {"Cache-Control": NO_STORE, "X-Content-Type-Options": NOSNIFF}
BEARER: list[Json] = [{"bearerAuth": []}]
PUBLIC: list[Json] = []


def _error(description: str, messages: tuple[str, ...], *, headers: Json | None = None) -> Json:
    """A response whose body is the error envelope with ``error`` one of ``messages``."""
    body = {
        "type": "object",
        "properties": {"error": _text(*messages)},
        "required": ["error"],
        "additionalProperties": False,
    }
    return {
        "description": description,
        "headers": {**ERROR_HEADERS, **(headers or {})},
        "content": {JSON: {"schema": body}},
    }


COMPONENTS: Json = {
    "securitySchemes": {
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "A token of `LAYBY_API_TOKENS` (`TOKEN:IDENTITY:ROLE`). Role `operator` sees and answers "
                "everything; role `user` only what is addressed to its identity, and only its own runs "
                "(docs/doors/common.md#authentication)."
            ),
        }
    },
    "headers": {
        "NoStore": _header(_text("no-store"), "Never cached."),
        "NoSniff": _header(_text("nosniff"), "The declared content type is the only one."),
        "RetryAfter": _header(
            {"type": "integer", "minimum": 1}, "Whole seconds to wait before trying again."
        ),
    },
    "responses": {
        "MalformedRequest": _error(
            "A request the HTTP parser cannot read; the connection then closes.", (MALFORMED,)
        ),
        "Unauthorized": _error(
            "No, a malformed, or an unknown bearer token (docs/doors/common.md#authentication). Checked "
            "before anything else, so such a request learns nothing more.",
            (MISSING_CREDENTIALS, BAD_SCHEME, UNKNOWN_CREDENTIALS),
            headers={"WWW-Authenticate": _header(_text('Bearer realm="layby"'), "The scheme to use.")},
        ),
        "RequestTimeout": _error(
            "The request's head (request line and headers) did not arrive within "
            "`LAYBY_HTTP_HEADER_TIMEOUT_SECONDS`; sent before any door runs, then the connection closes.",
            (HEADER_TIMEOUT,),
        ),
        "PayloadTooLarge": _error(
            "A query string, or a body as actually read, longer than `INTERACTIONS_CALLBACK_MAX_BODY_BYTES` "
            f"(default {MAX_BODY_BYTES_DEFAULT}). Never truncated (docs/doors/common.md#body-size-cap).",
            (PAYLOAD_TOO_LARGE,),
        ),
        "TooManyRequests": _error(
            "Over a rate limit of this client address and door family; sent before any door runs, only "
            "with `LAYBY_RATE_LIMITS=on` (docs/doors/common.md#rate-limits).",
            (TOO_MANY_REQUESTS,),
            headers={"Retry-After": _ref("headers", "RetryAfter")},
        ),
        "HeaderFieldsTooLarge": _error(
            "More header fields than `LAYBY_HTTP_MAX_HEADERS`, or more header bytes than "
            "`LAYBY_HTTP_MAX_HEADER_BYTES`; sent before any door runs, then the connection closes.",
            (HEADERS_TOO_LARGE,),
        ),
        "InternalError": _error(
            "Something unexpected; no stack trace or exception text is ever sent.", (INTERNAL_ERROR,)
        ),
        "Unavailable": _error(
            "A dependency (NATS JetStream) is briefly unavailable; retry (the first resolution recorded "
            "wins, so a retry never records twice).",
            (UNAVAILABLE,),
        ),
    },
}
BEFORE_ANY_DOOR = {
    "400": _ref("responses", "MalformedRequest"),
    "408": _ref("responses", "RequestTimeout"),
    "413": _ref("responses", "PayloadTooLarge"),
    "431": _ref("responses", "HeaderFieldsTooLarge"),
    "500": _ref("responses", "InternalError"),
}
"""What every operation may answer whatever its door does: the connection's limits
(docs/doors/common.md#connection-limits) and the catch-all for the unexpected."""
UNAVAILABLE_503 = {"503": _ref("responses", "Unavailable")}
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
        "Content-Security-Policy": _header(
            _text(PAGE_CSP, FORM_PAGE_CSP), "The form page's policy adds what its one inline script needs."
        ),
        "X-Frame-Options": _header(_text("DENY"), "Never framed."),
        "Referrer-Policy": _header(_text("no-referrer"), "The ticket never leaks in a Referer."),
    }
    return {
        "404": {
            "description": "The uniform 404, in plain text: unknown, expired, malformed or dead ticket, or a "
            "verifier-bound question.",
            "headers": ERROR_HEADERS,
            "content": {TEXT: {"schema": _text(NOT_FOUND_TEXT)}},
        },
        "500": {
            "description": "A stored form schema the page cannot render (plain text, logged), or something "
            "unexpected (the JSON envelope).",
            "headers": ERROR_HEADERS,
            "content": {
                TEXT: {"schema": _text(SERVER_ERROR_TEXT)},
                JSON: {
                    "schema": {
                        "type": "object",
                        "properties": {"error": _text(INTERNAL_ERROR)},
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


def _operations() -> dict[tuple[str, str], Operation]:
    interactions, runs, health = "interactions", "runs", "health"
    return {
        ("/api/interactions", "get"): Operation(
            operation_id="listInteractions",
            tag=interactions,
            security=BEARER,
            ok_headers={
                "Cache-Control": NO_STORE,
                "Layby-Stream-Seq": _header(SEQ, "The stream sequence this page and its total reflect."),
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
        ("/api/interactions/stream", "get"): Operation(
            operation_id="streamInteractions",
            tag=interactions,
            security=BEARER,
            ok={
                "description": "The feed: `interaction.add` frames (data: a PendingQuestion), "
                "`interaction.answered` and `interaction.removed` frames (data: exactly "
                "`{interaction_id, group_id}`), and `: keepalive` comments.",
                "headers": {
                    "Cache-Control": _header(_text("no-cache"), "Never cached."),
                    "X-Accel-Buffering": _header(_text("no"), "Proxies must not buffer."),
                    "Layby-Stream-Seq": _header(
                        SEQ, "The frames follow this stream sequence (docs/doors/stream.md)."
                    ),
                },
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            responses={
                "503": _error(
                    "This door process serves `LAYBY_SSE_MAX_CLIENTS` streams already, or NATS did not "
                    "grant the subscription (docs/doors/stream.md#capacity).",
                    (TOO_MANY_STREAMS, STREAM_UNAVAILABLE),
                    headers={
                        "Retry-After": _header(
                            {"type": "integer", "const": STREAM_RETRY_AFTER}, "Seconds to wait."
                        )
                    },
                )
            },
        ),
        ("/api/interactions/{interaction_id}/answer", "post"): Operation(
            operation_id="answerInteraction",
            tag=interactions,
            security=BEARER,
            request_body={"required": True, "content": {JSON: {"schema": _ref("schemas", "AnswerRequest")}}},
            responses=UNAVAILABLE_503,
        ),
        ("/api/interactions/media/{media_id}", "get"): Operation(
            operation_id="getMedia",
            tag=interactions,
            security=PUBLIC,
            ok={
                "description": "The stored bytes, with their stored (sniffed) type.",
                "headers": {
                    "Cache-Control": _header(
                        {"type": "string", "pattern": "^private, max-age=[0-9]+$"},
                        "Whole seconds of retention left.",
                    ),
                    "X-Content-Type-Options": NOSNIFF,
                    "Content-Security-Policy": _header(_text("default-src 'none'"), "Inert."),
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
        ("/api/runs/summary", "get"): Operation(operation_id="summarizeRuns", tag=runs, security=BEARER),
        ("/api/runs/{run_id}", "get"): Operation(operation_id="getRun", tag=runs, security=BEARER),
        ("/api/runs/{run_id}/cancel", "post"): Operation(
            operation_id="cancelRun", tag=runs, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/runs/{run_id}/retry", "post"): Operation(
            operation_id="retryRun", tag=runs, security=BEARER, responses=UNAVAILABLE_503
        ),
        ("/api/workers", "get"): Operation(operation_id="listWorkers", tag=runs, security=BEARER),
        ("/healthz", "get"): Operation(
            operation_id="healthz", tag=health, security=PUBLIC, rate_limited=False
        ),
        ("/readyz", "get"): Operation(
            operation_id="readyz",
            tag=health,
            security=PUBLIC,
            rate_limited=False,
            responses={"503": {"headers": {**ERROR_HEADERS, "Retry-After": _ref("headers", "RetryAfter")}}},
        ),
        ("/schema/openapi.json", "get"): Operation(
            operation_id="openapi",
            tag=health,
            security=PUBLIC,
            ok={
                "description": "This OpenAPI 3.1 document, generated from the doors' handlers.",
                "headers": {"Cache-Control": _header(_text("no-cache"), "Revalidated on every use.")},
                "content": {
                    JSON: {
                        "schema": {"type": "object", "required": ["openapi", "info", "paths", "components"]}
                    }
                },
            },
        ),
    }


INFO: Json = {
    "title": "Layby",
    "version": "0.1.0",
    "summary": "Human-in-the-loop questions for AI agents: the HTTP doors.",
    "description": (
        'Success is `{"data": ...}`; failure is `{"error": "<message>"}` plus `field` when one input '
        "field is to blame (docs/doors/common.md). Every JSON error carries `Cache-Control: no-store` "
        "and `X-Content-Type-Options: nosniff`."
    ),
}
TAGS: list[Json] = [
    {"name": "interactions", "description": "Pending questions: list, stream, answer, media."},
    {"name": "callback", "description": "Public doors of external and channel-delivered questions."},
    {"name": "runs", "description": "The status of runs and their parks."},
    {"name": "health", "description": "Probes and this document."},
]
ERROR_SCHEMA: Json = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "description": "What went wrong, for a person to read."},
        "field": {"type": "string", "description": "The input field to blame, when one is."},
    },
    "required": ["error"],
    "additionalProperties": False,
    "description": "Every failure of a JSON door (docs/doors/common.md#envelope-and-errors).",
}


def _tidy(value: Any) -> Any:
    """Whole-number limits as integers, and a closed object for every error envelope."""
    if isinstance(value, dict):
        out = {k: _tidy(v) for k, v in value.items()}
        for key in ("minimum", "maximum"):
            if isinstance(out.get(key), float) and out[key].is_integer():
                out[key] = int(out[key])
        return out
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


def _not_null(schema: Json) -> Json:
    """A parameter's schema without the ``null`` Python's ``None`` default adds: a query or header
    parameter is a string on the wire, and an absent one is simply left out."""
    out = dict(schema)
    if "oneOf" in out:
        arms = [arm for arm in out.pop("oneOf") if arm.get("type") != "null"]
        out = {**arms[0], **out} if len(arms) == 1 else {**out, "oneOf": arms}
    if isinstance(out.get("type"), list):
        kinds = [k for k in out["type"] if k != "null"]
        out["type"] = kinds[0] if len(kinds) == 1 else kinds
    if "enum" in out:
        out["enum"] = [v for v in out["enum"] if v is not None]
    return out


def _parameter(parameter: Json) -> Json:
    """A path parameter is one plain segment (the media door's id is typed as a path only so that
    everything under its prefix reaches it); a query or header parameter loses ``null``."""
    schema = dict(parameter["schema"])
    if parameter["in"] == "path":
        schema.pop("format", None)
    else:
        schema = _not_null(schema)
    return {**parameter, "schema": schema}


def _responses(generated: Json, own: Operation) -> Json:
    out: Json = dict(BEFORE_ANY_DOOR)
    if own.rate_limited:
        out["429"] = _ref("responses", "TooManyRequests")
    if own.security:
        out["401"] = _ref("responses", "Unauthorized")
    for status, declared in generated.items():
        schema = declared.get("content", {}).get(JSON, {}).get("schema", {})
        if status == "400" and "$ref" not in schema:
            continue  # the framework's own 400, never sent: a parameter refusal is the door's envelope
        response = {k: v for k, v in declared.items() if k != "headers"}
        if status.startswith(("4", "5")):
            response["headers"] = ERROR_HEADERS
        out[status] = response
    ok = dict(own.ok or out["200"])
    if own.ok_headers:
        ok["headers"] = own.ok_headers
    if own.links:
        ok["links"] = own.links
    out["200"] = ok
    for status, response in own.responses.items():
        out[status] = {**out[status], **response} if status in out and "$ref" not in out[status] else response
    return dict(sorted(out.items()))


def finish(generated: Json) -> Json:
    """The served document: Litestar's, from the handlers, with the hand-written parts."""
    operations = _operations()
    paths: Json = {}
    for path, item in generated["paths"].items():
        for method, operation in item.items():
            own = operations[(path, method)]
            parameters = [_parameter(p) for p in operation.get("parameters", [])]
            finished: Json = {
                "operationId": own.operation_id,
                "summary": operation.get("summary", ""),
                **({"description": operation["description"]} if operation.get("description") else {}),
                "tags": [own.tag],
                "security": own.security,
                **({"parameters": parameters + own.parameters} if parameters or own.parameters else {}),
                **({"requestBody": own.request_body} if own.request_body else {}),
                "responses": _responses(operation["responses"], own),
            }
            paths.setdefault(path, {})[method] = finished
    schemas = dict(generated.get("components", {}).get("schemas", {}))
    _, requests = msgspec.json.schema_components([AnswerRequest], ref_template="#/components/schemas/{name}")
    schemas.update(requests)
    schemas["Error"] = ERROR_SCHEMA
    served: Json = _tidy(
        {
            "openapi": "3.1.0",
            "info": INFO,
            "tags": TAGS,
            "paths": paths,
            "components": {**COMPONENTS, "schemas": dict(sorted(schemas.items()))},
        }
    )
    return served


def document() -> Json:
    """The served document: the one the door's application generates."""
    from layby_server.settings import load_settings
    from layby_services.door.app import create_app

    return finish(create_app(load_settings({})).openapi_schema.to_schema())
