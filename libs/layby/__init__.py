"""Layby: ask a person from any Python code, and get the typed answer back.

from layby import ask_user, InteractionTimeoutError

approved = await ask_user("Deploy v2 to production?", answer_format="confirm", timeout=600)
"""

from layby.errors import (
    CrossIdentityAudienceError,
    InteractionLimitError,
    InteractionTimeoutError,
)
from layby.sdk import Client, SecretValue, ask_user, connect

__all__ = [
    "Client",
    "CrossIdentityAudienceError",
    "InteractionLimitError",
    "InteractionTimeoutError",
    "SecretValue",
    "ask_user",
    "connect",
]
__version__ = "0.1.0"
