"""The history door (docs/doors/history.md): every recorded step of one question, read from the
log — its subject's events and its webhook's attempts — arranged by ``layby_domain.history``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

import msgspec
import nats.errors
from litestar import get
from litestar.params import QueryParameter
from litestar.response import Stream
from nats.js.api import ConsumerConfig, DeliverPolicy

from layby_contracts.errors import BadInput, Forbidden, NotFound
from layby_contracts.events import Event, InteractionAsked, InteractionRouted, decode_event
from layby_contracts.http.history import HistoryBlock, HistoryLine, HistoryView
from layby_domain.history import entry_of, history_of
from layby_domain.validation import is_interaction_id
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore
from layby_services.door.deps import Door, DoorState, Who
from layby_services.door.messages import NOT_FOUND
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.routes.asks import InteractionId

log = get_logger("layby.door.history")
_enc = msgspec.json.Encoder()

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
        or (who.restricted and who.identity not in _involved(asked, [e.event for e in events]))
    ):
        raise NotFound(NOT_FOUND)
    attempts = await door.store.webhook_attempts(interaction_id) if asked.notify_url is not None else []
    entries = history_of(((e.seq, e.event) for e in events), attempts)
    return HistoryView(data=HistoryBlock(interaction_id=interaction_id, entries=entries))


def _involved(asked: InteractionAsked, events: list[Event]) -> set[str]:
    """Who a restricted caller must be to read a question's history: its asker, its audience, its
    voters, and anyone it was offered or handed to (docs/routing.md)."""
    people = {asked.asked_by, asked.audience} - {None}
    if asked.routing is not None and asked.routing.voters:
        people.update(asked.routing.voters)
    for event in events:
        if isinstance(event, InteractionRouted):
            people.update(event.progress.offered)
            people.update(d.by for d in event.progress.delegations)
    return {p for p in people if p is not None}


EXPORT_STALL_SECONDS = 10.0
"""How long the export waits for the next event of the range before it ends with an error line."""
INCOMPLETE = "the event log stopped answering; the export is incomplete"


@get(
    "/api/history",
    operation_id="exportHistory",
    tags=["interactions"],
    operation_class=documented(responses=UNAVAILABLE_503),
    summary="Every question's history in a time range, as JSON lines",
    description="Operators only. One line per recorded step of every question (asked, answered, removed) "
    "whose event falls in `[since, until)`, in log order, each with its `interaction_id` "
    "(docs/doors/history.md#the-export). Caller asks are left out; sensitive answers never appear.",
    responses={
        400: refusal(
            "`since` or `until` is missing, not a timezone-aware time, or out of order.", field=True
        ),
        403: refusal("A `user` token: the export is for operators."),
    },
)
async def export_door(
    door: Door,
    who: Who,
    since: Annotated[str, QueryParameter(description="The range's start (ISO 8601, with its timezone).")],
    until: Annotated[str, QueryParameter(description="The range's end, excluded (ISO 8601).")],
) -> Stream:
    if who.restricted:
        raise Forbidden("only an operator may export the history")
    start, end = _instant(since, "since"), _instant(until, "until")
    if end <= start:
        raise BadInput("until must be after since", field="until")
    lines = _lines(door, start, end)
    return Stream(lines, media_type="application/x-ndjson", headers={"Cache-Control": "no-store"})


def _instant(raw: str, field: str) -> datetime:
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise BadInput(f"{field} must be an ISO 8601 time, e.g. 2026-12-01T00:00:00Z", field=field) from None
    if when.tzinfo is None:
        raise BadInput(f"{field} must name its timezone (Z or an offset)", field=field)
    return when


async def _lines(door: DoorState, since: datetime, until: datetime) -> AsyncIterator[bytes]:
    """The range's entries, one JSON line each, read from the log through an ordered consumer
    that starts at ``since`` and stops at the first event at or after ``until`` (or the log's end)."""
    store = door.store
    formats: dict[str, str | None] = {}
    sub = await store.js.subscribe(
        store.names.ix_all,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since),
    )
    try:
        info = await sub.consumer_info()
        # A push consumer may have handed every message over already: nothing pending and nothing
        # delivered is an empty range; else each message says how many come after it.
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        if info.num_pending == 0 and delivered == 0:
            return
        while True:
            try:
                msg = await sub.next_msg(timeout=EXPORT_STALL_SECONDS)
            except nats.errors.TimeoutError:
                log.warning("history.export_stalled", since=since.isoformat(), until=until.isoformat())
                yield _enc.encode({"error": INCOMPLETE}) + b"\n"
                return
            meta = msg.metadata
            if meta.timestamp >= until:
                return
            line = await _line(store, formats, meta.sequence.stream, decode_event(msg.data))
            if line is not None:
                yield _enc.encode(line) + b"\n"
            if meta.num_pending == 0:
                return
    finally:
        await sub.unsubscribe()


async def _line(
    store: EventStore, formats: dict[str, str | None], seq: int, event: Event
) -> HistoryLine | None:
    """An event's export line; None for a caller ask's events and for what is no step."""
    if getattr(event, "to", None) == "caller":
        return None
    interaction_id = getattr(event, "interaction_id", None)
    if not isinstance(interaction_id, str):
        return None
    if isinstance(event, InteractionAsked):
        formats[interaction_id] = event.answer_format
    elif interaction_id not in formats:
        first = await store.first(store.names.ix(interaction_id))  # asked before the range
        asked = first.event if first is not None else None
        formats[interaction_id] = asked.answer_format if isinstance(asked, InteractionAsked) else None
    entry = entry_of(seq, event, formats[interaction_id])
    if entry is None:
        return None
    return HistoryLine(interaction_id=interaction_id, **msgspec.structs.asdict(entry))
