"""Reading JSON bodies at the doors: one parser, strict about what JSON leaves open, and the one
way a door turns its body into the Struct it takes (``decode_struct``; handlers receive it as
their ``payload`` dependency, deps.json_body).

JSON allows an object to repeat a key and most parsers keep the last one silently; a body whose
meaning depends on which copy wins is refused instead (400 ``the JSON body repeats a key``; the
key itself is not echoed: no door reflects its input), so what the door checks is what it
records (docs/doors/common.md#envelope-and-errors).
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

import msgspec

from layby_contracts.errors import BadInput
from layby_domain.notify import field_of

S = TypeVar("S", bound=msgspec.Struct)
INVALID_JSON = "invalid JSON body"
NOT_AN_OBJECT = "body must be a JSON object"
TOO_DEEP = "body is nested too deeply"
_UNKNOWN = re.compile(r"unknown field `([^`]*)`")


class DuplicateKey(ValueError):
    """An object repeats a key."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey
        out[key] = value
    return out


REPEATED_KEY = "the JSON body repeats a key"


def decode_body(raw: bytes, *, invalid: str = INVALID_JSON, too_deep: str = TOO_DEEP) -> Any:
    """The JSON value of ``raw``, or ``BadInput``: ``invalid`` for a body that is not JSON,
    ``too_deep`` for one nested past the parser's limit, ``REPEATED_KEY`` for a repeated key.

    msgspec parses first (fast, and the authority on what is valid JSON); a second pass with the
    standard parser looks for repeated keys only when the body has more than one member.
    """
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise BadInput(invalid) from None
    except RecursionError:
        raise BadInput(too_deep) from None
    if raw.count(b":") > 1:
        try:
            json.loads(raw, object_pairs_hook=_pairs)
        except DuplicateKey:
            raise BadInput(REPEATED_KEY) from None
        except (ValueError, RecursionError):
            pass  # msgspec accepted it: the value stands (the two parsers differ only at extremes)
    return value


def decode_object(raw: bytes, *, invalid: str = INVALID_JSON, too_deep: str = TOO_DEEP) -> dict[str, Any]:
    """The body's JSON object; anything else is ``NOT_AN_OBJECT`` (400)."""
    value = decode_body(raw, invalid=invalid, too_deep=too_deep)
    if not isinstance(value, dict):
        raise BadInput(NOT_AN_OBJECT)
    return value


def field_named(exc: msgspec.ValidationError) -> str | None:
    """The field a decoding error blames: the wrong one, the missing one, or the unknown key."""
    unknown = _UNKNOWN.search(str(exc))
    return unknown.group(1) if unknown is not None else field_of(exc)


def decode_struct(raw: bytes, into: type[S], *, name_unknown: bool = True) -> S:
    """The body as ``into``: a JSON object of known keys with the right types; a refusal is
    ``invalid body: <msgspec's reason>`` naming the field. ``name_unknown``: an unknown key is
    the field to blame (the notification door, whose tests pin it, names none)."""
    body = decode_object(raw)
    try:
        return msgspec.convert(body, into)
    except msgspec.ValidationError as exc:
        field = field_named(exc) if name_unknown else field_of(exc)
        raise BadInput(f"invalid body: {exc}", field=field) from None
