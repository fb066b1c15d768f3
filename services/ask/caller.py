"""The first checks of every command to the ask service: who sends it, and its id's shape."""

from __future__ import annotations

from contracts.commands import Refused
from layby.auth import Authenticator, Principal
from layby.errors import Unauthorized
from layby.validation import is_interaction_id


def identify(auth: Authenticator, token: str, value: str, field: str) -> Principal | Refused:
    """The token's principal, once ``value`` (the command's ``field``) is a well-formed uuid4."""
    try:
        principal = auth.principal(token)
    except Unauthorized as exc:
        return Refused(kind="unauthorized", message=str(exc), field="token")
    if not is_interaction_id(value):
        return Refused(kind="invalid", message=f"{field} must be a uuid4 string", field=field)
    return principal
