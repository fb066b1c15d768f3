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

from layby_contracts.http import (
    AnswerRequest,
    AskRequest,
    Error,
    InboundMessage,
    NotifyRequest,
    StartRunRequest,
)
from layby_services.door.openapi.components import (
    BEFORE_ANY_DOOR,
    CAPABILITY,
    COMPONENTS,
    ERROR_HEADERS,
    ERROR_SCHEMA,
    INFO,
    JSON,
    TAGS,
    UUID4,
    Json,
    ref,
)
from layby_services.door.openapi.operations import Operation, operations

__all__ = ["CAPABILITY", "UUID4", "document", "finish", "refusal"]


@cache
def _closed_error(messages: tuple[str, ...], field: bool, name: str | None) -> type[msgspec.Struct]:
    """The error envelope whose ``error`` is exactly one of ``messages`` (a Literal), named after
    its first message unless ``name`` is given."""
    words = re.findall(r"[a-z]+", messages[0].lower())
    name = name or "".join(w.capitalize() for w in words[:5]) + ("Field" if field else "")
    fields: list[Any] = [("error", cast(Any, Literal)[messages])]
    if field:
        fields.append(("field", str | msgspec.UnsetType, msgspec.UNSET))
    return msgspec.defstruct(
        name, fields, kw_only=True, frozen=True, forbid_unknown_fields=True, module="layby.refusals"
    )


def refusal(description: str, *messages: str, field: bool = False, name: str | None = None) -> ResponseSpec:
    """A documented refusal for a handler's ``responses``: the error envelope, its ``error`` pinned
    to ``messages`` (the constants the door raises) when the door has a closed set of them, and
    ``field`` when one input field may be blamed; ``name`` names its schema."""
    container = _closed_error(messages, field, name) if messages else Error
    return ResponseSpec(container, description=description, generate_examples=False)


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
        out["429"] = ref("responses", "TooManyRequests")
    if own.security:
        out["401"] = ref("responses", "Unauthorized")
    for status, declared in generated.items():
        schema = declared.get("content", {}).get(JSON, {}).get("schema", {})
        if status == "400" and "$ref" not in schema:
            continue  # the framework's own 400, never sent: a parameter refusal is the door's envelope
        response = {k: v for k, v in declared.items() if k != "headers"}
        if status.startswith(("4", "5")):
            response["headers"] = ERROR_HEADERS
        out[status] = response
    created = "201" in out  # a door that records something new (an ask, a run) answers 201
    success = "201" if created else "200"
    ok = dict(own.ok or out[success])
    if created:
        ok["description"] = "Created."
    if own.ok_headers:
        ok["headers"] = own.ok_headers
    if own.links:
        ok["links"] = own.links
    out[success] = ok
    for status, response in own.responses.items():
        out[status] = {**out[status], **response} if status in out and "$ref" not in out[status] else response
    return dict(sorted(out.items()))


def finish(generated: Json) -> Json:
    """The served document: Litestar's, from the handlers, with the hand-written parts."""
    table = operations()
    paths: Json = {}
    for path, item in generated["paths"].items():
        for method, operation in item.items():
            own = table[(path, method)]
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
    _, requests = msgspec.json.schema_components(
        [AnswerRequest, InboundMessage, NotifyRequest, AskRequest, StartRunRequest],
        ref_template="#/components/schemas/{name}",
    )
    schemas.update(requests)
    # The save door's body is the definition the responses show, closed: an unknown key is refused.
    schemas["DoorSpecRequest"] = {
        **schemas["DoorSpec"],
        "title": "DoorSpecRequest",
        "additionalProperties": False,
        "description": "A door definition as `PUT /api/doors/{name}` takes it "
        "(docs/doors/doors.md#the-definition).",
    }
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
