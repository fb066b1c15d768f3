"""``GET /api/interactions/stream``: the tail-only SSE feed (docs/doors/stream.md#the-stream-door,
docs/doors/stream.md#resume-with-last-event-id).

Every frame's ``id:`` is the JetStream stream sequence of its event. The start point is taken
before the response headers go out: with ``Last-Event-ID`` (or ``?last_event_id=``; the header
wins) the tail resumes right after that sequence when it lies inside the resume window;
a malformed or aged-out id falls back to the live end and logs it; no id is a fresh connect
and logs nothing.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import msgspec
from litestar import Request, get
from litestar.openapi.spec import Operation
from litestar.response import Stream
from structlog.typing import FilteringBoundLogger

from layby_contracts.errors import Unavailable
from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionRouted,
    decode_event,
)
from layby_contracts.http import TerminalFrame
from layby_domain.frames import add_frame
from layby_domain.interaction import of_caller_ask
from layby_domain.routing import offered_at_first
from layby_server.auth import Principal
from layby_server.observability import tracing
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import Stored
from layby_services.door.cache import AskedCache
from layby_services.door.deps import Door, DoorState, Who
from layby_services.door.errors import Busy
from layby_services.door.listeners import (
    OFFERED_ONLY,
    UNSTARTED_STREAM_SECONDS,
    Entry,
    Feed,
    Writer,
    frames,
    sees,
)
from layby_services.door.messages import STREAM_UNAVAILABLE, TOO_MANY_STREAMS
from layby_services.door.openapi import documented
from layby_services.door.openapi.components import SEQ, error, header, text
from layby_services.door.protocol import SSE_WRITER, DirectBody
from layby_services.door.query import LastEventId, LastEventIdHeader

log = get_logger("layby.door.stream")
_enc = msgspec.json.Encoder()
_SEQ = re.compile(r"[0-9]{1,19}")
STREAM_RETRY_AFTER = 5
"""Seconds a client refused for capacity is told to wait (Retry-After)."""


def resume_point(raw: str | None, first: int, last: int, window: int) -> tuple[int, str | None]:
    """(start sequence, fallback reason or None). ``raw`` is the client's last seen id."""
    if raw is None:
        return last + 1, None
    text = raw.strip()
    if not _SEQ.fullmatch(text):
        return last + 1, "malformed"
    seen = int(text)
    if seen > last:
        return last + 1, "ahead_of_log"
    if seen + 1 < first or last - seen > window:
        return last + 1, "aged_out"
    return seen + 1, None


class InteractionFeed:
    """How an event of the log becomes a stream door entry (docs/doors/stream.md#frames). Live
    events passing by also feed the door's asked-event cache, which then often holds a question
    before the projector has applied it."""

    name = "stream"

    def __init__(self, asked: AskedCache | None = None) -> None:
        self._asked = asked

    def entry(self, seq: int, data: bytes, headers: dict[str, str] | None, *, live: bool) -> Entry | None:
        try:
            ev = decode_event(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("stream.skip_malformed", seq=seq)
            return None
        if isinstance(ev, InteractionRouted):
            return self._routed(seq, ev, live)
        if not isinstance(ev, InteractionAsked | InteractionAnswered | InteractionRemoved):
            return None  # run, caller-outcome, door and visit events are not part of the interactions stream
        if of_caller_ask(ev):
            return None  # a caller ask is no person's question (docs/caller-asks.md#hidden-from-the-inbox)
        if live and self._asked is not None:
            self._asked.observe([Stored(seq=seq, event=ev, trace=tracing.carrier_of(headers))])
        if isinstance(ev, InteractionRemoved) and not ev.group_id:
            return None  # the removal of a question that was never asked (older logs): no client knows it
        match ev:
            case InteractionAsked():
                name, body = b"interaction.add", _enc.encode(add_frame(ev))
            case InteractionAnswered():
                name, body = (
                    b"interaction.answered",
                    _enc.encode(TerminalFrame(interaction_id=ev.interaction_id, group_id=ev.group_id)),
                )
            case InteractionRemoved():
                name, body = (
                    b"interaction.removed",
                    _enc.encode(TerminalFrame(interaction_id=ev.interaction_id, group_id=ev.group_id)),
                )
        others = offered_at_first(ev) if isinstance(ev, InteractionAsked) else ev.offered
        return Entry(seq, b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, name, body), ev.audience, others=others)

    def _routed(self, seq: int, ev: InteractionRouted, live: bool) -> Entry | None:
        """A routing step (docs/routing.md): the answer door decides the next vote on it, and
        the people an escalation or a delegation offered the question to get its ``add`` frame
        now (only they: everyone else has it already). A replay has no asked event at hand and
        sends nothing; the list door has the question."""
        if not live or self._asked is None:
            return None
        self._asked.observe([Stored(seq=seq, event=ev, trace=None)])
        asked = self._asked.get(ev.interaction_id)
        if not ev.to or ev.step not in ("escalated", "delegated") or asked is None:
            return None
        assert isinstance(asked.event, InteractionAsked)
        body = _enc.encode(add_frame(asked.event))
        return Entry(
            seq, b"id: %d\nevent: interaction.add\ndata: %s\n\n" % (seq, body), OFFERED_ONLY, others=ev.to
        )


def audience_of(who: Principal) -> str | None:
    """The audience filter of a caller: its own identity when restricted, none for an operator
    (docs/doors/stream.md#audience-filter)."""
    return who.identity if who.restricted else None


def frame(seq: int, data: bytes, who: Principal) -> bytes | None:
    """The SSE frame of one log message for this caller, or None when it is not theirs to see."""
    entry = InteractionFeed().entry(seq, data, None, live=False)
    return entry.frame if entry is not None and sees(entry, audience_of(who), None) else None


def writer_of(request: Request[Any, Any, Any]) -> Writer | None:
    """The connection's direct writer (the door's own HTTP server offers one; another does not)."""
    writer = request.scope.get(SSE_WRITER)
    return writer if isinstance(writer, DirectBody) else None


def evicted_frame(through: int) -> bytes:
    """The last frame of a client too slow for its queue (docs/doors/stream.md#slow-clients)."""
    return b"id: %d\nevent: stream.evicted\ndata: {}\n\n" % through


def documented_stream(frames: str, seq: str) -> type[Operation]:
    """A Server-Sent Events door's operation: its frames, its headers, and the 503 of the streams'
    shared capacity (docs/doors/stream.md#capacity)."""
    return documented(
        ok={
            "description": frames,
            "headers": {
                "Cache-Control": header(text("no-cache"), "Never cached."),
                "X-Accel-Buffering": header(text("no"), "Proxies must not buffer."),
                "Layby-Stream-Seq": header(SEQ, seq),
            },
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        responses={
            "503": error(
                "This door process serves `LAYBY_SSE_MAX_CLIENTS` streams already, or the consumer of "
                "the stream's shared tail could not be created (docs/doors/stream.md#capacity).",
                (TOO_MANY_STREAMS, STREAM_UNAVAILABLE),
                headers={
                    "Retry-After": header(
                        {"type": "integer", "const": STREAM_RETRY_AFTER}, "Seconds to wait."
                    )
                },
            )
        },
    )


_STREAM_DOC = documented_stream(
    "The feed: `interaction.add` frames (data: a PendingQuestion), `interaction.answered` and "
    "`interaction.removed` frames (data: exactly `{interaction_id, group_id}`), and `: keepalive` "
    "comments.",
    "The frames follow this stream sequence (docs/doors/stream.md).",
)


@get(
    "/api/interactions/stream",
    operation_id="streamInteractions",
    tags=["interactions"],
    operation_class=_STREAM_DOC,
    summary="Live add/answered/removed frames (Server-Sent Events)",
    description="Tail only: events appended after the client connected, each frame's `id:` the JetStream "
    "stream sequence of its event (docs/doors/stream.md). The response never ends.",
)
async def stream_door(
    request: Request[Any, Any, Any],
    door: Door,
    who: Who,
    last_event_id_header: LastEventIdHeader = None,
    last_event_id: LastEventId = None,
) -> Stream:
    raw = last_event_id_header or last_event_id or None  # an empty value is no value; the header wins
    names = door.store.names
    return await tail(
        door,
        who,
        raw,
        stream=names.events_stream,
        subject=names.ix_all,
        feed=InteractionFeed(door.asked),
        logger=log,
        direct=writer_of(request),
    )


async def tail(
    state: DoorState,
    who: Principal,
    raw: str | None,
    *,
    stream: str,
    subject: str,
    feed: Feed,
    logger: FilteringBoundLogger,
    topic: str | None = None,
    direct: Writer | None = None,
) -> Stream:
    """An SSE response following ``subject`` of ``stream`` from the client's last seen id
    (``raw``), or from the live end (docs/doors/stream.md#resume-with-last-event-id), served by
    the process's shared tail (docs/doors/stream.md#one-shared-tail); a fallback to the live end
    is logged on the door's own ``logger``. ``topic``: only the entries of this topic; ``direct``:
    the connection's writer, when the server offers one (``writer_of``)."""
    tails = state.tails
    # Counted before the response starts: a client the door cannot serve gets 503, never a 200
    # that goes silent (docs/doors/stream.md#capacity).
    if tails.clients >= state.settings.sse_max_clients:
        raise Busy(TOO_MANY_STREAMS, retry_after=STREAM_RETRY_AFTER)
    first, last = await state.store.bounds(stream)
    start, fallback = resume_point(raw, first, last, state.settings.sse_resume_window)
    if fallback is not None:
        logger.warning(
            f"{feed.name}.resume_fallback",
            reason=fallback,
            first_seq=first,
            last_seq=last,
            identity=who.identity,
        )
    try:
        listener = await tails.attach(
            stream=stream, subject=subject, feed=feed, start=start, audience=audience_of(who), topic=topic
        )
    except Unavailable as exc:
        log.warning("stream.subscribe_failed", error=str(exc))
        raise Busy(STREAM_UNAVAILABLE, retry_after=STREAM_RETRY_AFTER) from exc
    listener.direct = direct
    listener.watchdog = asyncio.get_running_loop().call_later(UNSTARTED_STREAM_SECONDS, listener.release)
    return Stream(
        frames(listener, state.settings.sse_keepalive_seconds, evicted_frame),
        media_type="text/event-stream",
        headers={
            "Cache-Control": "no-cache",
            "Connection": "keep-alive",
            "X-Accel-Buffering": "no",
            # Frames follow this sequence (docs/doors/stream.md#the-start-position).
            "Layby-Stream-Seq": str(start - 1),
        },
    )
