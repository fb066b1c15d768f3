"""The one converter between errors and command replies, used by the services and the SDK.

A service raises an error from ``layby_contracts.errors``; ``to_refused`` turns it into the
``Refused`` reply its command gets; the SDK turns that reply back into the same error class with
``from_refused`` and raises it to its caller. The wire ``kind`` of each class is its ``kind``
class attribute and the table back is built from the classes (``errors.by_kind``), so no mapping
is written by hand (docs/errors.md).
"""

from __future__ import annotations

from layby_contracts.commands import PROTOCOL, Refused
from layby_contracts.errors import ChannelUnavailableError, LaybyError, Unauthorized, by_kind


def to_refused(exc: LaybyError) -> Refused:
    """The reply a command gets when its handler raised ``exc``."""
    retry_after = exc.retry_after if isinstance(exc, ChannelUnavailableError) else None
    return Refused(
        kind=exc.kind, message=exc.message, field=exc.field, protocol=PROTOCOL, retry_after=retry_after
    )


def from_refused(reply: Refused, *, interaction_id: str = "") -> LaybyError:
    """The error a refused command raises in the SDK (the same class the service raised)."""
    cls = by_kind(reply.kind)
    if cls is Unauthorized:
        return Unauthorized(f"LAYBY_TOKEN was refused: {reply.message}", field=reply.field)
    error = cls.from_wire(reply.message, field=reply.field, interaction_id=interaction_id)
    if isinstance(error, ChannelUnavailableError):
        error.retry_after = reply.retry_after
    return error
