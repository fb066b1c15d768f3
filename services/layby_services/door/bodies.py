"""Reading JSON bodies at the doors: one parser, strict about what JSON leaves open.

JSON allows an object to repeat a key and most parsers keep the last one silently; a body whose
meaning depends on which copy wins is refused instead (400 ``the JSON body repeats a key``; the
key itself is not echoed: no door reflects its input), so what the door checks is what it
records (docs/doors/common.md#envelope-and-errors).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from layby_contracts.errors import BadInput


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


def decode_body(raw: bytes, *, invalid: str, too_deep: str) -> Any:
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
