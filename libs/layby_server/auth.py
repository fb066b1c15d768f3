"""Bearer-token authentication (docs/asking.md#audience, docs/doors/list.md#audience-filter,
docs/doors/stream.md#audience-filter, docs/doors/answer.md#audience).

``LAYBY_API_TOKENS`` is a comma-separated list of ``TOKEN:IDENTITY:ROLE``. ``operator`` is
unrestricted; ``user`` is restricted to its own identity. Tokens are kept only as SHA-256
digests, so a lookup never compares secrets character by character.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Literal

import msgspec

from layby.settings import SettingsError
from layby_contracts.errors import Unauthorized
from layby_domain.ask import Asker
from layby_domain.ask import clamp_audience as domain_clamp

MISSING_CREDENTIALS = "missing bearer token"
BAD_SCHEME = "Authorization must be 'Bearer <token>'"
UNKNOWN_CREDENTIALS = "invalid bearer token"

Role = Literal["operator", "user"]


class Principal(msgspec.Struct, frozen=True):
    identity: str
    role: Role

    @property
    def restricted(self) -> bool:
        return self.role == "user"


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def parse_tokens(raw: str) -> dict[bytes, Principal]:
    """Parse ``LAYBY_API_TOKENS``; a malformed entry fails start-up naming its position."""
    table: dict[bytes, Principal] = {}
    for index, entry in enumerate(raw.split(","), start=1):
        if not entry.strip():
            continue
        parts = entry.strip().split(":")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise SettingsError(
                f"LAYBY_API_TOKENS entry {index} must be TOKEN:IDENTITY:ROLE with no empty part"
            )
        token, identity, role = (p.strip() for p in parts)
        if role not in ("operator", "user"):
            raise SettingsError(
                f"LAYBY_API_TOKENS entry {index} has role {role!r}; ROLE must be operator or user"
            )
        if len(token) < 16:
            raise SettingsError(f"LAYBY_API_TOKENS entry {index}: TOKEN must be at least 16 characters")
        table[_digest(token)] = Principal(identity, role)  # type: ignore[arg-type]
    if not table:
        raise SettingsError("LAYBY_API_TOKENS is set but holds no TOKEN:IDENTITY:ROLE entry")
    return table


class Authenticator:
    def __init__(self, raw_tokens: str | None) -> None:
        self._table = parse_tokens(raw_tokens) if raw_tokens else {}

    def principal(self, token: str | None) -> Principal:
        if not token:
            raise Unauthorized(MISSING_CREDENTIALS)
        found = self._table.get(_digest(token))
        if found is None:
            raise Unauthorized(UNKNOWN_CREDENTIALS)
        return found

    def from_header(self, header: str | None) -> Principal:
        if not header:
            raise Unauthorized(MISSING_CREDENTIALS)
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized(BAD_SCHEME)
        return self.principal(token.strip())


def new_token() -> str:
    """A fresh 256-bit token, URL-safe."""
    return secrets.token_urlsafe(32)


def clamp_audience(principal: Principal, audience: str | None) -> str | None:
    """Audience clamp on write (docs/asking.md#audience): the domain's rule for this principal."""
    return domain_clamp(asker_of(principal), audience)


def asker_of(principal: Principal) -> Asker:
    """The domain's view of an authenticated principal."""
    return Asker(principal.identity, principal.role)
