"""HTTP bodies of the doors that drive parkable runs: hooks, conversations and the subject
listing (docs/doors/hooks.md)."""

from __future__ import annotations

from msgspec import Struct

from layby_contracts.doors import Entry, VisitResult


class Visited(Struct, frozen=True, kw_only=True):
    """``POST /api/hooks/{name}`` and ``POST /api/conversations/{subject}/messages``: what the
    visit did, and the next outcome of what it resumed or started when it came within ``wait``."""

    data: VisitResult


class ParkedData(Struct, frozen=True, kw_only=True):
    subject: str
    entries: list[Entry]


class Parked(Struct, frozen=True, kw_only=True):
    """``GET /api/subjects/{subject}/parked``: every entry parked on a subject."""

    data: ParkedData
