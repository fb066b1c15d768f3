"""The history door (docs/doors/history.md): every recorded step of one question, read from the
log — its subject's events and its webhook's attempts — arranged by ``layby_domain.history``."""

from __future__ import annotations

from litestar import get

from layby_contracts.errors import NotFound
from layby_contracts.events import InteractionAsked
from layby_contracts.http.history import HistoryBlock, HistoryView
from layby_domain.history import history_of
from layby_domain.validation import is_interaction_id
from layby_services.door.deps import Door, Who
from layby_services.door.messages import NOT_FOUND
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.routes.asks import InteractionId

HISTORY_MAX_EVENTS = 1000
"""How many of a question's events the door reads (a question records a handful)."""


@get(
    "/api/interactions/{interaction_id:str}/history",
    operation_id="getInteractionHistory",
    tags=["interactions"],
    operation_class=documented(responses=UNAVAILABLE_503),
    summary="A question's history",
    description="Every recorded step of the question, oldest first: asked (by whom, to whom, on which "
    "channels), answered (by whom, where, the answer unless sensitive, a review's decision), removed "
    "(why), and each attempt of its webhook (docs/doors/history.md). For a `user` token, only questions "
    "it asked or that are addressed to it.",
    responses={
        404: refusal(
            "Not a lowercase uuid4, unknown, a caller ask, or (for a `user`) another identity's question: "
            "indistinguishable.",
            NOT_FOUND,
        )
    },
)
async def history_door(door: Door, who: Who, interaction_id: InteractionId) -> HistoryView:
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    events = await door.store.events_on(door.store.names.ix(interaction_id), limit=HISTORY_MAX_EVENTS)
    asked = events[0].event if events else None
    if (
        not isinstance(asked, InteractionAsked)
        or asked.to == "caller"
        or (who.restricted and who.identity not in (asked.asked_by, asked.audience))
    ):
        raise NotFound(NOT_FOUND)
    attempts = await door.store.webhook_attempts(interaction_id) if asked.notify_url is not None else []
    entries = history_of(((e.seq, e.event) for e in events), attempts)
    return HistoryView(data=HistoryBlock(interaction_id=interaction_id, entries=entries))
