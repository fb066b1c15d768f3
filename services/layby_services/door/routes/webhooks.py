"""The webhook door (docs/webhooks.md#attempts): a question's notify URL and the recorded
delivery attempts of its outcome, read from the log (the attempts' own stream)."""

from __future__ import annotations

from litestar import get

from layby_contracts.errors import NotFound
from layby_contracts.events import InteractionAsked
from layby_contracts.http.webhooks import WebhookAttemptView, WebhookBlock, WebhookView
from layby_domain.validation import is_interaction_id
from layby_services.door.deps import Door, Who
from layby_services.door.messages import NOT_FOUND
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.routes.asks import InteractionId

_SETTLED = {"delivered", "gone", "gave_up"}


@get(
    "/api/interactions/{interaction_id:str}/webhook",
    operation_id="getInteractionWebhook",
    tags=["interactions"],
    operation_class=documented(responses=UNAVAILABLE_503),
    summary="A question's webhook and its delivery attempts",
    description="Where the outcome is posted and each attempt: status or error, attempt number, next "
    "retry (docs/webhooks.md#attempts). The asker's own questions only, for a `user` token.",
    responses={
        404: refusal(
            "Not a lowercase uuid4, unknown, another identity's question (for a `user`), or a question "
            "that names no `notify_url`: indistinguishable.",
            NOT_FOUND,
        )
    },
)
async def webhook_door(
    door: Door,
    who: Who,
    interaction_id: InteractionId,
) -> WebhookView:
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    first = await door.store.first(door.store.names.ix(interaction_id))
    asked = None if first is None else first.event
    if (
        not isinstance(asked, InteractionAsked)
        or asked.notify_url is None
        or (who.restricted and asked.asked_by != who.identity)
    ):
        raise NotFound(NOT_FOUND)
    attempts = await door.store.webhook_attempts(interaction_id)
    settled = next((a.result for a in reversed(attempts) if a.result in _SETTLED), "pending")
    return WebhookView(
        data=WebhookBlock(
            interaction_id=interaction_id,
            notify_url=asked.notify_url,
            state=settled,
            attempts=[
                WebhookAttemptView(
                    webhook_id=a.webhook_id,
                    attempt=a.attempt,
                    at=a.at,
                    result=a.result,
                    status=a.status,
                    error=a.error,
                    next_retry_at=a.next_retry_at,
                )
                for a in attempts
            ],
        )
    )
