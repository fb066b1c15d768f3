"""The answer formats on the wire: one tagged Struct per format, one union.

An ``InteractionAsked`` event (v1) carries its format as ``answer_format`` (the tag) and
``format_payload`` (a JSON object or null). ``payload_of`` decodes that pair into the typed union
— the one decoder every reader uses — and ``wire_payload`` turns a typed payload back into the
v1 object, so events already in the streams stay readable and new ones are written exactly as
before (docs/asking.md#answer-formats).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec


class TextPayload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="text"):
    """Free text; ``options`` are suggested replies (they constrain nothing)."""

    options: list[str] | None = None


class ConfirmPayload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="confirm"):
    """Yes or no: the answer is a boolean."""


class SelectPayload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="select"):
    """One of ``options``."""

    options: list[str] = []


class FormPayload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="form"):
    """A JSON object matching ``schema``; ``data`` (prefill values, per-send choices) and
    ``pages`` (field groups) shape how it is shown."""

    schema: dict[str, Any] = {}
    data: dict[str, Any] | None = None
    pages: list[dict[str, Any]] | None = None


class ExternalPayload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="external"):
    """An action on an outside surface, answered through its callback URL: ``url`` is the link a
    person visits (absent for a channel question), ``schema`` checks the callback's JSON, and
    ``verifier`` the provider's signature (it never leaves the server)."""

    url: str | None = None
    schema: dict[str, Any] | None = None
    verifier: dict[str, Any] | None = None


class ProposedAction(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The action a review question proposes: what would run (``name``), with which
    ``arguments`` (a JSON object), the JSON ``schema`` an edit of them must match, and a
    ``description`` shown beside them."""

    name: str
    arguments: dict[str, Any] = {}
    schema: dict[str, Any] | None = None
    description: str | None = None


Decision = Literal["accept", "edit", "reject", "respond"]
DECISIONS: tuple[str, ...] = get_args(Decision)
"""What a reviewer may decide, in the documented order (docs/review.md#decisions)."""


class ReviewPayload(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="review"):
    """A proposed action to accept, edit, reject or respond to (``decisions``: the allowed ones);
    an accept or an edit names the hash of the arguments it was decided on
    (docs/review.md)."""

    action: ProposedAction
    decisions: list[Decision] = msgspec.field(default_factory=lambda: ["accept", "edit", "reject"])


FormatPayload = TextPayload | ConfirmPayload | SelectPayload | FormPayload | ExternalPayload | ReviewPayload
FORMAT_NAMES: tuple[str, ...] = tuple(str(member.__struct_config__.tag) for member in get_args(FormatPayload))
"""Every answer format's name, in the documented order: the union's tags (the one list)."""


def payload_of(answer_format: str, format_payload: dict[str, Any] | None) -> FormatPayload:
    """The typed payload of a recorded question (v1 events: a name and a JSON object).

    Raises ``msgspec.ValidationError`` for an unknown format or a payload of the wrong shape.
    """
    typed: FormatPayload = msgspec.convert({**(format_payload or {}), "type": answer_format}, FormatPayload)
    return typed


def wire_payload(payload: FormatPayload) -> dict[str, Any] | None:
    """The v1 ``format_payload`` object of a typed payload (None when it holds nothing)."""
    raw: dict[str, Any] = msgspec.to_builtins(payload)
    raw.pop("type", None)
    return raw or None
