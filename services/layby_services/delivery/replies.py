"""Post a conversation's replies into the chat its messages come from
(docs/doors/hooks.md#conversations-on-a-chat-channel).

Every outcome of a conversation visit is recorded as a ``conversation.reply``; one whose visit
came from a chat (``channel`` and ``chat`` set) is posted by that channel's plugin (``say``).
Exactly once: the reply is claimed on the chat stream (``chat.said``, keyed by channel and
visit) before it is posted, and the claim is given back when the post fails, so the consumer's
redelivery posts it again — a retryable failure is raised for the consumer to retry later, any
other is logged and the reply stays on the log unposted.

The chat is the conversation's receiver: once the reply has reached it, a finished or failed
outcome of the entries the visit resumed is taken off the subject (as a conversation visit that
waits takes what it receives), so it does not also wait there and the person's next message
finds the subject free.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from layby_contracts.channels import Channel, ChannelDeliveryError, ConversationChannel
from layby_contracts.commands import Explicit
from layby_contracts.errors import BadInput, Conflict, NotFound
from layby_contracts.events import ConversationReplied
from layby_domain.conversations import reply_text
from layby_server.auth import Principal
from layby_server.chat import correlation
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.visits import Visitor

log = get_logger("layby.delivery.replies")
_TAKES = uuid.UUID("0f4e2b8a-3c71-4d95-b6e0-5a9d17c2e843")
"""The namespace of the take visit derived from a reply's visit id (uuid5): a redelivery takes
once."""


class Replier:
    def __init__(self, store: EventStore, channels: Mapping[str, Channel], visitor: Visitor) -> None:
        self._store = store
        self._channels = channels
        self._visitor = visitor

    async def on_replied(self, stored: Stored) -> None:
        """Post one reply (raises what the consumer should retry: the claim is given back)."""
        ev = stored.event
        assert isinstance(ev, ConversationReplied)
        if ev.channel is None or ev.chat is None:
            return  # a conversation over HTTP, or a take's own record: no chat to post into
        plugin = self._channels.get(ev.channel)
        if not isinstance(plugin, ConversationChannel):
            log.error(
                "delivery.reply_not_posted",
                channel=ev.channel,
                visit_id=ev.visit_id,
                why="the channel is not configured here or cannot post replies (no say)",
            )
            return
        text = reply_text(ev.outcome)
        if text is not None:
            claim = self._store.names.chat_said(
                correlation.key(ev.channel, ev.visit_id or f"seq-{stored.seq}")
            )
            if await self._store.claim_once(claim):
                if not await self._say(plugin, ev, text, claim):
                    return  # refused for good: the outcome stays on the subject, not lost
            else:
                log.info("delivery.reply_redelivered", channel=ev.channel, visit_id=ev.visit_id)
        await self._receive(ev)

    async def _say(self, plugin: ConversationChannel, ev: ConversationReplied, text: str, claim: str) -> bool:
        """Post; False when the channel refused it for good. A failure that may pass is raised
        (and a cancelled post too), its claim given back, so the redelivery posts it."""
        assert ev.chat is not None
        try:
            await plugin.say(ev.chat, text)
        except ChannelDeliveryError as exc:
            await self._release(claim, ev)
            if exc.retryable:
                raise
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - an untyped fault is final, as for deliver
            await self._release(claim, ev)
            error = f"{type(exc).__name__}: {exc}"
        except BaseException:
            await self._release(claim, ev)
            raise
        else:
            log.info(
                "delivery.reply_posted", channel=ev.channel, visit_id=ev.visit_id, status=ev.outcome.status
            )
            return True
        log.error("delivery.reply_failed", channel=ev.channel, visit_id=ev.visit_id, error=error[:300])
        return False

    async def _release(self, claim: str, ev: ConversationReplied) -> None:
        try:
            await self._store.release(claim)
        except Exception as exc:  # noqa: BLE001 - the post's own failure is what counts
            log.warning("delivery.reply_release_failed", visit_id=ev.visit_id, error=repr(exc))

    async def _receive(self, ev: ConversationReplied) -> None:
        """Take the finished or failed outcome of what the visit resumed: it reached the chat."""
        if ev.outcome.status == "parked" or ev.visit_id is None:
            return
        visit = await self._visitor.status(ev.visit_id)
        if visit is None or not visit.resumed:
            return  # a start: its run's outcome never waits on the subject
        who = f"{ev.channel}:{ev.chat}"
        try:
            await self._visitor.visit(
                visit_id=str(uuid.uuid5(_TAKES, ev.visit_id)),
                kind="conversation",
                by=Principal(identity=who, role="operator"),
                subject=visit.subject,
                explicit=Explicit(takes=list(visit.resumed)),
            )
        except (BadInput, Conflict, NotFound) as exc:
            # Taken already (a redelivery, or the route's own resume_expr named it first).
            log.info("delivery.reply_outcome_not_taken", visit_id=ev.visit_id, why=str(exc)[:300])
