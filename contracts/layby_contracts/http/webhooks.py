"""The webhook door's body (docs/webhooks.md#attempts): what ``GET
/api/interactions/{interaction_id}/webhook`` answers — the question's notify URL and every
recorded delivery attempt of its outcome."""

from __future__ import annotations

from datetime import datetime

from msgspec import Struct

from layby_contracts.webhooks import AttemptResult


class WebhookAttemptView(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One attempt: its number, when, and what came of it (``delivered``, ``failed``, ``gone``,
    ``gave_up``), with the receiver's status or the error, and the next retry of a failed one."""

    webhook_id: str
    attempt: int
    at: datetime
    result: AttemptResult
    status: int | None = None
    error: str | None = None
    next_retry_at: datetime | None = None


class WebhookBlock(Struct, frozen=True, kw_only=True):
    """A question's webhook: where it goes, whether it got there, and each attempt, oldest first."""

    interaction_id: str
    notify_url: str
    state: str
    """``pending`` (no attempt settled it yet), ``delivered``, ``gone`` or ``gave_up``."""
    attempts: list[WebhookAttemptView]


class WebhookView(Struct, frozen=True, kw_only=True):
    data: WebhookBlock
