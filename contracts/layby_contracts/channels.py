"""The channel plugin contract: what a channel receives and the errors it raises.

A channel plugin (see docs/channels.md) implements ``Channel``; the delivery service hands it a
``ChannelDelivery`` and reads its ``ChannelDeliveryError``. The SDK raises the same
``ChannelDeliveryError`` to the asker when delivery finally fails, so it lives with the wire
contract rather than in the server.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from layby_contracts.events import MediaItem
from layby_contracts.notification import ChannelTemplate as ChannelTemplate  # noqa: PLC0414 - re-exported
from layby_contracts.notification import NotificationFields


class ChannelDeliveryError(RuntimeError):
    """A send failed. ``retryable`` says whether another attempt may succeed; ``retry_after`` is
    the medium's requested pause in seconds. Raised to the asker when delivery finally fails."""

    def __init__(self, message: str, *, retryable: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class ChannelInputError(ChannelDeliveryError):
    """The medium refuses the shape of this input for good (never retried)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ChannelDelivery(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What a channel sends (docs/aggregates/interaction.md#channel-delivery): the question and the callback
    URL to answer through.

    ``options`` exactly when select; ``schema`` exactly when form; ``suggested_replies`` are a
    text question's tappable shortlist (they constrain nothing); ``media`` carry absolute URLs.
    ``timeout_at`` is the deadline (``expiry_at`` for a park). ``interaction_id`` is stable
    across retries and redeliveries, so a medium that de-duplicates can key on it.
    """

    interaction_id: str
    question: str
    answer_format: str
    callback_url: str
    timeout_at: datetime
    recipient: str | None = None
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    suggested_replies: list[str] | None = None
    media: list[MediaItem] | None = None
    data: dict[str, Any] | None = None
    pages: list[dict[str, Any]] | None = None
    reply_ids: list[str] | None = None
    """The author's id of each option or suggested reply (a chat channel sends it back on a tap)."""


class ChannelNotification(NotificationFields, frozen=True, kw_only=True, forbid_unknown_fields=False):
    """A one-way message a channel sends (docs/notifications.md): nothing is asked, no ticket is
    minted, nothing waits for it.

    ``message`` is the text (the body of a template's fallback, the caption of its media);
    ``media`` carry absolute URLs; ``template`` and ``media``/``options`` are exclusive;
    ``options`` are quick replies whose tap comes back as an inbound message; ``schema`` (with
    ``data`` and ``pages``, as on a form ask) is an ask-less form whose submission comes back as
    an inbound message naming ``notification_id``. ``notification_id`` is stable, so a medium
    that de-duplicates can key on it. ``sender_identity`` is the sender's identity; ``channel``
    and ``audience`` are left unset (the plugin is the channel; the feed is not its business)."""

    notification_id: str


class Posted(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a chat channel posted a question: returned by ``deliver`` so replies to that message
    (a thread, a reply-to, a tap) can be correlated to the question, and the message retracted.
    ``chat`` and ``message`` are the medium's ids (a Slack channel and ``ts``; a Telegram chat id
    and message id); ``extra`` is anything else the plugin needs to edit it later."""

    chat: str
    message: str
    extra: dict[str, Any] | None = None


class Retraction(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How a delivered question ended, for the plugin to update its message: ``answered`` (``by``
    whom, ``via`` which surface), ``expired``, or ``removed`` (``reason``)."""

    interaction_id: str
    question: str
    outcome: Literal["answered", "expired", "removed"]
    by: str | None = None
    via: str | None = None
    reason: str | None = None


class InboundRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP request a provider sent to ``/api/channels/{name}/events``, as received: the raw
    body (signatures cover it byte for byte), headers with lower-case names, the query."""

    method: str
    url: str
    headers: dict[str, str]
    query: dict[str, str]
    body: bytes


class InboundReply(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One thing a person did on a chat channel, as the plugin read it.

    ``kind``: ``tap`` (tapped option or suggested reply ``index`` of ``interaction_id``),
    ``yes_no`` (tapped yes or no: ``value`` is the bool), ``typed`` (typed text in ``value``),
    ``submitted`` (a form's values in ``value``), ``open_form`` (asked to open
    ``interaction_id``'s form). ``chat`` and
    ``message`` locate it: ``message`` is the posted question it refers to (the tapped message, the
    thread root, the message replied to), if any. ``direct``: the chat is the person's own with
    the bot, where a plain message answers the last question posted there (in a shared chat a
    reply must say which question it answers). ``event_id`` is the provider's id of the
    delivery, so a redelivered event is taken once. ``context`` is the plugin's own (a callback
    query id, a trigger id) for its follow-ups."""

    kind: Literal["tap", "yes_no", "typed", "submitted", "open_form"]
    sender: str
    chat: str
    sender_name: str | None = None
    message: str | None = None
    interaction_id: str | None = None
    index: int | None = None
    value: Any = None
    event_id: str | None = None
    context: dict[str, Any] | None = None
    direct: bool = False
    params: dict[str, Any] | None = None
    """What the plugin read beside the reply (a template button's payload, an ad's referral):
    opaque transport data, kept with the inbound message it becomes (docs/channels.md#inbound-messages)."""
    notification_id: str | None = None
    """A reply to a notification: a tap on one of its options, or a submission of the ask-less
    form it carried (``kind="submitted"``). It answers no question and is recorded as an inbound
    message from the person as it is."""


class InboundResponse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What the door answers the provider (its acknowledgement, or a handshake's answer)."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain"


class Inbound(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A verified inbound request, parsed: the replies in it and, for a handshake (Slack's
    ``url_verification``) or an event the plugin ignores, the response to send at once."""

    replies: list[InboundReply] = msgspec.field(default_factory=list)
    response: InboundResponse | None = None


class ReplyOutcome(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What became of one reply (docs/channels.md#replies): ``answered`` (it won), ``already``
    (the question was answered by this or another reply first), ``rejected`` (the question
    refused it: ``reason``; ``notice`` is the line to send the person, absent under ``bridge``),
    ``late`` (the question is gone), ``bridged`` / ``unmatched`` (recorded as an inbound message),
    ``form_opened``."""

    status: Literal["answered", "already", "rejected", "late", "bridged", "unmatched", "form_opened"]
    interaction_id: str | None = None
    question: str | None = None
    answer: Any = None
    reason: str | None = None
    notice: str | None = None


class InboundRefused(Exception):
    """The request is not from the provider (a missing, stale or wrong signature): 401, and
    nothing is recorded. The message is for the log only; the response never echoes it."""


class InboundMalformed(Exception):
    """A verified request the plugin cannot read: 400 naming what is wrong."""


@runtime_checkable
class Channel(Protocol):
    """Every plugin delivers; ``deliver`` may return where it posted (``Posted``) so replies can
    be correlated and the message retracted, or None (a bridge that relays to the callback URL)."""

    async def deliver(self, delivery: ChannelDelivery) -> Posted | None: ...


@runtime_checkable
class Notifier(Channel, Protocol):
    """A channel that also sends one-way notifications (docs/notifications.md#on-a-channel).
    ``notify`` is **one** send attempt and returns the ids the medium gave the messages it sent
    (one per message: a media item, the text); it fails as ``deliver`` does
    (``ChannelDeliveryError``; ``ChannelInputError`` for a refusal of the input's shape). What it
    may be handed is gated by its optional flags, checked before anything is recorded:
    ``supports_media_notifications`` (``media``), ``supports_template_notifications``
    (``template``), ``supports_interactive_notifications`` (``options``) and
    ``supports_form_notifications`` (``schema``)."""

    async def notify(self, notification: ChannelNotification) -> list[str]: ...


NOTIFY_FLAGS: dict[str, str] = {
    "media": "supports_media_notifications",
    "template": "supports_template_notifications",
    "options": "supports_interactive_notifications",
    "schema": "supports_form_notifications",
}
"""Which capability flag a notification's field needs on its channel."""


@runtime_checkable
class ChatChannel(Channel, Protocol):
    """A channel with its own inbound webhook (docs/channels.md#chat-channels): the door hands it
    each request to verify and parse, tells it each reply's outcome (``respond``: what the
    provider is answered, within its acknowledgement window; ``follow_up``: sends after the
    acknowledgement), asks it to open a form surface, and the delivery service asks it to retract
    a question resolved elsewhere."""

    async def inbound(self, request: InboundRequest) -> Inbound: ...

    async def respond(self, reply: InboundReply, outcome: ReplyOutcome) -> InboundResponse | None: ...

    async def follow_up(self, reply: InboundReply, outcome: ReplyOutcome) -> None: ...

    async def open_form(self, reply: InboundReply, delivery: ChannelDelivery) -> None: ...

    async def retract(self, posted: Posted, retraction: Retraction) -> None: ...


@runtime_checkable
class ConversationChannel(ChatChannel, Protocol):
    """A chat channel that also posts a conversation route's replies into the chat its message
    came from (docs/doors/hooks.md#conversations-on-a-chat-channel). ``say`` is optional: a chat
    plugin without it keeps its webhook, and its conversations' replies are logged as not posted.
    ``say`` is one attempt, failing as ``deliver`` does (``ChannelDeliveryError`` with
    ``retryable``); ``thread`` is the provider's id of a message to reply under."""

    async def say(self, chat: str, text: str, thread: str | None = None) -> None: ...
