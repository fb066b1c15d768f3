"""What the door does with a chat channel's inbound request (docs/channels.md#replies).

In order: the plugin authenticates the request exactly as its provider signs it (a failure is
401 and nothing is recorded) and reads the replies in it. Each reply is taken once (the
provider's event id is claimed on the chat stream, so a redelivery is a no-op), correlated to
its question, and decided on the log through the same race as every other door
(``decide_reply``), answered by ``<channel>:<sender>``. A reply the question refuses keeps the
question open: under ``retry`` the person is told what is expected, under ``bridge`` the reply
becomes an inbound message; a reply to a question that is gone, or to none, becomes an inbound
message too, so no reply is lost. Only then is the provider acknowledged; what the plugin sends
afterwards (a notice, a tap's acknowledgement) runs after the response. A failure before the
decision releases the claim and fails the request, so the provider delivers it again.

A message that answers no question (``unmatched``) may be a turn of a conversation
(docs/doors/hooks.md#conversations-on-a-chat-channel): once it is recorded, ``converse`` (the
door's conversation routes) is handed it in the background with a visit id derived from the
provider's event id, so a redelivery can never visit twice and the provider's acknowledgement
never waits for a visit.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal

from layby_contracts.channels import (
    ChannelDeliveryError,
    ChatChannel,
    InboundReply,
    InboundRequest,
    InboundResponse,
    ReplyOutcome,
)
from layby_contracts.errors import BadInput, Conflict, Forbidden
from layby_contracts.events import ChannelMessageReceived, InteractionAsked
from layby_domain.clock import Clock
from layby_domain.formats import format_named
from layby_domain.interaction import Interaction, channels_of, decide_reply, mismatch_notice, targets_of
from layby_server.channels import delivery_of
from layby_server.chat import correlation
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore
from layby_server.write.resolve import read_state, resolve

log = get_logger("layby.door.chat")
Converse = Callable[[ChannelMessageReceived, str], Awaitable[None]]
"""Visit a conversation route with an unmatched message, under the given visit id."""
_VISITS = uuid.UUID("6b1d5f3e-9a0c-4f57-8a2e-0c7d3b9e4f21")
"""The namespace of visit ids derived from a provider's event id (uuid5)."""
DRAIN_SECONDS = 5.0
"""How long closing waits for the background work (visits above all) before cancelling it."""


class ChatInbound:
    def __init__(
        self,
        store: EventStore,
        clock: Clock,
        plugins: Mapping[str, ChatChannel],
        public_base_url: str,
        *,
        converse: Converse | None = None,
    ):
        self._store = store
        self._clock = clock
        self.plugins = plugins
        self._public_base_url = public_base_url
        self._converse = converse
        self._follow_ups: set[asyncio.Task[None]] = set()

    async def handle(self, name: str, plugin: ChatChannel, request: InboundRequest) -> InboundResponse:
        """Raises ``InboundRefused`` / ``InboundMalformed`` from the plugin (the door's 401 and
        400), and any failure to record (the provider retries)."""
        inbound = await plugin.inbound(request)
        response = inbound.response
        for reply in inbound.replies:
            outcome = await self._take(name, plugin, reply)
            if outcome is None:
                continue
            answered = await plugin.respond(reply, outcome)
            response = answered or response
            self._background(self._follow_up(name, plugin, reply, outcome))
        return response or InboundResponse()

    def _background(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._follow_ups.add(task)
        task.add_done_callback(self._follow_ups.discard)

    async def _follow_up(
        self, name: str, plugin: ChatChannel, reply: InboundReply, outcome: ReplyOutcome
    ) -> None:
        try:
            await plugin.follow_up(reply, outcome)
        except Exception as exc:  # noqa: BLE001 - a follow-up is best effort; the decision stands
            log.warning("chat.follow_up_failed", channel=name, status=outcome.status, error=repr(exc))

    async def _take(self, name: str, plugin: ChatChannel, reply: InboundReply) -> ReplyOutcome | None:
        seen = None
        if reply.event_id is not None:
            seen = self._store.names.chat_seen(correlation.key(name, reply.event_id))
            if not await self._store.claim_once(seen):
                log.info("chat.redelivered", channel=name, event_id=reply.event_id)
                return None
        try:
            return await self._decide(name, plugin, reply)
        except BaseException:
            if seen is not None:
                try:
                    await self._store.release(seen)
                except Exception as exc:  # noqa: BLE001 - the original failure is what counts
                    log.warning("chat.release_failed", channel=name, error=repr(exc))
            raise

    async def _decide(self, name: str, plugin: ChatChannel, reply: InboundReply) -> ReplyOutcome:
        if reply.notification_id is not None:
            # A notification's ask-less form answers no question: the submission is an ordinary
            # message from the person (docs/notifications.md#what-you-can-do).
            await self._record(name, reply, "unmatched", None)
            return ReplyOutcome(status="unmatched")
        interaction_id = await correlation.question_of(self._store, name, reply)
        if interaction_id is None and correlation.by_latest(reply):
            interaction_id = await correlation.newer_latest(self._store, name, reply, None)
        if interaction_id is None:
            await self._record(name, reply, "unmatched", None)
            return ReplyOutcome(status="unmatched")
        state = await read_state(self._store, self._store.names.ix(interaction_id), leader=True)
        if state.status not in ("pending", "absent") and correlation.by_latest(reply):
            newer = await correlation.newer_latest(self._store, name, reply, interaction_id)
            if newer is not None:
                interaction_id = newer
                state = await read_state(self._store, self._store.names.ix(newer), leader=True)
        if state.status == "absent":
            await self._record(name, reply, "unmatched", None)
            return ReplyOutcome(status="unmatched")
        asked = await self._asked(interaction_id, state)
        # A routed question is also on the channels its escalations added (docs/routing.md).
        on = (
            (state.facts.channels if state.facts is not None else None) or channels_of(asked)
            if asked
            else None
        )
        if asked is None or name not in (on or []):
            # Only a question posted on this channel can be answered from it: a control naming
            # any other question is not a reply to it.
            await self._record(name, reply, "unmatched", None)
            return ReplyOutcome(status="unmatched")
        if reply.kind == "open_form":
            return await self._open_form(name, plugin, reply, state, asked)
        by = f"{name}:{reply.sender}"
        try:
            resolved = await resolve(
                self._store,
                interaction_id,
                lambda s: decide_reply(
                    s,
                    reply=reply,
                    by=by,
                    now=self._clock.now(),
                ),
                seed=state,
            )
        except (Forbidden, Conflict) as exc:
            # A routed question (docs/routing.md): someone who does not decide it, or decided it
            # already. Told so; nothing is recorded.
            return ReplyOutcome(
                status="rejected",
                interaction_id=interaction_id,
                question=asked.question,
                reason=exc.message,
                notice=exc.message,
            )
        except BadInput as exc:
            if asked.chat is not None and asked.chat.on_mismatch == "bridge":
                await self._record(name, reply, "mismatch", asked)
                return ReplyOutcome(status="bridged", interaction_id=interaction_id, reason=exc.message)
            return ReplyOutcome(
                status="rejected",
                interaction_id=interaction_id,
                question=asked.question,
                reason=exc.message,
                notice=mismatch_notice(asked, exc.message),
            )
        question = asked.question
        if resolved.appended is not None:
            answer = getattr(resolved.appended, "answer", None)
            log.info("chat.answered", channel=name, interaction_id=interaction_id)
            return ReplyOutcome(
                status="answered", interaction_id=interaction_id, question=question, answer=answer
            )
        winner = resolved.state.answered
        if winner is not None and winner.answered_by == by and reply.kind != "typed":
            return ReplyOutcome(status="already", interaction_id=interaction_id, question=question)
        await self._record(name, reply, "late", asked, interaction_id=interaction_id)
        return ReplyOutcome(status="late", interaction_id=interaction_id, question=question)

    async def _asked(self, interaction_id: str, state: Interaction) -> InteractionAsked | None:
        if state.asked is not None:
            return state.asked
        first = await self._store.first(self._store.names.ix(interaction_id))
        return first.event if first is not None and isinstance(first.event, InteractionAsked) else None

    async def _open_form(
        self,
        name: str,
        plugin: ChatChannel,
        reply: InboundReply,
        state: Interaction,
        asked: InteractionAsked | None,
    ) -> ReplyOutcome:
        if state.status != "pending" or asked is None:
            return ReplyOutcome(status="late", interaction_id=reply.interaction_id)
        recipient = next((t.recipient for t in targets_of(asked) if t.channel == name), None)
        delivery = delivery_of(
            asked, callback_url="", public_base_url=self._public_base_url, recipient=recipient
        )
        try:
            await plugin.open_form(reply, delivery)
        except ChannelDeliveryError as exc:
            # The surface could not be opened (an expired trigger, a refused view): the question
            # stays open; the person may tap again.
            log.warning(
                "chat.open_form_failed", channel=name, interaction_id=asked.interaction_id, error=str(exc)
            )
            return ReplyOutcome(status="rejected", interaction_id=asked.interaction_id, reason=str(exc)[:300])
        return ReplyOutcome(
            status="form_opened", interaction_id=asked.interaction_id, question=asked.question
        )

    async def _record(
        self,
        name: str,
        reply: InboundReply,
        reason: Literal["late", "mismatch", "unmatched"],
        asked: InteractionAsked | None,
        *,
        interaction_id: str | None = None,
    ) -> None:
        """An inbound message on the messages stream: nothing a person writes is lost."""
        text = reply.value if isinstance(reply.value, str) else None
        if reply.kind == "tap" and asked is not None and reply.index is not None:
            text = _choice(asked, reply.index)
        event = ChannelMessageReceived(
            message_id=str(uuid.uuid4()),
            channel=name,
            sender=reply.sender,
            sender_name=reply.sender_name,
            chat=reply.chat,
            received_at=self._clock.now(),
            reason=reason,
            text=text,
            value=None if isinstance(reply.value, str) else reply.value,
            interaction_id=interaction_id or (asked.interaction_id if asked is not None else None),
            audience=asked.audience if asked is not None else None,
            notification_id=reply.notification_id,
            params=reply.params or None,
        )
        msg_id = f"msg-{name}-{reply.event_id}" if reply.event_id else f"msg-{event.message_id}"
        await self._store.append_message(self._store.names.messages(name), event, msg_id=msg_id)
        log.info("chat.inbound_message", channel=name, reason=reason, interaction_id=event.interaction_id)
        if reason == "unmatched" and self._converse is not None:
            # A redelivered event gets the same visit id, and a visit id seen before is answered
            # with what that visit did: the message is visited once.
            key = f"{name}\x00{reply.event_id}" if reply.event_id else event.message_id
            self._background(self._visit(self._converse, event, str(uuid.uuid5(_VISITS, key))))

    async def _visit(self, converse: Converse, event: ChannelMessageReceived, visit_id: str) -> None:
        try:
            await converse(event, visit_id)
        except Exception as exc:  # noqa: BLE001 - the message stays on the messages stream; logged
            log.error(
                "chat.conversation_failed",
                channel=event.channel,
                message_id=event.message_id,
                visit_id=visit_id,
                error=repr(exc)[:300],
            )

    async def aclose(self) -> None:
        """Let the background work finish (a visit in flight is not cut short by a restart),
        then cancel what is left."""
        if self._follow_ups:
            await asyncio.wait(list(self._follow_ups), timeout=DRAIN_SECONDS)
        for task in list(self._follow_ups):
            task.cancel()


def _choice(asked: InteractionAsked, index: int) -> str | None:
    fmt = format_named(asked.answer_format)
    choices = fmt.choices(fmt.typed(asked.format_payload)) or []
    return choices[index] if 0 <= index < len(choices) else None
