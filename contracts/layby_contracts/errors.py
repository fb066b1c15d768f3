"""One small error tree, shared by every side of Layby (docs/errors.md).

Each error says what happens next, and each carries its wire ``kind``: the services raise these
classes, ``layby_contracts.refusals`` turns them into the ``Refused`` reply of a command and back,
and the SDK raises the very class the service raised. The door maps them to HTTP statuses in one
module (``layby_services.door.errors``); the consumer loop maps them to ack / nak / terminate in
``layby_server.consumer``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

RefusalKind = Literal[
    "invalid", "limit", "audience", "unauthorized", "unavailable", "retention", "conflict", "cancelled"
]
"""The wire names of the errors a command can be refused with (``Refused.kind``)."""


class LaybyError(Exception):
    """Base of every error Layby raises on purpose. ``field`` names the offending input."""

    kind: ClassVar[RefusalKind] = "unavailable"

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class BadInput(LaybyError, ValueError):
    """The input is wrong; retrying it unchanged fails again. ``field`` names what is wrong."""

    kind = "invalid"


class Unauthorized(LaybyError, PermissionError):
    """No credentials, or credentials that match no configured token."""

    kind = "unauthorized"


class Forbidden(LaybyError, PermissionError):
    """The caller is known but may not do this."""

    kind = "audience"


class NotFound(LaybyError, LookupError):
    """The thing does not exist (or the caller may not learn that it does)."""

    kind = "invalid"


class Conflict(LaybyError):
    """The log already decided otherwise (for example: already answered)."""

    kind = "conflict"


class Transient(LaybyError):
    """Try again later; nothing was changed."""

    kind = "unavailable"


class Permanent(LaybyError):
    """Will never succeed; surface it and drop the work item."""

    kind = "unavailable"


class InteractionLimitError(LaybyError, RuntimeError):
    """``INTERACTIONS_MAX_CONCURRENT`` open questions already exist (docs/asking.md#concurrency-cap)."""

    kind = "limit"


class CrossIdentityAudienceError(Forbidden):
    """A restricted identity addressed a question to someone else (docs/asking.md#audience)."""

    kind = "audience"


class InteractionTimeoutError(LaybyError, TimeoutError):
    """A sync ask ran out of budget; the question was pruned (docs/asking.md#timeout)."""

    def __init__(self, message: str, *, interaction_id: str) -> None:
        super().__init__(message)
        self.interaction_id = interaction_id


class ParkExpiryExceedsRetentionError(LaybyError, ValueError):
    """An async park's ``expiry_at`` lies beyond the checkpoint retention horizon
    (docs/aggregates/run.md#deadlines-and-checkpoint-retention).

    Nothing was recorded; the message names the interaction, its ``expiry_at`` and the horizon.
    """

    kind = "retention"

    def __init__(self, message: str, *, interaction_id: str = "", field: str | None = "expiry_at") -> None:
        super().__init__(message, field=field)
        self.interaction_id = interaction_id


class NonDeterministicRunError(LaybyError, RuntimeError):
    """A resumed flow asked a different question at a call whose answer was recorded."""


class RunCancelledError(LaybyError):
    """The run was cancelled: its execution stops at its next step, park or end, recording nothing."""

    kind = "cancelled"


class StepFailedError(LaybyError, RuntimeError):
    """A step raised on its last attempt; the failure is recorded and raised again on every replay."""


class Unavailable(Transient, RuntimeError):
    """A Layby service or NATS did not answer; nothing was decided. Safe to retry."""
