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
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import nats.errors
import nats.js.errors
from litestar import Request, get
from litestar.response import Stream
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from structlog.typing import FilteringBoundLogger

from layby_contracts.events import InteractionAnswered, InteractionAsked, InteractionRemoved, decode_event
from layby_contracts.http import TerminalFrame
from layby_domain.frames import add_frame
from layby_domain.interaction import of_caller_ask
from layby_server import tracing
from layby_server.auth import Principal
from layby_server.eventstore import Stored
from layby_server.logs import get_logger
from layby_services.door.cache import AskedCache
from layby_services.door.deps import DoorState, door, principal_of
from layby_services.door.errors import Busy
from layby_services.door.messages import STREAM_UNAVAILABLE, TOO_MANY_STREAMS
from layby_services.door.query import LastEventId, LastEventIdHeader

log = get_logger("layby.door.stream")
_enc = msgspec.json.Encoder()
KEEPALIVE = b": keepalive\n\n"
_SEQ = re.compile(r"[0-9]{1,19}")
STREAM_RETRY_AFTER = 5
"""Seconds a client refused for capacity is told to wait (Retry-After)."""
UNSTARTED_STREAM_SECONDS = 30.0
"""A subscription whose response never started iterating is released after this long."""


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


def frame(
    seq: int,
    data: bytes,
    who: Principal,
    asked: AskedCache | None = None,
    headers: dict[str, str] | None = None,
) -> bytes | None:
    """The SSE frame of one log message for this caller, or None when it is not theirs to see.

    Events passing by also feed the door's asked-event cache, which then often holds a question
    before the projector has applied it.
    """
    try:
        ev = decode_event(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        log.warning("stream.skip_malformed", seq=seq)
        return None
    if not isinstance(ev, InteractionAsked | InteractionAnswered | InteractionRemoved):
        return None  # run, caller-outcome, door and visit events are not part of the interactions stream
    if of_caller_ask(ev):
        return None  # a caller ask is no person's question (docs/caller-asks.md#hidden-from-the-inbox)
    if asked is not None:
        asked.observe([Stored(seq=seq, event=ev, trace=tracing.carrier_of(headers))])
    if who.restricted and ev.audience != who.identity:
        return None
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
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, name, body)


class _Subscription:
    """One client's JetStream subscription and its slot under the stream cap, released exactly
    once: when the client's frames end, or — if the response never starts iterating them (the
    client left before the first byte) — by a watchdog, so nothing is left behind."""

    def __init__(self, state: DoorState, subject: str) -> None:
        self._state = state
        self._subject = subject
        self.inbox: asyncio.Queue[Msg] = asyncio.Queue()
        self.sub: Any = None
        self._released = False
        self._watchdog: asyncio.TimerHandle | None = None

    async def open(self, start: int) -> None:
        state = self._state
        if state.open_streams >= state.settings.sse_max_clients:
            raise Busy(TOO_MANY_STREAMS, retry_after=STREAM_RETRY_AFTER)
        state.open_streams += 1
        try:
            self.sub = await state.store.js.subscribe(
                self._subject,
                ordered_consumer=True,
                config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start),
                cb=self._deliver,
            )
        except (nats.errors.Error, nats.js.errors.Error, OSError) as exc:
            await self.release()
            log.warning("stream.subscribe_failed", error=f"{type(exc).__name__}: {exc}")
            raise Busy(STREAM_UNAVAILABLE, retry_after=STREAM_RETRY_AFTER) from exc
        loop = asyncio.get_running_loop()
        self._watchdog = loop.call_later(
            UNSTARTED_STREAM_SECONDS, lambda: asyncio.ensure_future(self.release())
        )

    async def _deliver(self, msg: Msg) -> None:
        self.inbox.put_nowait(msg)

    def started(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    async def release(self) -> None:
        if self._released:
            return
        self._released = True
        self.started()
        self._state.open_streams -= 1
        if self.sub is not None:
            try:
                await self.sub.unsubscribe()
            except (nats.errors.Error, RuntimeError):
                pass


Framer = Callable[[int, bytes, Principal], bytes | None]


async def _frames(
    state: DoorState, who: Principal, opened: _Subscription, keepalive: float, framer: Framer | None = None
) -> AsyncIterator[bytes]:
    """The frames of an open subscription; ending (or a client that leaves) releases it."""
    opened.started()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + keepalive
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                yield KEEPALIVE
                deadline = loop.time() + keepalive
                continue
            try:
                async with asyncio.timeout(remaining):  # no task per message, unlike wait_for
                    msg = await opened.inbox.get()
            except TimeoutError:
                continue
            seq = msg.metadata.sequence.stream
            out = (
                framer(seq, msg.data, who) if framer else frame(seq, msg.data, who, state.asked, msg.headers)
            )
            if out is not None:
                yield out
                deadline = loop.time() + keepalive  # only a delivered frame re-arms the keepalive
    finally:
        await opened.release()


@get(
    "/api/interactions/stream",
    summary="Live add/answered/removed frames (Server-Sent Events)",
    description="Tail only: events appended after the client connected, each frame's `id:` the JetStream "
    "stream sequence of its event (docs/doors/stream.md). The response never ends.",
)
async def stream_door(
    request: Request[Any, Any, Any],
    last_event_id_header: LastEventIdHeader = None,
    last_event_id: LastEventId = None,
) -> Stream:
    state = door(request)
    who = principal_of(request)
    raw = last_event_id_header or last_event_id or None  # an empty value is no value; the header wins
    names = state.store.names
    return await tail(
        state, who, raw, stream=names.events_stream, subject=names.ix_all, logger=log, logger_name="stream"
    )


async def tail(
    state: DoorState,
    who: Principal,
    raw: str | None,
    *,
    stream: str,
    subject: str,
    logger: FilteringBoundLogger,
    logger_name: str,
    framer: Framer | None = None,
) -> Stream:
    """An SSE response following ``subject`` of ``stream`` from the client's last seen id
    (``raw``), or from the live end (docs/doors/stream.md#resume-with-last-event-id); a fallback
    to the live end is logged on the door's own ``logger``."""
    first, last = await state.store.bounds(stream)
    start, fallback = resume_point(raw, first, last, state.settings.sse_resume_window)
    if fallback is not None:
        logger.warning(
            f"{logger_name}.resume_fallback",
            reason=fallback,
            first_seq=first,
            last_seq=last,
            identity=who.identity,
        )
    # Subscribed before the response starts: a client the door cannot serve gets 503, never a
    # 200 that goes silent (docs/doors/stream.md#capacity).
    opened = _Subscription(state, subject)
    await opened.open(start)
    return Stream(
        _frames(state, who, opened, state.settings.sse_keepalive_seconds, framer),
        media_type="text/event-stream",
        headers={
            "Cache-Control": "no-cache",
            "Connection": "keep-alive",
            "X-Accel-Buffering": "no",
            # Frames follow this sequence (docs/doors/stream.md#the-start-position).
            "Layby-Stream-Seq": str(start - 1),
        },
    )
