"""Conversation routes fed by chat channels (docs/doors/hooks.md#conversations-on-a-chat-channel).

The chat webhook (``layby_server.chat.inbound``) hands each message that answers no question here,
in the background, once it is recorded. The chat is the conversation ``<channel>:<chat>`` (made
a subject by ``layby_domain.conversations.chat_subject``); its route is the first conversation
door, by name, that names the message's channel and whose ``subjects`` glob matches. The names
of a channel's routes come from the ``doors`` table and are kept for a few seconds, since they
are read on every unmatched message; each candidate's definition is then read from the log, so a
door deleted or changed is seen at once. The visit carries the channel and the chat, so every
outcome of it is posted back into that chat by the delivery service.
"""

from __future__ import annotations

import asyncio
import fnmatch

import asyncpg

from layby_contracts.errors import BadInput, Conflict, NotFound, Transient
from layby_contracts.events import ChannelMessageReceived, DoorSaved
from layby_domain.clock import Clock
from layby_domain.conversations import chat_input, chat_subject
from layby_domain.doors import is_door_name
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_server.write.visits import Visitor

log = get_logger("layby.door.conversations")
ROUTES_CACHE_SECONDS = 3.0
"""How long a channel's list of routes is trusted: a route saved or deleted is seen within it."""
ATTEMPTS = 3
"""Visits of one message when the log is briefly unavailable; a visit id is visited once, so
another attempt never acts twice."""
_ROUTES = """
SELECT name FROM doors
WHERE kind = 'conversation' AND NOT deleted AND spec->>'channel' = $1
ORDER BY name
"""


class ChatConversations:
    """Visits the route of a chat message that answered no question (``ChatInbound``'s
    ``converse``)."""

    def __init__(self, pool: asyncpg.Pool, visitor: Visitor, clock: Clock) -> None:
        self._pool = pool
        self._visitor = visitor
        self._clock = clock
        self._routes: dict[str, tuple[float, list[str]]] = {}

    async def __call__(self, message: ChannelMessageReceived, visit_id: str) -> None:
        subject = chat_subject(message.channel, message.chat)
        door = await self.route(message.channel, subject)
        if door is None:
            return  # an ordinary message to the bot: it stays on the messages stream only
        said = log.bind(channel=message.channel, door=door.name, subject=subject, visit_id=visit_id)
        for attempt in range(1, ATTEMPTS + 1):
            try:
                result = await self._visitor.visit(
                    visit_id=visit_id,
                    kind="conversation",
                    by=Principal(identity=door.by, role="operator"),
                    door=door,
                    subject=subject,
                    input=chat_input(message),
                    label=f"{message.channel}:{message.sender}",
                    via=(message.channel, message.chat),
                )
            except (BadInput, Conflict, NotFound) as exc:
                # Refused: the visitor recorded it on the visit's log; the person's message stays
                # on the messages stream.
                said.warning("chat.conversation_refused", error=str(exc)[:300])
                return
            except Transient:
                if attempt == ATTEMPTS:
                    raise
                await asyncio.sleep(0.2 * 2**attempt)
                continue
            said.info("chat.conversation_visited", action=result.action)
            return

    async def route(self, channel: str, subject: str) -> DoorSaved | None:
        """The first conversation door, by name, naming ``channel`` whose glob matches."""
        for name in await self._names(channel):
            found = await self._visitor.door(name) if is_door_name(name) else None
            if found is None or found.spec.kind != "conversation" or found.spec.channel != channel:
                continue  # deleted or changed since the table was read
            if fnmatch.fnmatchcase(subject, found.spec.subjects or "*"):
                return found
        return None

    async def _names(self, channel: str) -> list[str]:
        now = self._clock.monotonic()
        cached = self._routes.get(channel)
        if cached is not None and now - cached[0] < ROUTES_CACHE_SECONDS:
            return cached[1]
        names = [row["name"] for row in await self._pool.fetch(_ROUTES, channel)]
        self._routes[channel] = (now, names)
        return names
