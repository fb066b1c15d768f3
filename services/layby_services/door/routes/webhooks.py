"""The webhook door (docs/webhooks.md#attempts): a question's notify URL and the recorded
delivery attempts of its outcome, read from the log (the attempts' own stream)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get
from litestar.params import PathParameter

from layby_contracts.errors import NotFound
from layby_contracts.events import InteractionAsked
from layby_contracts.http.webhooks import WebhookAttemptView, WebhookBlock, WebhookView
from layby_domain.validation import is_interaction_id
from layby_services.door.deps import door, principal_of
from layby_services.door.messages import NOT_FOUND
from layby_services.door.openapi import UUID4, refusal

_SETTLED = {"delivered", "gone", "gave_up"}


@get(
    "/api/interactions/{interaction_id:str}/webhook",
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
    request: Request[Any, Any, Any],
    interaction_id: Annotated[
        str,
        PathParameter(
            description="A lowercase uuid4; anything else is the same 404 as an unknown question.",
            schema_extra={"pattern": UUID4},
        ),
    ],
) -> WebhookView:
    state = door(request)
    who = principal_of(request)
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    first = await state.store.first(state.store.names.ix(interaction_id))
    asked = None if first is None else first.event
    if (
        not isinstance(asked, InteractionAsked)
        or asked.notify_url is None
        or (who.restricted and asked.asked_by != who.identity)
    ):
        raise NotFound(NOT_FOUND)
    attempts = await state.store.webhook_attempts(interaction_id)
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
