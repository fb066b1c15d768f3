"""The errors the SDK raises: the same classes the services raise, and the SDK's own misuse
errors, raised before anything is recorded (see docs/errors.md)."""


from layby_contracts.channels import ChannelDeliveryError, ChannelInputError
from layby_contracts.errors import (
    BadInput,
    CallFailedError,
    ChannelFailedError,
    ChannelUnavailableError,
    Conflict,
    CrossIdentityAudienceError,
    Forbidden,
    InteractionLimitError,
    InteractionTimeoutError,
    LaybyError,
    NonDeterministicRunError,
    NotConfiguredError,
    NotFound,
    ParkExpiryExceedsRetentionError,
    Permanent,
    RunCancelledError,
    StepFailedError,
    Transient,
    Unauthorized,
    Unavailable,
    UnsupportedError,
)

# Both are also RuntimeErrors: they were plain RuntimeErrors before they had classes, and code
# (the tests among it) that catches RuntimeError must go on catching them.


class RunRequiredError(LaybyError, RuntimeError):
    """A call that only a resumable run can make (an async ask, ``layby.call``) was made outside
    one: no run bound, the in-memory checkpointer, or no identity. Nothing was recorded; it
    fails the same way again until it runs inside a flow of a durable ``layby.Worker``."""

    kind = "run_required"


class WorkerSetupError(LaybyError, RuntimeError):
    """A ``layby.Worker`` was asked for what its set-up cannot do (``start()`` or ``serve()`` on
    the in-memory checkpointer, ``serve()`` with no flow registered). Nothing was recorded."""

    kind = "worker_setup"


__all__ = [
    "BadInput",
    "CallFailedError",
    "ChannelDeliveryError",
    "ChannelFailedError",
    "ChannelInputError",
    "ChannelUnavailableError",
    "Conflict",
    "CrossIdentityAudienceError",
    "Forbidden",
    "InteractionLimitError",
    "InteractionTimeoutError",
    "LaybyError",
    "NonDeterministicRunError",
    "NotConfiguredError",
    "NotFound",
    "ParkExpiryExceedsRetentionError",
    "Permanent",
    "RunCancelledError",
    "RunRequiredError",
    "StepFailedError",
    "Transient",
    "Unauthorized",
    "Unavailable",
    "UnsupportedError",
    "WorkerSetupError",
]
