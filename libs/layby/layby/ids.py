"""Fresh identifiers and callback tickets: the one place Layby draws randomness for them. The
domain (``layby_domain``) never does, so each of its decisions is a pure function of its
inputs; the SDK and the services mint what they pass in (docs/engineering.md#a-pure-core)."""

from __future__ import annotations

import secrets
import uuid

from layby_domain.tickets import ticket_hash


def new_interaction_id() -> str:
    """A lowercase uuid4 string: an interaction's, a run's or a group's id."""
    return str(uuid.uuid4())


def new_ticket() -> tuple[str, str]:
    """(ticket, its SHA-256 hex): 32 random bytes, URL-safe base64 (43 characters)
    (docs/aggregates/interaction.md#tickets)."""
    ticket = secrets.token_urlsafe(32)
    return ticket, ticket_hash(ticket)


__all__ = ["new_interaction_id", "new_ticket"]
