"""The built-in ``whatsapp`` channel: questions as WhatsApp Cloud API messages, answers as reply
buttons, list rows, Flows or typed replies (docs/channels.md#whatsapp).

Configuration (``LAYBY_CHANNELS``)::

    {"wa": {"plugin": "whatsapp", "access_token": "wa-token", "app_secret": "wa-app",
            "verify_token": "wa-verify", "phone_number_id": "106540352242922",
            "default_recipient": "4915112345678", "flow_id": "1234567890"}}

``access_token``, ``app_secret`` and ``verify_token`` name entries of ``LAYBY_WEBHOOK_SECRETS``;
their values never appear in a log line or an error. ``api_url`` / ``api_version`` point the
client at another Graph host or version (a test stand-in); ``timeout`` bounds each call in
seconds; ``flow_id`` / ``flow_screen`` / ``flow_mode`` name the published Flow forms open in.

There is no official Python SDK for the Cloud API: ``graph`` is a small httpx client for its one
send endpoint. What a question looks like is in ``rendering`` (pure); reading the webhook is in
``webhook``; this module holds the channel: its settings, sends, and replies' follow-ups.
"""

from __future__ import annotations

import re
from typing import Any

from layby_contracts import channels
from layby_contracts.events import MediaItem
from layby_server.chat import common
from layby_server.chat.whatsapp import webhook
from layby_server.chat.whatsapp.graph import Graph
from layby_server.chat.whatsapp.rendering import (
    FORM_GIVE_UP,
    FORM_RETRY,
    MAX_FORM_RESENDS,
    MEDIA,
    NOT_OPEN,
    TEXT_LIMIT,
    cut,
    media_message,
    notification_messages,
    question_message,
    text_message,
)
from layby_server.observability.logs import get_logger

__all__ = ["API_URL", "API_VERSION", "OPTIONS", "PLUGIN", "WhatsAppChannel"]

log = get_logger("layby_server.chat.whatsapp")

PLUGIN = "whatsapp"
OPTIONS = {
    "access_token",
    "app_secret",
    "verify_token",
    "phone_number_id",
    "api_url",
    "api_version",
    "default_recipient",
    "timeout",
    "flow_id",
    "flow_screen",
    "flow_mode",
}
API_URL = "https://graph.facebook.com"
API_VERSION = "v23.0"
FLOW_SCREEN = "FORM"
_VERSION = re.compile(r"v[0-9]{1,3}\.[0-9]{1,3}")
_DIGITS = re.compile(r"[0-9]{1,32}")
_PHONE = re.compile(r"\+?[0-9][0-9 ()-]{4,30}")
_SCREEN = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
FIELD_KINDS = {"string", "integer", "number", "boolean"}
MAX_FIELDS = 20
REFUSALS_KEPT = 1000
"""Refused Flow submissions remembered until their ``open_form`` reply (the same request)."""


def phone(value: str) -> str:
    """A phone number as WhatsApp ids it: digits only (``+49 151 ...`` -> ``49151...``)."""
    return re.sub(r"[^0-9]", "", value)


class WhatsAppChannel(common.ChatPlugin, plugin=PLUGIN, options=OPTIONS):
    """A WhatsApp Business phone number as a chat channel (docs/channels.md#whatsapp)."""

    supports_form_delivery = True
    supports_media_notifications = True
    supports_template_notifications = True

    def _configure(self, settings: common.PluginConfig) -> None:
        token = settings.secret("access_token")
        app_secret = settings.secret("app_secret")
        verify_token = settings.secret("verify_token")
        number = settings.text(
            "phone_number_id", _DIGITS.fullmatch, "must be the phone number's id (digits)", ids=True
        )
        version = settings.text(
            "api_version", _VERSION.fullmatch, "must look like 'v23.0'", default=API_VERSION
        )
        recipient = settings.optional_text(
            "default_recipient", _PHONE.fullmatch, "must be a phone number in international format"
        )
        flow_id = settings.optional_text(
            "flow_id", _DIGITS.fullmatch, "must be a published Flow's id (digits)", ids=True
        )
        screen = settings.text(
            "flow_screen",
            _SCREEN.fullmatch,
            "must be a Flow screen id (capitals, digits, '_')",
            default=FLOW_SCREEN,
        )
        mode = settings.get("flow_mode", "published")
        if mode not in ("published", "draft"):
            raise ValueError(f"{PLUGIN} flow_mode must be 'published' or 'draft'")
        self.phone_number_id = number
        self.api_url = settings.base_url("api_url", API_URL)
        self.api_version = version
        self.default_recipient = phone(recipient) if recipient else None
        self.flow: tuple[str, str, str] | None = (flow_id, screen, str(mode)) if flow_id else None
        self.supports_form_notifications = self.flow is not None
        """A notification's form needs a Flow to open in."""
        self._app_secret = app_secret.encode()
        self._verify_token = verify_token.encode()
        self._graph = Graph(
            api_url=self.api_url,
            api_version=version,
            phone_number_id=number,
            token=token,
            timeout=settings.timeout(),
            where=f"whatsapp {self.name!r}",
        )
        self._refused: dict[str, str] = {}  # bounded: see respond
        """A Flow submission's event id -> the door's reason for refusing it, from ``respond``
        to the ``open_form`` reply that follows it in the same request."""

    async def aclose(self) -> None:
        await self._graph.aclose()

    # -- outbound -----------------------------------------------------------------------------

    def _to(self, recipient: str | None) -> str:
        target = phone(recipient) if recipient else self.default_recipient
        if recipient and not target:
            raise channels.ChannelInputError(
                f"whatsapp {self.name!r}: recipient {recipient[:64]!r} is not a phone number "
                "in international format"
            )
        if not target:
            raise channels.ChannelInputError(
                f"whatsapp {self.name!r}: no recipient "
                "(give a phone number on the ask or set default_recipient)"
            )
        return target

    async def _media(self, to: str, media: list[MediaItem]) -> tuple[list[str], list[MediaItem]]:
        """Each file as its own message before the question; what WhatsApp refuses becomes a
        link line instead."""
        sent: list[str] = []
        unsent: list[MediaItem] = []
        for item in media:
            if item.kind not in MEDIA:
                continue
            try:
                sent.append((await self._graph.send(to, media_message(item))).wamid)
            except channels.ChannelInputError as exc:
                log.info("whatsapp.media_as_link", channel=self.name, kind=item.kind, error=str(exc))
                unsent.append(item)
        return sent, unsent

    async def identity(self) -> str:
        """``layby doctor``'s check of the access token: the phone number it reads."""
        return await self._graph.identity()

    async def deliver(self, delivery: channels.ChannelDelivery) -> channels.Posted:
        self._refuse_late(delivery)
        to = self._to(delivery.recipient)
        _, unsent = await self._media(to, list(delivery.media or []))
        sent = await self._graph.send(to, question_message(delivery, links=unsent, flow=self.flow))
        return channels.Posted(chat=sent.wa_id or to, message=sent.wamid)

    async def notify(self, notification: channels.ChannelNotification) -> list[str]:
        """Send a one-way notification: a template alone, or each media item then the text (or
        the form's Flow); the ids WhatsApp gave each message, in order."""
        to = self._to(notification.recipient)
        if notification.schema is not None and self.flow is None:
            raise channels.ChannelInputError(
                f"whatsapp {self.name!r}: a form needs flow_id set on the channel"
            )
        return [(await self._graph.send(to, m)).wamid for m in notification_messages(notification, self.flow)]

    async def retract(self, posted: channels.Posted, retraction: channels.Retraction) -> None:
        """WhatsApp cannot edit a delivered message: a short reply to the question says how it
        ended (docs/channels.md#whatsapp-retraction)."""
        await self._graph.send(
            posted.chat, text_message(common.retraction_line(retraction)), reply_to=posted.message
        )

    async def say(self, chat: str, text: str, thread: str | None = None) -> None:
        """A conversation's reply as a text message (replying to ``thread``, a wamid, if given)."""
        await self._graph.send(phone(chat), text_message(cut(text, TEXT_LIMIT)), reply_to=thread)

    def validate_form_schema(self, schema: dict[str, Any], question: str) -> None:
        """Refuse a form the Flow's screen cannot show, naming the property."""
        properties: dict[str, Any] = schema.get("properties") or {}
        if len(properties) > MAX_FIELDS:
            raise ValueError(
                f"a WhatsApp Flow form holds at most {MAX_FIELDS} fields; this form has {len(properties)}"
            )
        for name, prop in properties.items():
            kind = prop.get("type") if isinstance(prop, dict) else None
            if kind not in FIELD_KINDS:
                raise ValueError(
                    f"property {name!r}: a WhatsApp Flow field is a string, integer, number or boolean"
                )

    # -- inbound ------------------------------------------------------------------------------

    async def inbound(self, request: channels.InboundRequest) -> channels.Inbound:
        if request.method == "GET":
            return channels.Inbound(response=webhook.handshake(self._verify_token, request.query))
        webhook.verify(self._app_secret, request.headers, request.body)
        read = webhook.read(request.body, self.phone_number_id)
        for status in read.failures:
            log.warning(
                "whatsapp.message_failed",
                channel=self.name,
                wamid=str(status.get("id")),
                errors=[
                    (e.get("code"), e.get("title")) for e in status.get("errors") or [] if isinstance(e, dict)
                ],
            )
        return channels.Inbound(replies=read.replies)

    async def respond(
        self, reply: channels.InboundReply, outcome: channels.ReplyOutcome
    ) -> channels.InboundResponse | None:
        if reply.kind == "submitted" and outcome.status == "rejected" and reply.event_id is not None:
            # The open_form reply after it (same request) sends the form again with the reason.
            while len(self._refused) >= REFUSALS_KEPT:
                del self._refused[next(iter(self._refused))]
            self._refused[reply.event_id] = outcome.reason or "the answer does not fit the form"
        return None  # Meta needs only the 200; everything else is a follow-up

    async def open_form(self, reply: channels.InboundReply, delivery: channels.ChannelDelivery) -> None:
        """Send a refused form again as a fresh Flow naming the door's reason, at most
        ``MAX_FORM_RESENDS`` times; then say it could not be processed
        (docs/channels.md#whatsapp-forms)."""
        event = (reply.event_id or "").removesuffix(webhook.FORM_SUFFIX)
        reason = self._refused.pop(event, None)
        if reason is None:
            return  # the submission was not refused (bridged, or nothing to send again)
        resends = int((reply.context or {}).get("resends", 0))
        if resends >= MAX_FORM_RESENDS:
            await self._graph.send(reply.chat, text_message(FORM_GIVE_UP), reply_to=reply.message)
            return
        message = question_message(
            delivery, flow=self.flow, resends=resends + 1, notice=FORM_RETRY.format(reason=reason)
        )
        await self._graph.send(reply.chat, message)

    async def follow_up(self, reply: channels.InboundReply, outcome: channels.ReplyOutcome) -> None:
        """Tell the person why a reply was refused, or that the question has gone. Never raises."""
        if reply.kind == "open_form" or (reply.kind == "submitted" and outcome.status != "late"):
            return  # a refused form is sent again by open_form, with the reason in the Flow
        line = outcome.notice if outcome.status == "rejected" else None
        line = NOT_OPEN if outcome.status == "late" and reply.kind in ("typed", "submitted") else line
        if not line:
            return
        try:
            await self._graph.send(
                reply.chat, text_message(line), reply_to=(reply.context or {}).get("wamid")
            )
        except channels.ChannelDeliveryError as exc:
            log.warning(
                "whatsapp.follow_up_failed",
                channel=self.name,
                kind=reply.kind,
                status=outcome.status,
                error=str(exc),
            )
