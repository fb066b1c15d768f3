"""The first checks of every command to the ask service: who sends it, and its id's shape."""

from __future__ import annotations

from layby_contracts.errors import BadInput, Unauthorized
from layby_domain.validation import is_interaction_id
from layby_server.auth import Authenticator, Principal


def identify(auth: Authenticator, token: str, value: str, field: str) -> Principal:
    """The token's principal, once ``value`` (the command's ``field``) is a well-formed uuid4."""
    try:
        principal = auth.principal(token)
    except Unauthorized as exc:
        raise Unauthorized(str(exc), field="token") from None
    if not is_interaction_id(value):
        raise BadInput(f"{field} must be a uuid4 string", field=field)
    return principal
