"""The built-in ``telegram`` channel: questions as bot messages, answers as taps or typed replies
(docs/channels.md#telegram).

Configuration (``LAYBY_CHANNELS``)::

    {"tg": {"plugin": "telegram", "bot_token": "tg-bot", "secret_token": "tg-hook",
            "default_recipient": "123456789"}}

``bot_token`` and ``secret_token`` name entries of ``LAYBY_WEBHOOK_SECRETS``; their values never
appear in a log line or an error. ``api_url`` / ``file_url`` point the client at another Bot API
server (a self-hosted one, a test stand-in); ``timeout`` bounds each call in seconds.

A tapped button carries ``<interaction id>:<index>`` (an option or a suggested reply) or
``<interaction id>:y`` / ``<interaction id>:n`` (a yes/no question) — never the option's text,
and always within Telegram's 64 bytes of callback data.

A one-way notification (``notify``) is its files, then its text with one button per option;
an option's callback data is ``n:<notification id>:<index>``, and its tap comes back as an
inbound message from the person (docs/channels.md#notifications-on-telegram).

What a question looks like is in ``rendering`` (pure); reading a webhook's Update is in ``updates``;
this module holds the channel itself: its settings, the Bot API client and its errors.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from typing import Any

import msgspec
from telegram import Bot, Message
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, NetworkError, TelegramError
from telegram.request import HTTPXRequest

from layby_contracts import channels
from layby_contracts.events import MediaItem
from layby_server.chat import common
from layby_server.chat.common import ELLIPSIS, link_line
from layby_server.chat.telegram.rendering import (
    ALREADY,
    ANSWER_TEXT_LIMIT,
    ANSWERED,
    BUTTON_LABEL_LIMIT,
    CALLBACK_DATA_BYTES,
    CAPTION_LIMIT,
    MAX_BUTTONS,
    NO,
    NOT_OPEN,
    SEND,
    TEXT_LIMIT,
    YES,
    Rendered,
    chat_id_of,
    cut,
    fit,
    is_private,
    render,
    render_notification,
    reply_parameters,
    tap_answer,
    units,
    yes_no_id,
)
from layby_server.chat.telegram.updates import Tap, parse_callback, read_update, reply_of
from layby_server.observability.logs import get_logger

__all__ = [
    "ALLOWED_UPDATES",
    "ALREADY",
    "ANSWERED",
    "ANSWER_TEXT_LIMIT",
    "API_URL",
    "BUTTON_LABEL_LIMIT",
    "CALLBACK_DATA_BYTES",
    "CAPTION_LIMIT",
    "CONNECTIONS",
    "ELLIPSIS",
    "FILE_URL",
    "MAX_BUTTONS",
    "NO",
    "NOT_OPEN",
    "OPTIONS",
    "PLUGIN",
    "SECRET_HEADER",
    "TEXT_LIMIT",
    "YES",
    "Rendered",
    "Tap",
    "TelegramChannel",
    "cut",
    "fit",
    "is_private",
    "link_line",
    "parse_callback",
    "render",
    "tap_answer",
    "units",
    "yes_no_id",
]

log = get_logger("layby_server.chat.telegram")

PLUGIN = "telegram"
OPTIONS = {
    "bot_token",
    "secret_token",
    "api_url",
    "file_url",
    "default_recipient",
    "timeout",
    "register_webhook",
}
API_URL = "https://api.telegram.org/bot"
FILE_URL = "https://api.telegram.org/file/bot"
SECRET_HEADER = "x-telegram-bot-api-secret-token"  # noqa: S105 - a header name, not a secret
ALLOWED_UPDATES = ["message", "callback_query"]

_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_BOT_TOKEN = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")


CONNECTIONS = 8
"""Connections to the Bot API at once (PTB's own default is one, which queues every send of a
busy delivery service behind the others)."""


class _Request(HTTPXRequest):
    """PTB's HTTP client, reading a flood-control pause itself: PTB's own ``RetryAfter`` warns
    about its future type, and the delivery service needs plain seconds."""

    async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
        code, payload = await super().do_request(*args, **kwargs)
        if code >= 400:
            try:
                parameters = msgspec.json.decode(payload).get("parameters") or {}
                pause = float(parameters["retry_after"])
            except (msgspec.DecodeError, AttributeError, KeyError, TypeError, ValueError):
                return code, payload
            raise _FloodControl(pause)
        return code, payload


class _FloodControl(TelegramError):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"flood control: retry in {seconds:g} s")
        self.seconds = seconds


class _HideTokens(logging.Filter):
    """httpx logs each request's URL at info, and a Bot API URL holds the bot token: the line
    is kept, the token is not."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        line = record.getMessage()
        if any(token in line for token in self.tokens):
            for token in self.tokens:
                line = line.replace(token, "<bot token>")
            record.msg, record.args = line, ()
        return True


_HIDE_TOKENS = _HideTokens()
logging.getLogger("httpx").addFilter(_HIDE_TOKENS)


class TelegramChannel(common.ChatPlugin, plugin=PLUGIN, options=OPTIONS):
    """A Telegram bot as a chat channel (docs/channels.md#telegram)."""

    supports_form_delivery = True
    # A notification's media and options (docs/channels.md#notifications-on-telegram). No form:
    # a Telegram form is the callback page, which needs a ticket a notification does not have;
    # no provider templates.
    supports_media_notifications = True
    supports_interactive_notifications = True

    def _configure(self, settings: common.PluginConfig) -> None:
        token = settings.secret("bot_token")
        if not _BOT_TOKEN.fullmatch(token):
            raise ValueError(
                f"{PLUGIN} bot_token {settings.get('bot_token')!r} does not hold a bot token "
                "(digits, ':', then letters, digits, '_' or '-')"
            )
        self.register_webhook = settings.flag("register_webhook")
        """The door registers its webhook with Telegram when it starts (``set_webhook``)."""
        secret_token = settings.secret("secret_token")
        if not _SECRET_TOKEN.fullmatch(secret_token):
            raise ValueError(
                f"{PLUGIN} secret_token {settings.get('secret_token')!r} must hold 1-256 letters, digits, "
                "'_' or '-'"
            )
        recipient = settings.get("default_recipient")
        if isinstance(recipient, bool) or not isinstance(recipient, str | int | None) or recipient == "":
            raise ValueError(f"{PLUGIN} default_recipient must be a chat id or an @channel name")
        timeout = settings.timeout()
        self.api_url = settings.base_url("api_url", API_URL)
        self.file_url = settings.base_url("file_url", FILE_URL)
        self.default_recipient = None if recipient is None else str(recipient)
        self._token = token
        _HIDE_TOKENS.tokens.add(token)
        self._secret_token = secret_token.encode()
        self._timeout = timeout
        self._bot: Bot | None = None
        self._starting = asyncio.Lock()

    # -- the client ---------------------------------------------------------------------------

    async def _client(self) -> Bot:
        async with self._starting:
            if self._bot is None:
                t = self._timeout
                request = _Request(
                    connection_pool_size=CONNECTIONS,
                    connect_timeout=t,
                    read_timeout=t,
                    write_timeout=t,
                    pool_timeout=t,
                )
                bot = Bot(self._token, base_url=self.api_url, base_file_url=self.file_url, request=request)
                try:
                    await self._call(bot.initialize())
                except channels.ChannelDeliveryError:
                    await request.shutdown()  # the next attempt starts afresh
                    raise
                self._bot = bot
            return self._bot

    async def aclose(self) -> None:
        bot, self._bot = self._bot, None
        if bot is not None:
            try:
                await bot.shutdown()
            except TelegramError as exc:
                log.warning("telegram.close_failed", channel=self.name, error=self._scrub(str(exc)))

    def _scrub(self, text: str) -> str:
        """An error text without the bot token (PTB may quote a request URL, which holds it)."""
        return text.replace(self._token, "<bot token>")

    async def _call(self, call: Any) -> Any:
        """Await one Bot API call; its failure as a ``ChannelDeliveryError`` that says whether
        another attempt may help, naming Telegram's reason and never the token."""
        try:
            return await call
        except _FloodControl as exc:
            raise channels.ChannelDeliveryError(
                f"telegram {self.name!r}: flood control, retry in {exc.seconds:g} s",
                retryable=True,
                retry_after=exc.seconds,
            ) from None
        except (BadRequest, Forbidden, InvalidToken, ChatMigrated) as exc:
            raise channels.ChannelInputError(f"telegram {self.name!r}: {self._scrub(exc.message)}") from None
        except NetworkError as exc:  # timeouts, connection faults, 5xx
            raise channels.ChannelDeliveryError(
                f"telegram {self.name!r}: {self._scrub(exc.message)}", retryable=True
            ) from None
        except TelegramError as exc:
            raise channels.ChannelDeliveryError(
                f"telegram {self.name!r}: {self._scrub(exc.message)}"
            ) from None

    # -- outbound -----------------------------------------------------------------------------

    def _chat(self, recipient: str | None) -> int | str:
        target = recipient or self.default_recipient
        if not target:
            raise channels.ChannelInputError(
                f"telegram {self.name!r}: no recipient (give one on the ask or set default_recipient)"
            )
        try:
            return int(target)
        except ValueError:
            return target  # an @channel name

    async def identity(self) -> str:
        """Who the bot token signs in as (``getMe``): ``layby doctor``'s check of the token."""
        bot = await self._client()
        me = await self._call(bot.get_me())
        return f"Telegram accepts the bot token: @{me.username} (id {me.id})"

    async def deliver(self, delivery: channels.ChannelDelivery) -> channels.Posted:
        self._refuse_late(delivery)
        chat_id = self._chat(delivery.recipient)
        bot = await self._client()
        _, unsent = await self._send_media(bot, chat_id, render(delivery, chat_id).media)
        rendered = render(delivery, chat_id, links=unsent)
        message: Message = await self._call(
            bot.send_message(chat_id, rendered.text, reply_markup=rendered.keyboard)
        )
        return channels.Posted(chat=str(message.chat.id), message=str(message.message_id))

    async def notify(self, notification: channels.ChannelNotification) -> list[str]:
        """The notification's files, then its text with its options' buttons; the ids of the
        messages sent, the text's last (docs/channels.md#notifications-on-telegram)."""
        if notification.template is not None:
            raise channels.ChannelInputError(
                f"telegram {self.name!r}: template: Telegram has no message templates"
            )
        if notification.schema is not None:
            raise channels.ChannelInputError(
                f"telegram {self.name!r}: schema: a form cannot be sent with a Telegram notification"
            )
        chat_id = self._chat(notification.recipient)
        bot = await self._client()
        sent, unsent = await self._send_media(bot, chat_id, render_notification(notification).media)
        rendered = render_notification(notification, links=unsent)
        message: Message = await self._call(
            bot.send_message(chat_id, rendered.text, reply_markup=rendered.keyboard)
        )
        return [*sent, str(message.message_id)]

    async def _send_media(
        self, bot: Bot, chat_id: int | str, media: list[MediaItem]
    ) -> tuple[list[str], list[MediaItem]]:
        """Send each file before the text: the ids of those sent, and the items Telegram could not
        fetch (they reach the person as link lines in the text; a chat that cannot be written to
        fails on the text itself)."""
        sent: list[str] = []
        unsent: list[MediaItem] = []
        for item in media:
            send = getattr(bot, SEND[item.kind])
            caption = cut(item.caption, CAPTION_LIMIT) if item.caption else None
            try:
                message: Message = await self._call(send(chat_id, item.url, caption=caption))
            except channels.ChannelInputError as exc:
                log.info("telegram.media_as_link", channel=self.name, kind=item.kind, error=str(exc))
                unsent.append(item)
            else:
                sent.append(str(message.message_id))
        return sent, unsent

    async def set_webhook(self, url: str) -> None:
        """Point the bot's webhook at ``url`` (Layby's ``/api/channels/<name>/events``) with the
        secret token every update must carry, and only the updates Layby reads."""
        bot = await self._client()
        await self._call(
            bot.set_webhook(url, secret_token=self._secret_token.decode(), allowed_updates=ALLOWED_UPDATES)
        )

    async def retract(self, posted: channels.Posted, retraction: channels.Retraction) -> None:
        """Rewrite the question's message with how it ended; no keyboard is passed, so Telegram
        drops the buttons."""
        bot = await self._client()
        text = fit(retraction.question, "\n\n" + common.retraction_line(retraction))
        try:
            await self._call(bot.edit_message_text(text, chat_id=posted.chat, message_id=int(posted.message)))
        except channels.ChannelInputError as exc:
            if "message is not modified" not in str(exc).lower():
                raise

    async def say(self, chat: str, text: str, thread: str | None = None) -> None:
        """Send a conversation's reply to ``chat`` as a plain message (a reply to ``thread``, a
        message id, when given), cut to Telegram's limit (docs/doors/hooks.md)."""
        bot = await self._client()
        await self._call(
            bot.send_message(
                chat_id_of(chat), cut(text, TEXT_LIMIT), reply_parameters=reply_parameters(thread)
            )
        )

    # -- inbound ------------------------------------------------------------------------------

    async def inbound(self, request: channels.InboundRequest) -> channels.Inbound:
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            raise channels.InboundRefused("no X-Telegram-Bot-Api-Secret-Token header")
        if not hmac.compare_digest(given.encode(), self._secret_token):
            raise channels.InboundRefused("a wrong X-Telegram-Bot-Api-Secret-Token")
        reply = reply_of(read_update(request.body))
        return channels.Inbound(replies=[reply] if reply is not None else [])

    async def respond(
        self, reply: channels.InboundReply, outcome: channels.ReplyOutcome
    ) -> channels.InboundResponse | None:
        return None  # Telegram needs only the 200; everything else is a follow-up

    async def open_form(self, reply: channels.InboundReply, delivery: channels.ChannelDelivery) -> None:
        return None  # the web_app (or link) button opens the form page itself

    async def follow_up(self, reply: channels.InboundReply, outcome: channels.ReplyOutcome) -> None:
        """Acknowledge every tap (the person's client spins until it is answered) and tell a
        typist why a reply was refused or that the question has gone. Never raises."""
        try:
            bot = await self._client()
            context = reply.context or {}
            if reply.notification_id is not None and "callback_query_id" in context:
                # A notification's option is a message, not an answer: the spinner stops quietly.
                await self._call(bot.answer_callback_query(str(context["callback_query_id"])))
            elif reply.kind in ("tap", "yes_no") and "callback_query_id" in context:
                await self._call(
                    bot.answer_callback_query(
                        str(context["callback_query_id"]),
                        text=cut(tap_answer(outcome), ANSWER_TEXT_LIMIT) or None,
                    )
                )
            elif reply.kind == "typed":
                line = outcome.notice if outcome.status == "rejected" else None
                line = NOT_OPEN if outcome.status == "late" else line
                if line:
                    target = context.get("message_id") or reply.message
                    await self._call(
                        bot.send_message(
                            chat_id_of(reply.chat),
                            cut(line, TEXT_LIMIT),
                            reply_parameters=reply_parameters(target),
                        )
                    )
        except channels.ChannelDeliveryError as exc:
            log.warning(
                "telegram.follow_up_failed",
                channel=self.name,
                kind=reply.kind,
                status=outcome.status,
                error=str(exc),
            )
