"""Layby: ask a person from any Python code, and get the typed answer back.

from layby import ask_user, InteractionTimeoutError

approved = await ask_user("Deploy v2 to production?", answer_format="confirm", timeout=600)
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from layby.calls import call, cancel_parked, list_parked, resume_parked
    from layby.external import ask_external
    from layby.messages import messages
    from layby.review import Review, ReviewRejectedError, answer_interrupt, review, reviewed
    from layby.runs import RunInfo, Suspended, current_run
    from layby.sdk import AnswerDetails, Client, SecretValue, ask_user, connect, notify_user
    from layby.steps import StepInfo, current_step, step
    from layby.worker import Worker
    from layby_contracts.channels import ChannelDelivery, ChannelDeliveryError, ChannelInputError
    from layby_contracts.errors import (
        CallFailedError,
        ChannelFailedError,
        ChannelUnavailableError,
        CrossIdentityAudienceError,
        InteractionLimitError,
        InteractionTimeoutError,
        NonDeterministicRunError,
        ParkExpiryExceedsRetentionError,
        RunCancelledError,
        StepFailedError,
        UnsupportedError,
    )
    from layby_contracts.events import CALLER_ASKS_KEY, EXPIRY_ANSWER, EscalationStep, MediaItem, Routing

# Loaded on first use (PEP 562): `import layby` (and every `layby` command, `layby up` included)
# pays only for what it touches, while `from layby import ask_user` works as always.
_HOMES = {
    "call": "layby.calls",
    "cancel_parked": "layby.calls",
    "list_parked": "layby.calls",
    "resume_parked": "layby.calls",
    "CallFailedError": "layby_contracts.errors",
    "CALLER_ASKS_KEY": "layby_contracts.events",
    "EscalationStep": "layby_contracts.events",
    "Routing": "layby_contracts.events",
    "ask_external": "layby.external",
    "messages": "layby.messages",
    "Review": "layby.review",
    "ReviewRejectedError": "layby.review",
    "answer_interrupt": "layby.review",
    "review": "layby.review",
    "reviewed": "layby.review",
    "RunInfo": "layby.runs",
    "Suspended": "layby.runs",
    "current_run": "layby.runs",
    "AnswerDetails": "layby.sdk",
    "Client": "layby.sdk",
    "SecretValue": "layby.sdk",
    "ask_user": "layby.sdk",
    "notify_user": "layby.sdk",
    "UnsupportedError": "layby_contracts.errors",
    "ChannelFailedError": "layby_contracts.errors",
    "ChannelUnavailableError": "layby_contracts.errors",
    "connect": "layby.sdk",
    "StepInfo": "layby.steps",
    "current_step": "layby.steps",
    "step": "layby.steps",
    "Worker": "layby.worker",
    "ChannelDelivery": "layby_contracts.channels",
    "ChannelDeliveryError": "layby_contracts.channels",
    "ChannelInputError": "layby_contracts.channels",
    "CrossIdentityAudienceError": "layby_contracts.errors",
    "InteractionLimitError": "layby_contracts.errors",
    "InteractionTimeoutError": "layby_contracts.errors",
    "NonDeterministicRunError": "layby_contracts.errors",
    "ParkExpiryExceedsRetentionError": "layby_contracts.errors",
    "RunCancelledError": "layby_contracts.errors",
    "StepFailedError": "layby_contracts.errors",
    "EXPIRY_ANSWER": "layby_contracts.events",
    "MediaItem": "layby_contracts.events",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'layby' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


__all__ = [
    "CALLER_ASKS_KEY",
    "EXPIRY_ANSWER",
    "AnswerDetails",
    "CallFailedError",
    "ChannelDelivery",
    "ChannelDeliveryError",
    "ChannelFailedError",
    "ChannelInputError",
    "ChannelUnavailableError",
    "Client",
    "CrossIdentityAudienceError",
    "EscalationStep",
    "InteractionLimitError",
    "InteractionTimeoutError",
    "MediaItem",
    "NonDeterministicRunError",
    "ParkExpiryExceedsRetentionError",
    "Review",
    "ReviewRejectedError",
    "Routing",
    "RunCancelledError",
    "RunInfo",
    "SecretValue",
    "StepFailedError",
    "StepInfo",
    "Suspended",
    "UnsupportedError",
    "Worker",
    "answer_interrupt",
    "ask_external",
    "ask_user",
    "call",
    "cancel_parked",
    "connect",
    "current_run",
    "current_step",
    "list_parked",
    "messages",
    "notify_user",
    "resume_parked",
    "review",
    "reviewed",
    "step",
]
__version__ = "0.1.0"
