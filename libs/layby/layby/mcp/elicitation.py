"""MCP elicitation answered by people (docs/mcp-elicitation.md).

``elicitation_handler(...)`` returns the callback an MCP ``ClientSession`` installs as its
``elicitation_callback``. Each form-mode ``elicitation/create`` becomes a Layby ``form`` question:
the request's message is the question, its flat ``requestedSchema`` is mapped onto the channel
form subset (docs/asking.md#channel-form-subset) before anything is asked, and the person's
answer comes back as ``accept`` (the values, typed as the request declared them), ``decline``
(the person ticked the decline box) or ``cancel`` (the deadline, or the question was removed).
A URL-mode elicitation becomes a ``confirm`` question showing the URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

try:
    from mcp.client.session import ClientRequestContext
    from mcp.types import (
        INTERNAL_ERROR,
        INVALID_PARAMS,
        ElicitRequestFormParams,
        ElicitRequestParams,
        ElicitRequestURLParams,
        ElicitResult,
        ErrorData,
    )
except ImportError as exc:  # pragma: no cover - the extra is part of the test install
    raise ImportError(
        "layby.mcp needs the MCP SDK: pip install 'layby[mcp]' (or 'layby-server[mcp]')"
    ) from exc

from layby.sdk import Client, connect
from layby.settings import ClientSettings
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.errors import BadInput, InteractionTimeoutError, LaybyError

DECLINE_FIELD = "layby_decline"
"""The checkbox every elicitation form carries: ticked, the answer is ``decline``
(docs/mcp-elicitation.md#accept-decline-cancel)."""

DECLINE_PROPERTY: dict[str, Any] = {
    "type": "boolean",
    "title": "Decline this request",
    "description": "Tick to refuse: nothing you fill in is sent, and the other fields may stay empty.",
    "default": False,
}

# The keywords of MCP's restricted property schemas that carry over unchanged
# (docs/mcp-elicitation.md#schema-mapping).
_KEPT: dict[str, tuple[str, ...]] = {
    "string": ("title", "description", "minLength", "maxLength", "format", "pattern"),
    "integer": ("title", "description", "minimum", "maximum"),
    "number": ("title", "description", "minimum", "maximum"),
    "boolean": ("title", "description"),
}

ElicitationCallback = Callable[
    [ClientRequestContext, ElicitRequestParams], Awaitable[ElicitResult | ErrorData]
]


class OutsideSubset(ValueError):
    """A requested schema Layby cannot render; ``field`` names the offending part."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


def map_requested_schema(requested: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Layby form schema and its ``data`` (``values`` prefill, ``options`` labels) for an MCP
    ``requestedSchema``; raises ``OutsideSubset`` naming the property that does not fit."""
    if not isinstance(requested, dict) or requested.get("type") != "object":
        raise OutsideSubset('requestedSchema must be {"type": "object"} at its root', field="requestedSchema")
    props = requested.get("properties")
    if not isinstance(props, dict) or not props:
        raise OutsideSubset(
            "requestedSchema needs a non-empty properties map", field="requestedSchema.properties"
        )
    if DECLINE_FIELD in props:
        raise OutsideSubset(
            f"requestedSchema.properties.{DECLINE_FIELD}: the name is reserved for the decline box",
            field=f"requestedSchema.properties.{DECLINE_FIELD}",
        )
    properties: dict[str, Any] = {}
    values: dict[str, Any] = {}
    options: dict[str, list[dict[str, str]]] = {}
    for name, prop in props.items():
        where = f"requestedSchema.properties.{name}"
        mapped, labels = _map_property(where, prop)
        properties[name] = mapped
        if "default" in prop:
            values[name] = prop["default"]
        if labels is not None and any("label" in choice for choice in labels):
            options[name] = labels
    required = requested.get("required") or []
    if not isinstance(required, list) or not all(isinstance(r, str) and r in props for r in required):
        raise OutsideSubset(
            "requestedSchema.required must list declared property names", field="requestedSchema.required"
        )
    properties[DECLINE_FIELD] = dict(DECLINE_PROPERTY)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        # Required unless declined: a refusal must not need the form filled in.
        schema["if"] = {"properties": {DECLINE_FIELD: {"const": True}}, "required": [DECLINE_FIELD]}
        schema["else"] = {"required": list(required)}
    data: dict[str, Any] = {}
    if values:
        data["values"] = values
    if options:
        data["options"] = options
    return schema, data


def _map_property(where: str, prop: object) -> tuple[dict[str, Any], list[dict[str, str]] | None]:
    if not isinstance(prop, dict):
        raise OutsideSubset(f"{where} must be a schema object", field=where)
    kind = prop.get("type")
    if kind not in _KEPT:
        raise OutsideSubset(
            f"{where}: type {kind!r} cannot be asked; a property must be a string, boolean, integer "
            "or number (nested objects and arrays are outside the form subset)",
            field=where,
        )
    mapped: dict[str, Any] = {"type": kind}
    mapped.update({k: prop[k] for k in _KEPT[kind] if k in prop})
    labels: list[dict[str, str]] | None = None
    if kind == "string" and ("enum" in prop or "oneOf" in prop):
        labels = _enum_labels(where, prop)
        mapped["enum"] = [label["value"] for label in labels]
    elif "enum" in prop or "oneOf" in prop or "anyOf" in prop:
        raise OutsideSubset(f"{where}: a choice list is allowed only on a string property", field=where)
    return mapped, labels


def _enum_labels(where: str, prop: dict[str, Any]) -> list[dict[str, str]]:
    """``enum`` (with legacy ``enumNames``) or ``oneOf`` of ``{const, title}``, as value/label pairs."""
    if "oneOf" in prop:
        return _one_of_labels(where, prop["oneOf"])
    return _enum_names_labels(where, prop["enum"], prop.get("enumNames"))


def _labelled(value: str, label: object) -> dict[str, str]:
    """A value/label pair; a missing or blank label leaves the value alone."""
    return {"value": value, "label": label} if isinstance(label, str) and label.strip() else {"value": value}


def _one_of_labels(where: str, choices: object) -> list[dict[str, str]]:
    if not isinstance(choices, list) or not choices:
        raise OutsideSubset(f"{where}.oneOf must be a non-empty list", field=f"{where}.oneOf")
    out: list[dict[str, str]] = []
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict) or not isinstance(choice.get("const"), str):
            raise OutsideSubset(
                f"{where}.oneOf[{i}] must be {{const, title}} with a string const", field=f"{where}.oneOf"
            )
        out.append(_labelled(choice["const"], choice.get("title")))
    return out


def _enum_names_labels(where: str, enum: object, names: object) -> list[dict[str, str]]:
    if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
        raise OutsideSubset(f"{where}.enum must be a non-empty list of strings", field=f"{where}.enum")
    if names is None:
        return [{"value": v} for v in enum]
    if not isinstance(names, list) or len(names) != len(enum) or not all(isinstance(n, str) for n in names):
        raise OutsideSubset(
            f"{where}.enumNames must be strings, one per enum value", field=f"{where}.enumNames"
        )
    return [_labelled(v, n) for v, n in zip(enum, names, strict=True)]


def content_from_answer(requested: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The form's values converted back to the types the request declared; the decline box and
    empty values dropped."""
    content: dict[str, Any] = {}
    for name, prop in requested["properties"].items():
        value = answer.get(name)
        if value is None:
            continue
        if prop.get("type") == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)  # a form page may post 3.0 for an integer field
        content[name] = value
    return content


class ElicitationHandler:
    """The callback ``elicitation_handler`` returns: call it as MCP does; ``await
    handler.aclose()`` (or ``async with handler``) closes the connection it opened from
    ``ClientSettings``, if any (a ``Client`` passed in stays the caller's to close)."""

    def __init__(
        self,
        client: Client | ClientSettings | None,
        address: dict[str, Any],
        on_timeout: Literal["cancel", "decline"],
    ) -> None:
        self._client = client
        self._address = address
        self._on_timeout = on_timeout
        self._owned: Client | None = None
        self._connecting = asyncio.Lock()  # concurrent elicitations share one connection

    async def aclose(self) -> None:
        owned, self._owned = self._owned, None
        if owned is not None:
            await owned.close()

    async def __aenter__(self) -> ElicitationHandler:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        try:
            if isinstance(params, ElicitRequestURLParams):
                return await self._url(params)
            return await self._form(params)
        except InteractionTimeoutError:
            return ElicitResult(action=self._on_timeout)
        except OutsideSubset as exc:
            return ErrorData(code=INVALID_PARAMS, message=str(exc), data={"field": exc.field})
        except BadInput as exc:
            return ErrorData(code=INVALID_PARAMS, message=str(exc), data={"field": exc.field})
        except (LaybyError, ChannelDeliveryError) as exc:
            return ErrorData(code=INTERNAL_ERROR, message=f"Layby could not ask: {exc}")

    async def _ask(self, question: str, **kwargs: Any) -> Any:
        # mode: the MCP server waits on the request, so a run never parks here.
        args = {**self._address, "mode": "sync", **kwargs}
        if isinstance(self._client, Client):
            return await self._client.ask_user(question, **args)
        if isinstance(self._client, ClientSettings):
            async with self._connecting:
                if self._owned is None:
                    self._owned = await connect(settings=self._client)
            return await self._owned.ask_user(question, **args)
        from layby.sdk import ask_user

        return await ask_user(question, **args)

    async def _form(self, params: ElicitRequestFormParams) -> ElicitResult:
        requested = params.requested_schema
        schema, data = map_requested_schema(requested)
        answer = await self._ask(params.message, answer_format="form", schema=schema, data=data or None)
        if not isinstance(answer, dict):
            raise LaybyError("the form answer is not an object")
        if answer.get(DECLINE_FIELD) is True:
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=content_from_answer(requested, answer))

    async def _url(self, params: ElicitRequestURLParams) -> ElicitResult:
        agreed = await self._ask(f"{params.message}\n\n{params.url}", answer_format="confirm")
        return ElicitResult(action="accept" if agreed is True else "decline")


def elicitation_handler(
    client: Client | ClientSettings | None = None,
    *,
    audience: str | None = None,
    channel: str | list[str] | None = None,
    recipient: str | dict[str, str] | None = None,
    timeout: float | None = None,
    on_timeout: Literal["cancel", "decline"] = "cancel",
) -> ElicitationHandler:
    """An ``elicitation_callback`` for ``mcp.ClientSession`` that asks people through Layby.

    ``client``: a ``layby.Client``, the ``ClientSettings`` to connect with on first use (closed by
    ``await handler.aclose()``), or ``None`` for the ambient connection (``LAYBY_NATS_URL``/
    ``LAYBY_TOKEN``, or the run's own). ``audience``, ``channel``, ``recipient`` and ``timeout``
    address the question as ``ask_user`` does; ``on_timeout`` is what the deadline answers
    (``cancel``, or ``decline``).
    """
    if on_timeout not in ("cancel", "decline"):
        raise BadInput("on_timeout must be 'cancel' or 'decline'", field="on_timeout")
    address = {"audience": audience, "channel": channel, "recipient": recipient, "timeout": timeout}
    return ElicitationHandler(client, address, on_timeout)
