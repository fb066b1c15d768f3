"""Signed webhooks out: the body the delivery service POSTs to an ask's ``notify_url`` and the
record of each attempt (docs/webhooks.md).

The body is an HTTP body, not an event: it is built from the resolving event and never carries a
sensitive answer. Attempts are kept on their own small stream, one subject per interaction, and
shown in the interaction view's ``webhook`` block.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

WebhookOutcome = Literal["answered", "expired", "removed"]


class WebhookData(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What happened to the question. ``answer`` is absent when the question was sensitive
    (``sensitive`` is then true) or when it was removed."""

    interaction_id: str
    group_id: str
    outcome: WebhookOutcome
    resolved_at: datetime
    answer: Any = None
    sensitive: bool = False
    answered_by: str | None = None
    via: str | None = None
    reason: str | None = None
    """removed: why (``cancelled``, ``abandoned``, ``delivery_failed``, ``dropped``)."""
    run_id: str | None = None


class WebhookBody(msgspec.Struct, frozen=True, kw_only=True):
    """The JSON body of one webhook (the Standard Webhooks envelope: type, timestamp, data)."""

    type: str
    """``interaction.answered``, ``interaction.expired`` or ``interaction.removed``."""
    timestamp: datetime
    """When the question was resolved (the same on every attempt, so a retry's body is identical)."""
    data: WebhookData


AttemptResult = Literal["delivered", "failed", "gone", "gave_up"]


class WebhookAttempt(
    msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, tag="webhook.attempted.v1"
):
    """One delivery attempt of one outcome: ``delivered`` (a 2xx), ``failed`` (retried at
    ``next_retry_at``), ``gone`` (410: never retried) or ``gave_up`` (the deadline passed)."""

    webhook_id: str
    interaction_id: str
    attempt: int
    at: datetime
    result: AttemptResult
    status: int | None = None
    """The receiver's HTTP status, when it answered."""
    error: str | None = None
    """Why no status came back (a timeout, a refused connection, a refused address)."""
    next_retry_at: datetime | None = None


ATTEMPT_DECODER: msgspec.json.Decoder[WebhookAttempt] = msgspec.json.Decoder(WebhookAttempt)
