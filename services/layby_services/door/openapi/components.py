"""The hand-written components of the doors' OpenAPI document: what every operation may answer
before its handler runs, the shared headers; and what the application's OpenAPIConfig hands
Litestar: the document's summary, description and tags, the bearer security scheme."""

from __future__ import annotations

from typing import Any

from litestar.openapi.spec import SecurityScheme, Tag

from layby_contracts.limits import MAX_BODY_BYTES_DEFAULT
from layby_server.auth import BAD_SCHEME, MISSING_CREDENTIALS, UNKNOWN_CREDENTIALS
from layby_services.door.messages import (
    HEADER_TIMEOUT,
    HEADERS_TOO_LARGE,
    INTERNAL_ERROR,
    MALFORMED,
    PAYLOAD_TOO_LARGE,
    TOO_MANY_REQUESTS,
    UNAVAILABLE,
)

Json = dict[str, Any]

JSON = "application/json"
TEXT = "text/plain"
CAPABILITY = "^[A-Za-z0-9_-]{43}$"
"""A callback ticket and a media id: 43 characters of the URL-safe base64 alphabet."""
UUID4 = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"


def ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def header(schema: Json, description: str) -> Json:
    """A response header the door always sends."""
    return {"description": description, "required": True, "schema": schema}


def text(*values: str) -> Json:
    """A string that is exactly one of ``values``."""
    if len(values) == 1:
        return {"type": "string", "const": values[0]}
    return {"type": "string", "enum": list(values)}


NO_STORE = ref("headers", "NoStore")
NOSNIFF = ref("headers", "NoSniff")
ERROR_HEADERS = {"Cache-Control": NO_STORE, "X-Content-Type-Options": NOSNIFF}
BEARER: list[Json] = [{"bearerAuth": []}]


SEQ = {"type": "string", "pattern": "^[0-9]+$"}
"""A stream sequence, as a header carries it."""


def closed_error_schema(*messages: str) -> Json:
    """The error envelope with ``error`` one of ``messages``."""
    return {
        "type": "object",
        "properties": {"error": text(*messages)},
        "required": ["error"],
        "additionalProperties": False,
    }


def error(description: str, messages: tuple[str, ...], *, headers: Json | None = None) -> Json:
    """A response whose body is the error envelope with ``error`` one of ``messages``."""
    return {
        "description": description,
        "headers": {**ERROR_HEADERS, **(headers or {})},
        "content": {JSON: {"schema": closed_error_schema(*messages)}},
    }


COMPONENTS: Json = {
    "headers": {
        "NoStore": header(text("no-store"), "Never cached."),
        "NoSniff": header(text("nosniff"), "The declared content type is the only one."),
        "RetryAfter": header({"type": "integer", "minimum": 1}, "Whole seconds to wait before trying again."),
    },
    "responses": {
        "MalformedRequest": error(
            "A request the HTTP parser cannot read; the connection then closes.", (MALFORMED,)
        ),
        "Unauthorized": error(
            "No, a malformed, or an unknown bearer token (docs/doors/common.md#authentication). Checked "
            "before anything else, so such a request learns nothing more.",
            (MISSING_CREDENTIALS, BAD_SCHEME, UNKNOWN_CREDENTIALS),
            headers={"WWW-Authenticate": header(text('Bearer realm="layby"'), "The scheme to use.")},
        ),
        "RequestTimeout": error(
            "The request's head (request line and headers) did not arrive within "
            "`LAYBY_HTTP_HEADER_TIMEOUT_SECONDS`; sent before any door runs, then the connection closes.",
            (HEADER_TIMEOUT,),
        ),
        "PayloadTooLarge": error(
            "A query string, or a body as actually read, longer than `INTERACTIONS_CALLBACK_MAX_BODY_BYTES` "
            f"(default {MAX_BODY_BYTES_DEFAULT}). Never truncated (docs/doors/common.md#body-size-cap).",
            (PAYLOAD_TOO_LARGE,),
        ),
        "TooManyRequests": error(
            "Over a rate limit of this client address and door family; sent before any door runs, only "
            "with `LAYBY_RATE_LIMITS=on` (docs/doors/common.md#rate-limits).",
            (TOO_MANY_REQUESTS,),
            headers={"Retry-After": ref("headers", "RetryAfter")},
        ),
        "HeaderFieldsTooLarge": error(
            "More header fields than `LAYBY_HTTP_MAX_HEADERS`, or more header bytes than "
            "`LAYBY_HTTP_MAX_HEADER_BYTES`; sent before any door runs, then the connection closes.",
            (HEADERS_TOO_LARGE,),
        ),
        "InternalError": error(
            "Something unexpected; no stack trace or exception text is ever sent.", (INTERNAL_ERROR,)
        ),
        "Unavailable": error(
            "A dependency (NATS JetStream) is briefly unavailable; retry (the first resolution recorded "
            "wins, so a retry never records twice).",
            (UNAVAILABLE,),
        ),
    },
}
BEFORE_ANY_DOOR = {
    "400": ref("responses", "MalformedRequest"),
    "408": ref("responses", "RequestTimeout"),
    "413": ref("responses", "PayloadTooLarge"),
    "431": ref("responses", "HeaderFieldsTooLarge"),
    "500": ref("responses", "InternalError"),
}
"""What every operation may answer whatever its door does: the connection's limits
(docs/doors/common.md#connection-limits) and the catch-all for the unexpected."""


SUMMARY = "Human-in-the-loop questions for AI agents: the HTTP doors."
DESCRIPTION = (
    'Success is `{"data": ...}`; failure is `{"error": "<message>"}` plus `field` when one input '
    "field is to blame (docs/doors/common.md). Every JSON error carries `Cache-Control: no-store` "
    "and `X-Content-Type-Options: nosniff`."
)
TAGS = [
    Tag(name="interactions", description="Pending questions: list, stream, answer, media."),
    Tag(name="callback", description="Public doors of external and channel-delivered questions."),
    Tag(name="channels", description="Chat channels: providers' inbound webhooks and inbound messages."),
    Tag(name="runs", description="The status of runs and their parks."),
    Tag(name="doors", description="Door definitions: hooks, schedules and conversation routes."),
    Tag(name="notifications", description="One-way notifications: send one, read the feed."),
    Tag(name="health", description="Probes and this document."),
]
BEARER_AUTH = SecurityScheme(
    type="http",
    scheme="bearer",
    description="A token of `LAYBY_API_TOKENS` (`TOKEN:IDENTITY:ROLE`). Role `operator` sees and answers "
    "everything; role `user` only what is addressed to its identity, and only its own runs "
    "(docs/doors/common.md#authentication).",
)
UNAVAILABLE_503 = {"503": ref("responses", "Unavailable")}
RETRY_503 = {"503": {"headers": {**ERROR_HEADERS, "Retry-After": ref("headers", "RetryAfter")}}}
OPENAPI_PATH = "/schema/openapi.json"
OPENAPI_OPERATION: Json = {
    "operationId": "openapi",
    "summary": "Handler",
    "tags": ["health"],
    "security": [],
    "responses": {
        "200": {
            "description": "This OpenAPI 3.1 document, generated from the doors' handlers.",
            "headers": {"Cache-Control": header(text("no-cache"), "Revalidated on every use.")},
            "content": {
                JSON: {"schema": {"type": "object", "required": ["openapi", "info", "paths", "components"]}}
            },
        }
    },
}
"""Litestar's own handler serves the document: what its operation says is written here."""
