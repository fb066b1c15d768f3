"""The errors the SDK raises: the same classes the services raise (see docs/errors.md)."""

from layby_contracts.channels import ChannelDeliveryError, ChannelInputError
from layby_contracts.errors import (
    BadInput,
    Conflict,
    CrossIdentityAudienceError,
    Forbidden,
    InteractionLimitError,
    InteractionTimeoutError,
    LaybyError,
    NonDeterministicRunError,
    NotFound,
    ParkExpiryExceedsRetentionError,
    Permanent,
    RunCancelledError,
    StepFailedError,
    Transient,
    Unauthorized,
    Unavailable,
)

__all__ = [
    "BadInput",
    "ChannelDeliveryError",
    "ChannelInputError",
    "Conflict",
    "CrossIdentityAudienceError",
    "Forbidden",
    "InteractionLimitError",
    "InteractionTimeoutError",
    "LaybyError",
    "NonDeterministicRunError",
    "NotFound",
    "ParkExpiryExceedsRetentionError",
    "Permanent",
    "RunCancelledError",
    "StepFailedError",
    "Transient",
    "Unauthorized",
    "Unavailable",
]
