"""Layby: ask a person from any Python code, and get the typed answer back.

from layby import ask_user, InteractionTimeoutError

approved = await ask_user("Deploy v2 to production?", answer_format="confirm", timeout=600)
"""

from layby.external import ask_external
from layby.runs import RunInfo, Suspended, current_run
from layby.sdk import Client, SecretValue, ask_user, connect
from layby.steps import StepInfo, current_step, step
from layby.worker import Worker
from layby_contracts.channels import ChannelDelivery, ChannelDeliveryError, ChannelInputError
from layby_contracts.errors import (
    CrossIdentityAudienceError,
    InteractionLimitError,
    InteractionTimeoutError,
    NonDeterministicRunError,
    ParkExpiryExceedsRetentionError,
    RunCancelledError,
    StepFailedError,
)
from layby_contracts.events import EXPIRY_ANSWER, MediaItem

__all__ = [
    "EXPIRY_ANSWER",
    "ChannelDelivery",
    "ChannelDeliveryError",
    "ChannelInputError",
    "Client",
    "CrossIdentityAudienceError",
    "InteractionLimitError",
    "InteractionTimeoutError",
    "MediaItem",
    "NonDeterministicRunError",
    "ParkExpiryExceedsRetentionError",
    "RunCancelledError",
    "RunInfo",
    "SecretValue",
    "StepFailedError",
    "StepInfo",
    "Suspended",
    "Worker",
    "ask_external",
    "ask_user",
    "connect",
    "current_run",
    "current_step",
    "step",
]
__version__ = "0.1.0"
