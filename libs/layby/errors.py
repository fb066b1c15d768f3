"""One small error tree (CONVENTIONS 6).

Each error says what happens next. The door maps them to HTTP statuses in exactly one module
(``services/door/errors.py``); the consumer loop maps them to ack / nak / terminate in
``layby.consumer``; the SDK maps refusals to the exceptions its callers catch.
"""

from __future__ import annotations


class LaybyError(Exception):
    """Base of every error Layby raises on purpose."""


class BadInput(LaybyError, ValueError):
    """The input is wrong; retrying it unchanged fails again. ``field`` names what is wrong."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class Unauthorized(LaybyError, PermissionError):
    """No credentials, or credentials that match no configured token."""


class Forbidden(LaybyError, PermissionError):
    """The caller is known but may not do this."""


class NotFound(LaybyError, LookupError):
    """The thing does not exist (or the caller may not learn that it does)."""


class Conflict(LaybyError):
    """The log already decided otherwise (for example: already answered)."""


class Transient(LaybyError):
    """Try again later; nothing was changed."""


class Permanent(LaybyError):
    """Will never succeed; surface it and drop the work item."""


class InteractionLimitError(LaybyError, RuntimeError):
    """``INTERACTIONS_MAX_CONCURRENT`` open questions already exist (inventory A12.116)."""


class CrossIdentityAudienceError(Forbidden):
    """A restricted identity addressed a question to someone else (inventory A2.22)."""


class InteractionTimeoutError(LaybyError, TimeoutError):
    """A sync ask ran out of budget; the question was pruned (inventory A6.63)."""

    def __init__(self, message: str, *, interaction_id: str) -> None:
        super().__init__(message)
        self.interaction_id = interaction_id


class ParkExpiryExceedsRetentionError(LaybyError, ValueError):
    """An async park's ``expiry_at`` lies beyond the checkpoint retention horizon (A8.83).

    Nothing was recorded; the message names the interaction, its ``expiry_at`` and the horizon.
    """

    def __init__(self, message: str, *, interaction_id: str) -> None:
        super().__init__(message)
        self.interaction_id = interaction_id


class NonDeterministicRunError(LaybyError, RuntimeError):
    """A resumed flow asked a different question at a call whose answer was recorded."""


class Unavailable(Transient, RuntimeError):
    """A Layby service or NATS did not answer; nothing was decided. Safe to retry."""
