"""One small error tree, shared by every side of Layby (docs/errors.md).

Each error says what happens next, and each class carries its own wire ``kind``: the services
raise these classes, ``layby_contracts.refusals`` turns them into the ``Refused`` reply of a
command and back, and the SDK raises the very class the service raised. Every subclass of
``LaybyError`` must name a ``kind`` no other class uses; the kind → class table (``by_kind``) is
built from the classes as they are defined, never written by hand. The door maps them to HTTP
statuses in one module (``layby_services.door.errors``); the consumer loop maps them to ack / nak /
terminate in ``layby_server.store.consumer``.
"""

from __future__ import annotations

from typing import Any, ClassVar

RefusalKind = str
"""The wire name of an error class (``Refused.kind``): one per class, see ``by_kind``."""

_BY_KIND: dict[str, type[LaybyError]] = {}


class LaybyError(Exception):
    """Base of every error Layby raises on purpose. ``field`` names the offending input.

    A subclass declares its own ``kind`` (its wire name) in its class body; a missing or repeated
    kind is refused when the class is defined, so no two classes can meet on the wire as one.
    """

    kind: ClassVar[RefusalKind] = "error"
    retryable: ClassVar[bool] = False
    """True only where trying the same thing again later may succeed (nothing was decided)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("kind")
        if not isinstance(kind, str) or not kind:
            raise TypeError(f"{cls.__qualname__} must declare its own wire kind")
        known = _BY_KIND.get(kind)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise TypeError(f"{cls.__qualname__} reuses the wire kind {kind!r} of {known.__qualname__}")
        _BY_KIND[kind] = cls

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    @classmethod
    def from_wire(cls, message: str, *, field: str | None, interaction_id: str = "") -> LaybyError:
        """The error as the receiving side raises it (a class with more state overrides this)."""
        return cls(message, field=field)


_BY_KIND[LaybyError.kind] = LaybyError


def by_kind(kind: str) -> type[LaybyError]:
    """The class of a wire kind; an unknown kind (a newer peer's) is a plain ``LaybyError``."""
    return _BY_KIND.get(kind, LaybyError)


def known_kinds() -> dict[str, type[LaybyError]]:
    """Every wire kind defined so far and its class (a copy)."""
    return dict(_BY_KIND)


class BadInput(LaybyError, ValueError):
    """The input is wrong; retrying it unchanged fails again. ``field`` names what is wrong."""

    kind = "invalid"


class Unauthorized(LaybyError, PermissionError):
    """No credentials, or credentials that match no configured token."""

    kind = "unauthorized"


class Forbidden(LaybyError, PermissionError):
    """The caller is known but may not do this (the question or run is not in its audience)."""

    kind = "audience"


class NotFound(LaybyError, LookupError):
    """The thing does not exist (or the caller may not learn that it does)."""

    kind = "not_found"


class Conflict(LaybyError):
    """The log already decided otherwise (for example: already answered)."""

    kind = "conflict"


class Transient(LaybyError):
    """Try again later; nothing was changed."""

    kind = "transient"
    retryable = True


class Permanent(LaybyError):
    """Will never succeed; surface it and drop the work item. Never retried by the receiver."""

    kind = "permanent"


class InteractionLimitError(LaybyError, RuntimeError):
    """``INTERACTIONS_MAX_CONCURRENT`` open questions already exist (docs/asking.md#concurrency-cap),
    or, for a caller ask, ``INTERACTIONS_MAX_CONCURRENT_CALLER`` caller entries
    (docs/caller-asks.md#the-concurrency-cap)."""

    kind = "limit"


class CrossIdentityAudienceError(Forbidden):
    """A restricted identity addressed a question to someone else (docs/asking.md#audience)."""

    kind = "cross_identity_audience"


class InteractionTimeoutError(LaybyError, TimeoutError):
    """A sync ask ran out of budget; the question was pruned (docs/asking.md#timeout)."""

    kind = "timeout"

    def __init__(self, message: str, *, interaction_id: str, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.interaction_id = interaction_id

    @classmethod
    def from_wire(cls, message: str, *, field: str | None, interaction_id: str = "") -> LaybyError:
        return cls(message, interaction_id=interaction_id, field=field)


class ParkExpiryExceedsRetentionError(LaybyError, ValueError):
    """An async park's ``expiry_at`` lies beyond the checkpoint retention horizon
    (docs/aggregates/run.md#deadlines-and-checkpoint-retention).

    Nothing was recorded; the message names the interaction, its ``expiry_at`` and the horizon.
    """

    kind = "retention"

    def __init__(self, message: str, *, interaction_id: str = "", field: str | None = "expiry_at") -> None:
        super().__init__(message, field=field)
        self.interaction_id = interaction_id

    @classmethod
    def from_wire(cls, message: str, *, field: str | None, interaction_id: str = "") -> LaybyError:
        return cls(message, interaction_id=interaction_id, field=field)


class NonDeterministicRunError(LaybyError, RuntimeError):
    """A resumed flow asked a different question at a call whose answer was recorded."""

    kind = "nondeterministic"


class RunCancelledError(LaybyError):
    """The run was cancelled: its execution stops at its next step, park or end, recording nothing."""

    kind = "cancelled"


class StepFailedError(LaybyError, RuntimeError):
    """A step raised on its last attempt; the failure is recorded and raised again on every replay."""

    kind = "step_failed"


class CallFailedError(LaybyError, RuntimeError):
    """A run this run called (``layby.call``), or a waiting outcome it took, failed: the caller
    fails as the called run did (docs/caller-asks.md#resume-take-and-cancel)."""

    kind = "call_failed"


class Unavailable(Transient, RuntimeError):
    """A Layby service or NATS did not answer; nothing was decided. Safe to retry."""

    kind = "unavailable"


class NotConfiguredError(LaybyError, RuntimeError):
    """The SDK does not know how to reach Layby (no NATS URL, no token; ``field`` names the
    setting): nothing was sent, and trying again fails the same way until the setting is there
    (the message says where to set it). Also a ``RuntimeError``, as it was before it had a class
    of its own, so code that catches that still does. Raised in the SDK, never by a service."""

    kind = "not_configured"


# RunRequiredError and WorkerSetupError are also RuntimeErrors: they were plain RuntimeErrors
# before they had classes, and code that catches RuntimeError must go on catching them. Like
# NotConfiguredError they are raised in the SDK, never by a service.
class RunRequiredError(LaybyError, RuntimeError):
    """A call that only a resumable run can make (an async ask, ``layby.call``) was made outside
    one: no run bound, the in-memory checkpointer, or no identity. Nothing was recorded; it
    fails the same way again until it runs inside a flow of a durable ``layby.Worker``."""

    kind = "run_required"


class WorkerSetupError(LaybyError, RuntimeError):
    """A ``layby.Worker`` was asked for what its set-up cannot do (``start()`` or ``serve()`` on
    the in-memory checkpointer, ``serve()`` with no flow registered). Nothing was recorded."""

    kind = "worker_setup"


class UnsupportedError(LaybyError, NotImplementedError):
    """The channel cannot do this (it cannot notify, or lacks the capability a field needs):
    checked before anything is recorded or sent (docs/notifications.md#what-a-channel-supports)."""

    kind = "unsupported"


class ChannelUnavailableError(Transient):
    """The medium failed this one send attempt and another may succeed (nothing was recorded);
    ``retry_after`` is the pause it asked for, in seconds, when it named one
    (docs/notifications.md#statuses)."""

    kind = "channel_unavailable"

    def __init__(
        self, message: str = "", *, field: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, field=field)
        self.retry_after = retry_after


class ChannelFailedError(Permanent):
    """The medium refused this send for good (nothing was recorded; do not retry it unchanged)
    (docs/notifications.md#statuses)."""

    kind = "channel_failed"
