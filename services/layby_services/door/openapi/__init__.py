"""The doors' OpenAPI document (docs/doors/common.md#the-openapi-document).

Litestar generates it from the route handlers: their paths, typed parameters, the Structs they
return (``layby_contracts.http``), and what each declares in its decorator — ``operation_id``,
``summary``, ``description``, ``tags``, ``security`` (the authenticated doors' router), its
documented refusals (``responses={...: refusal(...)}``) and, through ``operation_class=documented(...)``,
what a decorator has no argument for: the body the door reads itself, a response that is not
JSON (the streams, the callback pages, the media bytes), the headers it sets and its links.
``finish`` adds what no handler can declare, the same for every operation: the answers sent
before any handler runs (components.py).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, ClassVar, Literal, cast

import msgspec
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import Operation

from layby_contracts.http import Error, InboundMessage
from layby_services.door.openapi.components import (
    BEARER,
    BEFORE_ANY_DOOR,
    CAPABILITY,
    COMPONENTS,
    ERROR_HEADERS,
    JSON,
    OPENAPI_OPERATION,
    OPENAPI_PATH,
    UUID4,
    Json,
    ref,
)
from layby_services.door.ratelimit import family_of

__all__ = ["BEARER", "CAPABILITY", "UUID4", "DoorOperation", "document", "documented", "finish", "refusal"]

_BODIES: dict[str, type[msgspec.Struct]] = {"Error": Error, "InboundMessage": InboundMessage}
"""The Structs whose schemas are msgspec's, by name: the bodies the doors read themselves, the SSE
frames' InboundMessage, and the error envelope (closed, which Litestar's schema does not say)."""


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


def _parameter(parameter: Json) -> Json:
    """A parameter as the wire has it: a path parameter is one plain segment (the media door's id
    is typed as a path only so that everything under its prefix reaches it); a query or header
    parameter is a string, left out when absent, never ``null``."""
    schema = {k: v for k, v in parameter["schema"].items() if k != "oneOf"}
    if parameter["in"] == "path":
        schema.pop("format", None)
    for arm in parameter["schema"].get("oneOf", []):
        schema = schema if arm == {"type": "null"} else {**arm, **schema}
    return {**parameter, "schema": schema}


class DoorOperation(Operation):
    """Every door's operation: Litestar's, with the door's conventions — the refusals in the
    error envelope with its headers, ``Created.`` for a 201, no framework 400 (a parameter's
    refusal is the door's envelope), no ``null`` in a query parameter — and what its handler
    adds through ``documented``."""

    extras: ClassVar[Json] = {}

    def to_schema(self) -> dict[str, Any]:
        generated = super().to_schema()
        own = self.extras
        parameters = [_parameter(p) for p in generated.get("parameters", [])] + own.get("parameters", [])
        body = own.get("body")
        if isinstance(body, type):
            _BODIES[body.__name__] = body
            body = {"required": True, "content": {JSON: {"schema": ref("schemas", body.__name__)}}}
        return {
            **{k: generated[k] for k in ("operationId", "summary", "description", "tags") if k in generated},
            "security": generated.get("security", []),
            **({"parameters": parameters} if parameters else {}),
            **({"requestBody": body} if body else {}),
            "responses": self._responses(generated["responses"], own),
        }

    @staticmethod
    def _responses(generated: Json, own: Json) -> Json:
        out: Json = {}
        for status, declared in generated.items():
            schema = declared.get("content", {}).get(JSON, {}).get("schema", {})
            if status == "400" and "$ref" not in schema:
                continue  # the framework's own 400, never sent
            response = {k: v for k, v in declared.items() if k != "headers"}
            if status.startswith(("4", "5")):
                response["headers"] = ERROR_HEADERS
            out[status] = response
        success = next((s for s in ("201", "204") if s in out), "200")
        ok = dict(own.get("ok") or out[success])
        if success == "201":
            ok["description"] = "Created."
        if success == "204":
            ok = {"description": "No Content."}
        for key in ("headers", "links"):
            if key in own:
                ok[key] = own[key]
        out[success] = ok
        for status, response in own.get("responses", {}).items():
            merge = status in out and "$ref" not in response
            out[status] = {**out[status], **response} if merge else response
        return out


def documented(**extras: Any) -> type[Operation]:
    """``operation_class`` for a handler whose operation says more than its decorator can:
    ``body`` (a Struct, or a request body object) the door reads itself; ``ok``, the success
    response when it is not JSON; its ``headers`` and ``links``; ``responses`` merged over the
    generated ones; more ``parameters``."""
    return type("Documented", (DoorOperation,), {"extras": extras})


def _finished(path: str, operation: Json) -> Json:
    """What every operation may answer before its handler runs, as the door declares none of it."""
    responses = dict(operation["responses"])
    for status, response in BEFORE_ANY_DOOR.items():
        responses.setdefault(status, response)
    if operation["security"]:
        responses.setdefault("401", ref("responses", "Unauthorized"))
    if family_of(path) is not None:
        responses.setdefault("429", ref("responses", "TooManyRequests"))
    return {**operation, "responses": dict(sorted(responses.items()))}


def _whole_numbers(value: Any) -> Any:
    """Whole-number limits as integers."""
    if isinstance(value, dict):
        out = {k: _whole_numbers(v) for k, v in value.items()}
        for key in ("minimum", "maximum"):
            if isinstance(out.get(key), float) and out[key].is_integer():
                out[key] = int(out[key])
        return out
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def finish(generated: Json) -> Json:
    """The served document: Litestar's, from the handlers, with what is the same for every
    operation (``_finished``) and the shared components."""
    paths = {
        path: {
            method: _finished(path, OPENAPI_OPERATION if path == OPENAPI_PATH else operation)
            for method, operation in item.items()
        }
        for path, item in generated["paths"].items()
    }
    generated_components = generated["components"]
    _, bodies = msgspec.json.schema_components(
        [_BODIES[name] for name in sorted(_BODIES)], ref_template="#/components/schemas/{name}"
    )
    schemas = {**generated_components["schemas"], **bodies}
    # The save door's body is the definition the responses show, closed: an unknown key is refused.
    schemas["DoorSpecRequest"] = {
        **schemas["DoorSpec"],
        "title": "DoorSpecRequest",
        "additionalProperties": False,
        "description": "A door definition as `PUT /api/doors/{name}` takes it "
        "(docs/doors/doors.md#the-definition).",
    }
    del schemas["Error"]["title"]
    components = {**COMPONENTS, "securitySchemes": generated_components["securitySchemes"]}
    served: Json = _whole_numbers(
        {
            **{key: generated[key] for key in ("openapi", "info", "tags")},
            "paths": paths,
            "components": {**components, "schemas": dict(sorted(schemas.items()))},
        }
    )
    return served


def document() -> Json:
    """The served document: the one the door's application generates."""
    from layby_server.settings import load_settings
    from layby_services.door.app import create_app

    return finish(create_app(load_settings({})).openapi_schema.to_schema())
