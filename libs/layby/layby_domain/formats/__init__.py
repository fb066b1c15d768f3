"""One home per answer format, found through one registry (docs/asking.md#answer-formats).

Each format is a module of this package with one ``Format`` object: its ask-time checks (what the
ask may carry, and the ``format_payload`` it records), its answer check (the typed value an
answer becomes), what a client sees of it (the pending-question frame), what a channel receives
(the delivery's fields) and how the public callback page treats it. Validation, the doors, the
delivery service and the CLI look a format up here instead of branching on its name.
"""

from __future__ import annotations

from typing import Any

from layby_contracts.errors import BadInput
from layby_contracts.formats import FORMAT_NAMES, FormatPayload, wire_payload
from layby_domain.formats._base import AskInputs, Format, Page
from layby_domain.formats.confirm import CONFIRM
from layby_domain.formats.external import EXTERNAL
from layby_domain.formats.form import FORM
from layby_domain.formats.review import REVIEW
from layby_domain.formats.select import SELECT
from layby_domain.formats.text import TEXT

FORMATS: dict[str, Format] = {f.name: f for f in (TEXT, CONFIRM, SELECT, FORM, EXTERNAL, REVIEW)}
NAMES: tuple[str, ...] = FORMAT_NAMES
"""The format names, in the documented order: the tags of the wire union, written once."""
assert tuple(FORMATS) == NAMES, "every format of the wire union has its module here, in order"


def known_format(name: object) -> Format | None:
    """The format called ``name``, or None (callers that report an unknown one later)."""
    return FORMATS.get(name) if isinstance(name, str) else None


_ASK_FIELD = {"url": "link_url"}
"""Where a format payload's key travels in the flat form of an ask (the others keep their name)."""


def flat_fields(payload: FormatPayload) -> dict[str, Any]:
    """A typed question as the flat fields of an ask (the form older ask services read):
    ``answer_format`` and each argument the payload holds."""
    raw = wire_payload(payload) or {}
    return {"answer_format": tag_of(payload), **{_ASK_FIELD.get(k, k): v for k, v in raw.items()}}


def tag_of(payload: FormatPayload) -> str:
    """The format's name of a typed question (its union tag)."""
    return str(type(payload).__struct_config__.tag)


def format_named(name: object) -> Format:
    """The format called ``name``; an unknown one is a ``BadInput`` naming ``answer_format``."""
    found = known_format(name)
    if found is None:
        raise BadInput(f"unknown answer_format: {name!r}", field="answer_format")
    return found


__all__ = [
    "FORMATS",
    "NAMES",
    "AskInputs",
    "Format",
    "Page",
    "flat_fields",
    "format_named",
    "known_format",
    "tag_of",
]
