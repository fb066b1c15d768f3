"""The one converter between errors and command replies, used by the services and the SDK.

A service raises an error from ``layby_contracts.errors``; ``to_refused`` turns it into the
``Refused`` reply its command gets; the SDK turns that reply back into the same error class with
``from_refused`` and raises it to its caller. The wire ``kind`` of each class is its ``kind``
class attribute, so the mapping is written once, here and in ``errors.py`` (docs/errors.md).
"""

from __future__ import annotations

from layby_contracts.commands import PROTOCOL, Refused
from layby_contracts.errors import (
    BadInput,
    Conflict,
    CrossIdentityAudienceError,
    InteractionLimitError,
    LaybyError,
    ParkExpiryExceedsRetentionError,
    RunCancelledError,
    Unauthorized,
    Unavailable,
)

_BY_KIND: dict[str, type[LaybyError]] = {
    "invalid": BadInput,
    "limit": InteractionLimitError,
    "audience": CrossIdentityAudienceError,
    "unauthorized": Unauthorized,
    "retention": ParkExpiryExceedsRetentionError,
    "unavailable": Unavailable,
    "conflict": Conflict,
    "cancelled": RunCancelledError,
}


def to_refused(exc: LaybyError) -> Refused:
    """The reply a command gets when its handler raised ``exc``."""
    return Refused(kind=exc.kind, message=exc.message, field=exc.field, protocol=PROTOCOL)


def from_refused(reply: Refused, *, interaction_id: str = "") -> LaybyError:
    """The error a refused command raises in the SDK (the same class the service raised)."""
    cls = _BY_KIND.get(reply.kind, LaybyError)
    if cls is ParkExpiryExceedsRetentionError:
        return ParkExpiryExceedsRetentionError(
            reply.message, interaction_id=interaction_id, field=reply.field
        )
    if cls is Unauthorized:
        return Unauthorized(f"LAYBY_TOKEN was refused: {reply.message}", field=reply.field)
    return cls(reply.message, field=reply.field)
