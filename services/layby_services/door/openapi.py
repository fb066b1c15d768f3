"""The doors' OpenAPI 3.1 document, written by hand (docs/doors/common.md#the-openapi-document).

Served at ``GET /schema/openapi.json``. It describes what the doors really send — every status
with its body and the headers that matter — including the answers given before any door runs
(the connection limits of ``protocol.py`` and the rate limits of ``ratelimit.py``). The
integration tests check the running doors against it with schemathesis
(tests/integration/test_openapi_conformance.py), so a door and this document cannot drift apart
unnoticed.
"""

from __future__ import annotations

from typing import Any

from layby_contracts.events import EXPIRY_KEY
from layby_contracts.limits import (
    MAX_BODY_BYTES_DEFAULT,
    PAGE_MAX,
    PAGE_SIZE_DEFAULT,
    PAGE_SIZE_MAX,
)
from layby_domain.formats import NAMES as ANSWER_FORMATS
from layby_domain.media import IMAGE_TYPES
from layby_services.door.routes.runs import FLOWS_MAX as RUN_FLOWS_MAX
from layby_services.door.routes.runs import STATUSES as RUN_STATUSES
from layby_services.door.routes.stream import STREAM_RETRY_AFTER

Json = dict[str, Any]

JSON = "application/json"
CAPABILITY = "^[A-Za-z0-9_-]{43}$"
"""A callback ticket and a media id: 43 characters of the URL-safe base64 alphabet."""
UUID4 = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
BEARER: list[Json] = [{"bearerAuth": []}]
PUBLIC: list[Json] = []


def _ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def _schema(name: str) -> Json:
    return _ref("schemas", name)


def _object(properties: Json, required: list[str] | None = None, **extra: Any) -> Json:
    """A closed JSON object: the keys listed and no others (``additionalProperties: false``)."""
    out: Json = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    return {**out, **extra}


def _data(inner: Json) -> Json:
    """The success envelope ``{"data": ...}``."""
    return _object({"data": inner}, ["data"])


def _header(schema: Json, description: str) -> Json:
    """A response header the door always sends."""
    return {"description": description, "required": True, "schema": schema}


def _text(*values: str) -> Json:
    """A string that is exactly one of ``values``."""
    return (
        {"type": "string", "const": values[0]}
        if len(values) == 1
        else {"type": "string", "enum": list(values)}
    )


NO_STORE = _ref("headers", "NoStore")
NOSNIFF = _ref("headers", "NoSniff")
ERROR_HEADERS = {"Cache-Control": NO_STORE, "X-Content-Type-Options": NOSNIFF}


def _error(
    description: str, messages: list[str] | None = None, *, field: bool = False, headers: Json | None = None
) -> Json:
    """A response whose body is the error envelope; ``messages`` pins the ``error`` text when
    the door has a closed set of them, ``field`` says whether a field may be blamed."""
    if messages is None and field:
        body = _schema("Error")
    else:
        properties: Json = {"error": _text(*messages) if messages else {"type": "string"}}
        if field:
            properties["field"] = {"type": "string"}
        body = _object(properties, ["error"])
    return {
        "description": description,
        "headers": {**ERROR_HEADERS, **(headers or {})},
        "content": {JSON: {"schema": body}},
    }


def _ok(description: str, schema: Json, headers: Json | None = None, links: Json | None = None) -> Json:
    out: Json = {"description": description, "content": {JSON: {"schema": schema}}}
    if headers:
        out["headers"] = headers
    if links:
        out["links"] = links
    return out


MALFORMED = "invalid HTTP request"
BEFORE_ANY_DOOR = {
    "408": _ref("responses", "RequestTimeout"),
    "413": _ref("responses", "PayloadTooLarge"),
    "431": _ref("responses", "HeaderFieldsTooLarge"),
    "500": _ref("responses", "InternalError"),
}
"""What every operation may answer whatever its door does: the connection's limits
(docs/doors/common.md#connection-limits) and the catch-all for the unexpected."""
RATE_LIMITED = {"429": _ref("responses", "TooManyRequests")}
"""Every door but the health probes (only with ``LAYBY_RATE_LIMITS=on``)."""


def _responses(own: Json, *, rate_limited: bool = True) -> Json:
    out: Json = {"400": _ref("responses", "MalformedRequest"), **BEFORE_ANY_DOOR}
    if rate_limited:
        out.update(RATE_LIMITED)
    out.update(own)
    return dict(sorted(out.items()))


def _query(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _path(name: str, schema: Json, description: str) -> Json:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": description}


PAGE = _query(
    "page",
    {"type": "integer", "minimum": 1, "maximum": PAGE_MAX, "default": 1},
    "The page, from 1 (400 when it is not an integer, below 1 or above the maximum).",
)
PAGE_SIZE = _query(
    "pageSize",
    {"type": "integer", "minimum": 1, "default": PAGE_SIZE_DEFAULT},
    f"Items per page (400 when it is not an integer or below 1). A larger value than {PAGE_SIZE_MAX} "
    f"is not refused: it is lowered to {PAGE_SIZE_MAX} and the response says so in `page_size`.",
)
AFTER = _query(
    "after",
    {"type": "string", "pattern": "^[0-9]{1,19}$"},
    "A stream sequence the list must reflect: the door waits (at most 2 s) until its "
    "view has applied the stream that far (docs/doors/list.md#seeding-the-stream).",
)
FILTERS = [
    _query(
        "q",
        {"type": "string", "maxLength": 200},
        "Only questions whose text contains this, ignoring case (docs/doors/list.md#filters-and-order).",
    ),
    _query(
        "format", {"type": "string", "enum": list(ANSWER_FORMATS)}, "Only questions of this answer format."
    ),
    _query("group", {"type": "string", "maxLength": 200}, "Only questions of this group id."),
    _query("origin", {"type": "string", "maxLength": 200}, "Only questions with this `origin`."),
    _query(
        "sort",
        {"type": "string", "enum": ["group", "newest", "oldest", "deadline"], "default": "group"},
        "The order: `group` (groups by their latest question, the default), `newest`, `oldest` "
        "(created_at) or `deadline` (timeout_at, soonest first).",
    ),
]
PAGING_400 = _error(
    "Paging that is not an integer, below 1, or a page above the maximum; or a request the HTTP "
    "parser cannot read (`invalid HTTP request`). Messages: `page and pageSize must be integers: "
    f"page=<raw> pageSize=<raw>`, `page must be >= 1` (field `page`), `pageSize must be >= 1` (field "
    f"`pageSize`), `page must be <= {PAGE_MAX}` (field `page`).",
    field=True,
)


def _schemas() -> Json:
    timestamp = {"type": "string", "format": "date-time"}
    page_fields: Json = {
        "total": {"type": "integer", "minimum": 0, "description": "Everything this caller may see."},
        "page": {"type": "integer", "minimum": 1, "maximum": PAGE_MAX},
        "page_size": {"type": "integer", "minimum": 1, "maximum": PAGE_SIZE_MAX},
        "next_page": {
            "type": ["integer", "null"],
            "minimum": 2,
            "description": "`page + 1` while `page * page_size < total`, else null.",
        },
    }
    run_fields: Json = {
        "run_id": {"type": "string"},
        "flow": {"type": "string"},
        "identity": {"type": "string"},
        "status": _text(*RUN_STATUSES),
        "generation": {"type": "integer", "minimum": 0},
        "created_at": timestamp,
        "updated_at": timestamp,
        "expiry_at": {**timestamp, "description": "Parked runs only: the current park's earliest deadline."},
    }
    run_summary_keys = ["run_id", "flow", "identity", "status", "generation", "created_at", "updated_at"]

    def when(statuses: list[str], keys: list[str], *, required: bool) -> Json:
        """Keys present exactly for runs in ``statuses`` (absent for the others); with
        ``required=False`` they may be present for those statuses only."""
        absent = {"not": {"anyOf": [{"required": [k]} for k in keys]}}
        out: Json = {"if": {"properties": {"status": {"enum": statuses}}}, "else": absent}
        if required:
            out["then"] = {"required": keys}
        return out

    return {
        "Error": _object(
            {
                "error": {"type": "string", "description": "What went wrong, for a person to read."},
                "field": {"type": "string", "description": "The input field to blame, when one is."},
            },
            ["error"],
            description="Every failure of a JSON door (docs/doors/common.md#envelope-and-errors).",
        ),
        "MediaItem": _object(
            {
                "kind": _text("image", "document", "video", "audio", "link"),
                "url": {"type": "string"},
                "caption": {"type": "string"},
                "filename": {"type": "string"},
            },
            ["kind", "url"],
        ),
        "PendingQuestion": _object(
            {
                "interaction_id": {"type": "string"},
                "group_id": {"type": "string"},
                "question": {"type": "string"},
                "answer_format": _text(*ANSWER_FORMATS),
                "format_payload": {
                    "type": ["object", "null"],
                    "description": "The format's payload; an external question's verifier is removed.",
                },
                "created_at": timestamp,
                "timeout_at": {**timestamp, "description": "A park's `expiry_at`."},
                "sensitive": {"type": "boolean"},
                "server_verified": {
                    "type": "boolean",
                    "const": True,
                    "description": "Only when a verifier is bound.",
                },
                "channel": {"type": "string"},
                "recipient": {"type": "string"},
                "origin": {"type": "string"},
                "audience": {"type": "string"},
                "media": {"type": "array", "items": _schema("MediaItem"), "minItems": 1},
            },
            [
                "interaction_id",
                "group_id",
                "question",
                "answer_format",
                "format_payload",
                "created_at",
                "timeout_at",
                "sensitive",
            ],
            description=(
                "A pending question: a list item, and the data of the stream's `interaction.add` "
                "frame (docs/doors/list.md#the-item). A key that does not apply is absent, never null."
            ),
        ),
        "InteractionPage": _data(
            _object(
                {
                    "items": {
                        "type": "array",
                        "items": _schema("PendingQuestion"),
                        "maxItems": PAGE_SIZE_MAX,
                    },
                    **page_fields,
                    "truncated": {"type": "boolean", "const": False},
                },
                ["items", "total", "page", "page_size", "next_page", "truncated"],
            )
        ),
        "DoneQuestion": _object(
            {
                "interaction_id": {"type": "string"},
                "group_id": {"type": "string"},
                "question": {"type": "string"},
                "answer_format": {"type": "string"},
                "status": {"type": "string", "enum": ["answered", "expired", "removed"]},
                "at": {"type": ["string", "null"], "format": "date-time"},
                "by": {"type": "string"},
                "via": {"type": "string", "enum": ["inbox", "cli", "api", "callback", "expiry"]},
                "answer": {"description": "The answer; absent when sensitive, expired or removed."},
                "sensitive": {"type": "boolean", "const": True},
                "reason": {"type": "string"},
            },
            ["interaction_id", "group_id", "question", "answer_format", "status", "at"],
        ),
        "DonePage": _data(
            _object(
                {
                    "items": {"type": "array", "items": _schema("DoneQuestion"), "maxItems": PAGE_SIZE_MAX},
                    **page_fields,
                },
                ["items", "total", "page", "page_size", "next_page"],
            )
        ),
        "AnswerRequest": {
            "type": "object",
            "required": ["answer"],
            "properties": {
                "answer": {
                    "not": {"type": "null"},
                    "description": (
                        "Any JSON value but null; the question's format decides what is accepted "
                        "(docs/doors/answer.md#answer-validation). An object must not carry the "
                        f"reserved key `{EXPIRY_KEY}`, and no string in it may hold a NUL character."
                    ),
                }
            },
            "additionalProperties": True,
            "description": "Other keys are ignored. A key repeated at any depth is refused (400).",
        },
        "Answered": _data(
            _object(
                {"interaction_id": {"type": "string"}, "status": _text("answered")},
                ["interaction_id", "status"],
            )
        ),
        "AlreadyAnswered": _data(_object({"status": _text("already_answered")}, ["status"])),
        "CallbackPayload": {
            "type": "object",
            "additionalProperties": True,
            "description": (
                "An external question: the whole answer. A channel-delivered question: "
                '`{"answer": <value>}`, validated as at the answer door.'
            ),
        },
        "RunSummary": _object(
            {
                **run_fields,
                "steps": {"type": "integer", "minimum": 0, "description": "Steps recorded so far."},
            },
            [*run_summary_keys, "steps"],
            allOf=[when(["parked"], ["expiry_at"], required=False)],
        ),
        "RunPage": _data(
            _object(
                {
                    "items": {"type": "array", "items": _schema("RunSummary"), "maxItems": PAGE_SIZE_MAX},
                    **page_fields,
                },
                ["items", "total", "page", "page_size", "next_page"],
            )
        ),
        "RunAsk": _object(
            {
                "interaction_id": {"type": "string"},
                "question": {"type": "string"},
                "expiry_at": timestamp,
                "status": _text("pending", "answered", "expired", "removed"),
                "answered_by": {"type": "string"},
                "audience": {"type": "string", "description": "The identity the question is addressed to."},
                "channel": {"type": "string", "description": "The channel that delivers it."},
                "recipient": {"type": "string", "description": "Who the channel delivers it to."},
            },
            ["interaction_id", "question", "expiry_at", "status"],
        ),
        "RunsSummary": _data(
            _object(
                {
                    "counts": _object(
                        {status: {"type": "integer", "minimum": 0} for status in RUN_STATUSES},
                        list(RUN_STATUSES),
                        description="How many runs this caller may see are in each status.",
                    ),
                    "total": {"type": "integer", "minimum": 0, "description": "The sum of the counts."},
                    "flows": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": RUN_FLOWS_MAX,
                        "description": "The flows of the runs this caller may see, sorted.",
                    },
                    "oldest_open": {
                        "oneOf": [
                            {"type": "null"},
                            _object(
                                {
                                    "interaction_id": {"type": "string"},
                                    "run_id": {"type": "string"},
                                    "flow": {"type": "string"},
                                    "question": {"type": "string"},
                                    "created_at": timestamp,
                                    "expiry_at": timestamp,
                                    "audience": {"type": "string"},
                                },
                                ["interaction_id", "run_id", "flow", "question", "created_at", "expiry_at"],
                            ),
                        ],
                        "description": "The oldest pending question one of these runs waits on, or null.",
                    },
                },
                ["counts", "total", "flows", "oldest_open"],
            )
        ),
        "Run": _data(
            _object(
                {
                    **run_fields,
                    "asks": {
                        "type": "array",
                        "items": _schema("RunAsk"),
                        "description": "The current park's questions, in call order.",
                    },
                    "open": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Ids of the park's questions still pending.",
                    },
                    "resume_id": {"type": "string"},
                    "result": {"description": "The flow's return value: any JSON value."},
                    "error": {"type": "string", "description": "Why the run failed."},
                    "steps": {"type": "integer", "minimum": 0, "description": "Steps recorded so far."},
                    "cancelled_by": {"type": "string", "description": "Who cancelled the run."},
                    "retried_by": {"type": "string", "description": "Who retried the run last."},
                    "warning": {
                        "type": "string",
                        "description": "A running run that no live worker serves says so.",
                    },
                },
                [*run_summary_keys, "steps"],
                allOf=[
                    when(["parked"], ["expiry_at"], required=False),
                    when(["parked", "resumed"], ["asks", "open"], required=True),
                    when(["finished"], ["result"], required=True),
                    when(["failed"], ["error"], required=True),
                ],
            )
        ),
        "Cancelled": _data(
            _object(
                {
                    "run_id": {"type": "string"},
                    "status": _text("cancelled"),
                    "was": _text("running", "parked"),
                    "cancelled_by": {"type": "string"},
                },
                ["run_id", "status", "was", "cancelled_by"],
            )
        ),
        "Retried": _data(
            _object(
                {
                    "run_id": {"type": "string"},
                    "status": _text("resumed"),
                    "generation": {"type": "integer", "minimum": 1},
                    "retried_by": {"type": "string"},
                },
                ["run_id", "status", "generation", "retried_by"],
            )
        ),
        "Workers": _data(
            _object(
                {
                    "items": {
                        "type": "array",
                        "items": _object(
                            {
                                "worker_id": {"type": "string"},
                                "identity": {"type": "string"},
                                "host": {"type": ["string", "null"]},
                                "pid": {"type": ["integer", "null"]},
                                "flows": {"type": "array", "items": {"type": "string"}},
                                "concurrency": {"type": ["integer", "null"]},
                                "alive": {"type": "boolean"},
                                "started_at": {"type": "string", "format": "date-time"},
                                "seen_at": {"type": "string", "format": "date-time"},
                            },
                            [
                                "worker_id",
                                "identity",
                                "host",
                                "pid",
                                "flows",
                                "concurrency",
                                "alive",
                                "started_at",
                                "seen_at",
                            ],
                        ),
                    },
                    "alive": {"type": "integer", "minimum": 0},
                },
                ["items", "alive"],
            )
        ),
        "Health": _data(_object({"status": _text("ok")}, ["status"])),
        "Ready": _data(
            _object(
                {
                    "status": _text("ready"),
                    "nats": {"type": "boolean", "const": True},
                    "postgres": {"type": "boolean", "const": True},
                },
                ["status", "nats", "postgres"],
            )
        ),
        "NotReady": _object(
            {
                "error": _text("not ready"),
                "checks": _object(
                    {"nats": {"type": "boolean"}, "postgres": {"type": "boolean"}}, ["nats", "postgres"]
                ),
            },
            ["error", "checks"],
        ),
    }


def _components() -> Json:
    return {
        "securitySchemes": {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": (
                    "A token of `LAYBY_API_TOKENS` (`TOKEN:IDENTITY:ROLE`). Role `operator` sees and "
                    "answers everything; role `user` only what is addressed to its identity, and "
                    "only its own runs (docs/doors/common.md#authentication)."
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
        "schemas": _schemas(),
        "responses": {
            "MalformedRequest": _error(
                "A request the HTTP parser cannot read; the connection then closes.", [MALFORMED]
            ),
            "Unauthorized": _error(
                "No, a malformed, or an unknown bearer token (docs/doors/common.md#authentication). "
                "Checked before anything else, so such a request learns nothing more.",
                ["missing bearer token", "Authorization must be 'Bearer <token>'", "invalid bearer token"],
                headers={"WWW-Authenticate": _header(_text('Bearer realm="layby"'), "The scheme to use.")},
            ),
            "RequestTimeout": _error(
                "The request's head (request line and headers) did not arrive within "
                "`LAYBY_HTTP_HEADER_TIMEOUT_SECONDS`; sent before any door runs, then the "
                "connection closes.",
                ["request header timeout"],
            ),
            "PayloadTooLarge": _error(
                f"A query string, or a body as actually read, longer than "
                f"`INTERACTIONS_CALLBACK_MAX_BODY_BYTES` (default {MAX_BODY_BYTES_DEFAULT}). Never "
                "truncated (docs/doors/common.md#body-size-cap).",
                ["payload too large"],
            ),
            "TooManyRequests": _error(
                "Over a rate limit of this client address and door family; sent before any door "
                "runs, only with `LAYBY_RATE_LIMITS=on` (docs/doors/common.md#rate-limits).",
                ["too many requests"],
                headers={"Retry-After": _ref("headers", "RetryAfter")},
            ),
            "HeaderFieldsTooLarge": _error(
                "More header fields than `LAYBY_HTTP_MAX_HEADERS`, or more header bytes than "
                "`LAYBY_HTTP_MAX_HEADER_BYTES`; sent before any door runs, then the connection closes.",
                ["request header fields too large"],
            ),
            "InternalError": _error(
                "Something unexpected; no stack trace or exception text is ever sent.",
                ["internal server error"],
            ),
            "Unavailable": _error(
                "A dependency (NATS JetStream) is briefly unavailable; retry (the first resolution "
                "recorded wins, so a retry never records twice).",
                ["service temporarily unavailable; retry"],
            ),
        },
    }


def _list_door() -> Json:
    return {
        "get": {
            "operationId": "listInteractions",
            "summary": "One page of pending questions",
            "description": (
                "Pending questions this caller may see, groups by their latest question, then "
                "creation order (docs/doors/list.md)."
            ),
            "tags": ["interactions"],
            "security": BEARER,
            "parameters": [
                PAGE,
                PAGE_SIZE,
                AFTER,
                *FILTERS,
            ],
            "responses": _responses(
                {
                    "200": _ok(
                        "One page.",
                        _schema("InteractionPage"),
                        {
                            "Cache-Control": NO_STORE,
                            "Layby-Stream-Seq": _header(
                                {"type": "string", "pattern": "^[0-9]+$"},
                                "The stream sequence this page and its total reflect.",
                            ),
                        },
                        links={
                            "AnswerTheFirstItem": {
                                "operationId": "answerInteraction",
                                "parameters": {
                                    "interaction_id": "$response.body#/data/items/0/interaction_id"
                                },
                                "description": "Answer the first pending question of the page.",
                            }
                        },
                    ),
                    "400": _error(
                        "Paging as on every paged door (see `page`, `pageSize`), or a filter that is "
                        "too long (over 200 characters), holds a NUL character, or is not one of the "
                        "allowed values (`format`, `sort`); the message names the field and never "
                        "repeats the value.",
                        field=True,
                    ),
                    "401": _ref("responses", "Unauthorized"),
                }
            ),
        }
    }


def _done_door() -> Json:
    return {
        "get": {
            "operationId": "listDoneInteractions",
            "summary": "Recently resolved questions, newest first",
            "description": (
                "What was answered, by whom, when and where (inbox, cli, api, callback, expiry), "
                "and what was removed and why; a sensitive answer is never shown (docs/doors/done.md)."
            ),
            "tags": ["interactions"],
            "security": BEARER,
            "parameters": [PAGE, PAGE_SIZE, AFTER],
            "responses": _responses(
                {
                    "200": _ok("One page.", _schema("DonePage"), {"Cache-Control": NO_STORE}),
                    "400": PAGING_400,
                    "401": _ref("responses", "Unauthorized"),
                }
            ),
        }
    }


def _stream_door() -> Json:
    return {
        "get": {
            "operationId": "streamInteractions",
            "summary": "Live add/answered/removed frames (Server-Sent Events)",
            "description": (
                "Tail only: events appended after the client connected, each frame's `id:` the "
                "JetStream stream sequence of its event (docs/doors/stream.md). The response never ends."
            ),
            "tags": ["interactions"],
            "security": BEARER,
            "parameters": [
                {
                    "name": "Last-Event-ID",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "string"},
                    "description": (
                        "Resume right after this sequence when it lies in the resume window; an "
                        "empty value is absent; anything else starts at the live end."
                    ),
                },
                _query(
                    "last_event_id",
                    {"type": "string"},
                    "The same, for proxies that strip the header; the header wins.",
                ),
            ],
            "responses": _responses(
                {
                    "200": {
                        "description": (
                            "The feed: `interaction.add` frames (data: a PendingQuestion), "
                            "`interaction.answered` and `interaction.removed` frames (data: exactly "
                            "`{interaction_id, group_id}`), and `: keepalive` comments."
                        ),
                        "headers": {
                            "Cache-Control": _header(_text("no-cache"), "Never cached."),
                            "X-Accel-Buffering": _header(_text("no"), "Proxies must not buffer."),
                            "Layby-Stream-Seq": _header(
                                {"type": "string", "pattern": "^[0-9]+$"},
                                "The frames follow this stream sequence (docs/doors/stream.md).",
                            ),
                        },
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "401": _ref("responses", "Unauthorized"),
                    "503": _error(
                        "This door process serves `LAYBY_SSE_MAX_CLIENTS` streams already, or NATS "
                        "did not grant the subscription (docs/doors/stream.md#capacity).",
                        ["too many open streams; retry later", "the stream is unavailable; retry later"],
                        headers={
                            "Retry-After": _header(
                                {"type": "integer", "const": STREAM_RETRY_AFTER}, "Seconds to wait."
                            )
                        },
                    ),
                }
            ),
        }
    }


def _answer_door() -> Json:
    return {
        "post": {
            "operationId": "answerInteraction",
            "summary": "Answer a pending question",
            "description": (
                "Checks, in order: credentials, the body, unknown question (404), already answered "
                "(409), external question (400), audience (403), the answer's format (400); the "
                "first resolution recorded wins (docs/doors/answer.md)."
            ),
            "tags": ["interactions"],
            "security": BEARER,
            "parameters": [
                _path(
                    "interaction_id",
                    {"type": "string", "pattern": UUID4},
                    "A lowercase uuid4; anything else is the same 404 as an unknown question.",
                )
            ],
            "requestBody": {"required": True, "content": {JSON: {"schema": _schema("AnswerRequest")}}},
            "responses": _responses(
                {
                    "200": _ok("Recorded.", _schema("Answered")),
                    "400": _error(
                        "The body (not JSON, nested too deeply, no `answer`, a repeated key, the "
                        "reserved key, a NUL character), an external question, or an answer the "
                        "question's format refuses; or a request the HTTP parser cannot read "
                        "(docs/doors/answer.md#body, #answer-validation).",
                        field=True,
                    ),
                    "401": _ref("responses", "Unauthorized"),
                    "403": _error(
                        "A `user` identity answering a question not addressed to it.",
                        [
                            "restricted identities may answer only interactions addressed to them",
                            "interaction is addressed to another identity",
                        ],
                    ),
                    "404": _error(
                        "Not a lowercase uuid4, unknown, or removed: indistinguishable.",
                        ["Interaction not found"],
                    ),
                    "409": _error(
                        "Already answered (by a person, a callback or a park's expiry).",
                        ["Interaction already answered"],
                    ),
                    "503": _ref("responses", "Unavailable"),
                }
            ),
        }
    }


def _media_door() -> Json:
    return {
        "get": {
            "operationId": "getMedia",
            "summary": "An inline image of a question (public: the id is the capability)",
            "tags": ["interactions"],
            "security": PUBLIC,
            "parameters": [
                _path(
                    "media_id",
                    {"type": "string", "pattern": CAPABILITY},
                    "43 characters of `[A-Za-z0-9_-]`; anything else under the prefix is 400.",
                )
            ],
            "responses": _responses(
                {
                    "200": {
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
                    "400": _error(
                        "An id that is not 43 characters of `[A-Za-z0-9_-]`, decided before any "
                        "lookup; or a request the HTTP parser cannot read.",
                        ["invalid media id", MALFORMED],
                    ),
                    "404": _error("Unknown, or past its retention: the same response.", ["not found"]),
                    "503": _ref("responses", "Unavailable"),
                }
            ),
        }
    }


TICKET = _path(
    "ticket",
    {"type": "string", "pattern": CAPABILITY},
    "The callback ticket (43 characters of `[A-Za-z0-9_-]`); any other value is the uniform 404.",
)
PAGE_HEADERS = {
    "Cache-Control": NO_STORE,
    "X-Content-Type-Options": NOSNIFF,
    "Content-Security-Policy": _header(
        _text(
            "default-src 'none'; style-src 'unsafe-inline'",
            "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
            "connect-src 'self'; form-action 'self'",
        ),
        "The form page's policy adds what its one inline script needs.",
    ),
    "X-Frame-Options": _header(_text("DENY"), "Never framed."),
    "Referrer-Policy": _header(_text("no-referrer"), "The ticket never leaks in a Referer."),
}
TEXT = "text/plain"


def _callback_doors() -> Json:
    return {
        "post": {
            "operationId": "postCallback",
            "summary": "Deliver an external or channel answer (public: the ticket is the capability)",
            "description": (
                "Checks, in order: the size cap (413), the ticket (404), a bound verifier (401 or "
                "500), already answered (200), the payload (400), the claim "
                "(docs/doors/callback.md#post-order-of-checks)."
            ),
            "tags": ["callback"],
            "security": PUBLIC,
            "parameters": [
                TICKET,
                {
                    "name": "answer",
                    "in": "query",
                    "required": False,
                    "style": "form",
                    "explode": True,
                    "schema": {"type": "object", "additionalProperties": {"type": "string"}},
                    "description": (
                        "An external question with an empty body: the query parameters are the "
                        "answer (a repeated key maps to the list of its values). Ignored otherwise."
                    ),
                },
            ],
            "requestBody": {
                "required": False,
                "content": {JSON: {"schema": _schema("CallbackPayload")}},
            },
            "responses": _responses(
                {
                    "200": _ok(
                        "Recorded, or already answered (provider retries are idempotent).",
                        {"oneOf": [_schema("Answered"), _schema("AlreadyAnswered")]},
                        ERROR_HEADERS,
                    ),
                    "400": _error(
                        "The payload: not a JSON object, no `answer` (channel questions), the "
                        "reserved key, a NUL character, an unsigned body for a verifier, or an "
                        "answer the question's schema or format refuses; or a request the HTTP "
                        "parser cannot read (docs/doors/callback.md).",
                        field=True,
                    ),
                    "401": _error(
                        "A bound verifier refused the signature; nothing recorded, the ticket not consumed.",
                        ["webhook verification failed"],
                    ),
                    "404": _error(
                        "The uniform 404: unknown, expired, malformed or dead ticket, or a question "
                        "that was removed (docs/doors/callback.md#uniform-404).",
                        ["not found"],
                    ),
                    "500": _error(
                        "A bound verifier that cannot be checked (logged; nothing recorded), or "
                        "something unexpected.",
                        ["webhook verification error", "internal server error"],
                    ),
                    "503": _ref("responses", "Unavailable"),
                }
            ),
        },
        "get": {
            "operationId": "getCallbackPage",
            "summary": "The page behind a callback link (public, never changes anything)",
            "tags": ["callback"],
            "security": PUBLIC,
            "parameters": [TICKET],
            "responses": _responses(
                {
                    "200": {
                        "description": (
                            "The constant Done, confirm or awaiting page, or the question's form "
                            "(docs/doors/callback.md#the-pages-behind-a-link)."
                        ),
                        "headers": PAGE_HEADERS,
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    },
                    "404": {
                        "description": (
                            "The uniform 404, in plain text: unknown, expired, malformed or dead "
                            "ticket, or a verifier-bound question."
                        ),
                        "headers": ERROR_HEADERS,
                        "content": {TEXT: {"schema": _text("Not Found")}},
                    },
                    "500": {
                        "description": (
                            "A stored form schema the page cannot render (plain text, logged), or "
                            "something unexpected (the JSON envelope)."
                        ),
                        "headers": ERROR_HEADERS,
                        "content": {
                            TEXT: {"schema": _text("Internal Server Error")},
                            JSON: {"schema": _object({"error": _text("internal server error")}, ["error"])},
                        },
                    },
                    "503": _ref("responses", "Unavailable"),
                }
            ),
        },
    }


FLOW = _query("flow", {"type": "string"}, "Only runs of this flow (the exact name).")


def _runs_doors() -> dict[str, Json]:
    return {
        "/api/runs": {
            "get": {
                "operationId": "listRuns",
                "summary": "Runs, most recently active first",
                "tags": ["runs"],
                "security": BEARER,
                "parameters": [
                    _query("status", _text(*RUN_STATUSES), "Only runs in this status."),
                    FLOW,
                    PAGE,
                    PAGE_SIZE,
                ],
                "responses": _responses(
                    {
                        "200": _ok(
                            "One page of runs this caller may see.",
                            _schema("RunPage"),
                            links={
                                "ShowTheFirstRun": {
                                    "operationId": "getRun",
                                    "parameters": {"run_id": "$response.body#/data/items/0/run_id"},
                                    "description": "The first run of the page.",
                                }
                            },
                        ),
                        "400": _error(
                            f"{PAGING_400['description']} A `status` that is not a run status: "
                            f"`status must be one of {', '.join(RUN_STATUSES)}` (field `status`). A "
                            "`flow` holding a NUL character: `flow must not contain NUL characters` "
                            "(field `flow`).",
                            field=True,
                        ),
                        "401": _ref("responses", "Unauthorized"),
                    }
                ),
            }
        },
        "/api/runs/summary": {
            "get": {
                "operationId": "summarizeRuns",
                "summary": "How many runs are in each status, their flows, the oldest open question",
                "tags": ["runs"],
                "security": BEARER,
                "parameters": [FLOW],
                "responses": _responses(
                    {
                        "400": _error(
                            "A `flow` holding a NUL character: `flow must not contain NUL characters` "
                            "(field `flow`); or a request the HTTP parser cannot read.",
                            field=True,
                        ),
                        "200": _ok(
                            "One snapshot: the counts and the oldest question for `flow` when given; "
                            "a `user` token counts its own identity's runs only.",
                            _schema("RunsSummary"),
                        ),
                        "401": _ref("responses", "Unauthorized"),
                    }
                ),
            }
        },
        "/api/runs/{run_id}": {
            "get": {
                "operationId": "getRun",
                "summary": "One run's status",
                "tags": ["runs"],
                "security": BEARER,
                "parameters": [
                    _path(
                        "run_id",
                        {"type": "string", "pattern": UUID4},
                        "A lowercase uuid4; anything else is the same 404 as an unknown run.",
                    )
                ],
                "responses": _responses(
                    {
                        "200": _ok(
                            "The run; keys that do not apply to its status are absent.", _schema("Run")
                        ),
                        "401": _ref("responses", "Unauthorized"),
                        "404": _error(
                            "Not a lowercase uuid4, unknown, or another identity's run (for a `user`).",
                            ["Run not found"],
                        ),
                    }
                ),
            }
        },
        "/api/runs/{run_id}/cancel": {"post": _run_operation("cancel")},
        "/api/runs/{run_id}/retry": {"post": _run_operation("retry")},
        "/api/workers": {
            "get": {
                "operationId": "listWorkers",
                "summary": "Workers seen in the last hour: alive or not, and the flows they serve",
                "tags": ["runs"],
                "security": BEARER,
                "responses": _responses(
                    {
                        "200": _ok(
                            "A `user` token sees its own identity's workers only.", _schema("Workers")
                        ),
                        "401": _ref("responses", "Unauthorized"),
                    }
                ),
            }
        },
    }


def _run_operation(action: str) -> Json:
    """``POST /api/runs/{run_id}/cancel`` or ``/retry`` (docs/doors/runs.md#cancel)."""
    cancel = action == "cancel"
    return {
        "operationId": f"{action}Run",
        "summary": "Cancel a running or parked run" if cancel else "Retry a failed run",
        "tags": ["runs"],
        "security": BEARER,
        "parameters": [
            _path("run_id", {"type": "string", "pattern": UUID4}, "A lowercase uuid4; anything else is 404.")
        ],
        "responses": _responses(
            {
                "200": _ok(
                    "A parked run's pending questions have left the inbox."
                    if cancel
                    else "The run executes again from its last recorded step or park.",
                    _schema("Cancelled" if cancel else "Retried"),
                ),
                "401": _ref("responses", "Unauthorized"),
                "404": _error(
                    "Not a lowercase uuid4, unknown, or another identity's run (for a `user`).",
                    ["Run not found"],
                ),
                "409": _error(
                    "The run is in a status this operation does not apply to: "
                    + (
                        "`the run is <status>; only a running or parked run can be cancelled`."
                        if cancel
                        else "`the run is <status>; only a failed run can be retried`."
                    )
                ),
                "503": _ref("responses", "Unavailable"),
            }
        ),
    }


def _health() -> dict[str, Json]:
    return {
        "/healthz": {
            "get": {
                "operationId": "healthz",
                "summary": "The process is alive",
                "tags": ["health"],
                "security": PUBLIC,
                "responses": _responses({"200": _ok("Alive.", _schema("Health"))}, rate_limited=False),
            }
        },
        "/readyz": {
            "get": {
                "operationId": "readyz",
                "summary": "NATS JetStream and PostgreSQL answer",
                "tags": ["health"],
                "security": PUBLIC,
                "responses": _responses(
                    {
                        "200": _ok("Both answer.", _schema("Ready")),
                        "503": {
                            "description": "One of them does not answer; `checks` says which.",
                            "headers": {**ERROR_HEADERS, "Retry-After": _ref("headers", "RetryAfter")},
                            "content": {JSON: {"schema": _schema("NotReady")}},
                        },
                    },
                    rate_limited=False,
                ),
            }
        },
        "/schema/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "tags": ["health"],
                "security": PUBLIC,
                "responses": _responses(
                    {
                        "200": _ok(
                            "The OpenAPI 3.1 document, written by hand.",
                            {"type": "object", "required": ["openapi", "info", "paths", "components"]},
                            {"Cache-Control": _header(_text("no-cache"), "Revalidated on every use.")},
                        )
                    }
                ),
            }
        },
    }


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every door but the inbox page and its static files."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Layby",
            "version": "0.1.0",
            "summary": "Human-in-the-loop questions for AI agents: the HTTP doors.",
            "description": (
                'Success is `{"data": ...}`; failure is `{"error": "<message>"}` plus `field` when '
                "one input field is to blame (docs/doors/common.md). Every JSON error carries "
                "`Cache-Control: no-store` and `X-Content-Type-Options: nosniff`."
            ),
        },
        "tags": [
            {"name": "interactions", "description": "Pending questions: list, stream, answer, media."},
            {"name": "callback", "description": "Public doors of external and channel-delivered questions."},
            {"name": "runs", "description": "The status of runs and their parks."},
            {"name": "health", "description": "Probes and this document."},
        ],
        "paths": {
            "/api/interactions": _list_door(),
            "/api/interactions/stream": _stream_door(),
            "/api/interactions/done": _done_door(),
            "/api/interactions/{interaction_id}/answer": _answer_door(),
            "/api/interactions/media/{media_id}": _media_door(),
            "/api/interactions/callback/{ticket}": _callback_doors(),
            **_runs_doors(),
            **_health(),
        },
        "components": _components(),
    }
