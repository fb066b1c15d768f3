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
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
    WebAppInfo,
)
from telegram.error import BadRequest, ChatMigrated, Forbidden, InvalidToken, NetworkError, TelegramError
from telegram.request import HTTPXRequest

from layby_contracts.channels import (
    ChannelDelivery,
    ChannelDeliveryError,
    ChannelInputError,
    Inbound,
    InboundMalformed,
    InboundRefused,
    InboundReply,
    InboundRequest,
    InboundResponse,
    Posted,
    ReplyOutcome,
    Retraction,
)
from layby_contracts.events import MediaItem
from layby_domain.clock import Clock, SystemClock
from layby_server.chat import common
from layby_server.logs import get_logger

log = get_logger("layby_server.chat.telegram")

PLUGIN = "telegram"
OPTIONS = {"bot_token", "secret_token", "api_url", "file_url", "default_recipient", "timeout"}
API_URL = "https://api.telegram.org/bot"
FILE_URL = "https://api.telegram.org/file/bot"
SECRET_HEADER = "x-telegram-bot-api-secret-token"  # noqa: S105 - a header name, not a secret
ALLOWED_UPDATES = ["message", "callback_query"]

TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024
CALLBACK_DATA_BYTES = 64
ANSWER_TEXT_LIMIT = 200
# Telegram refuses bigger inline keyboards; the numbers are observed, not documented.
MAX_BUTTONS = 100
BUTTON_LABEL_LIMIT = 64
ELLIPSIS = "…"

YES, NO = "y", "n"
ANSWERED = "Answered."
ALREADY = "This question was already answered."
NOT_OPEN = "This question is no longer open."

_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_BOT_TOKEN = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")
_SEND = {"image": "send_photo", "document": "send_document", "video": "send_video", "audio": "send_audio"}


def units(text: str) -> int:
    """Telegram's length of a text: UTF-16 code units (the stricter reading of "characters")."""
    return len(text.encode("utf-16-le")) // 2


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` UTF-16 units, an ellipsis marking a cut (never splitting a pair)."""
    if units(text) <= limit:
        return text
    kept, used = [], 0
    for char in text:
        size = units(char)
        if used + size > limit - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + ELLIPSIS


def fit(question: str, suffix: str, limit: int = TEXT_LIMIT) -> str:
    """The question followed by ``suffix`` within ``limit``: the question is shortened first, so
    the options and links after it survive; only when they alone are too long is the whole cut."""
    room = limit - units(suffix)
    if room >= 2:
        return cut(question, room) + suffix
    return cut(question + suffix, limit)


def yes_no_id(interaction_id: str, value: bool) -> str:
    return f"{interaction_id}{common.TAP_SEPARATOR}{YES if value else NO}"


@dataclass(frozen=True)
class Tap:
    """What a button's callback data says: ``index`` of an option, or ``value`` of a yes/no."""

    interaction_id: str
    index: int | None = None
    value: bool | None = None


def parse_callback(data: str | None) -> Tap | None:
    """The tap a callback's data encodes, else None (forged, stale or from another bot)."""
    if not data or len(data.encode()) > CALLBACK_DATA_BYTES:
        return None
    parsed = common.parse_tap_id(data)
    if parsed is not None:
        return Tap(interaction_id=parsed[0], index=parsed[1])
    interaction_id, sep, flag = data.rpartition(common.TAP_SEPARATOR)
    if sep and interaction_id and flag in (YES, NO):
        return Tap(interaction_id=interaction_id, value=flag == YES)
    return None


def _fits(data: str) -> bool:
    return 1 <= len(data.encode()) <= CALLBACK_DATA_BYTES


def _label(text: str, index: int) -> str:
    shown = " ".join(text.split())
    return cut(shown, BUTTON_LABEL_LIMIT) if shown else str(index + 1)


def _choices(interaction_id: str, options: Sequence[str]) -> InlineKeyboardMarkup | None:
    """One button a row, each carrying its tap id; None when Telegram could not take them."""
    if not options or len(options) > MAX_BUTTONS:
        return None
    ids = [common.tap_id(interaction_id, i) for i in range(len(options))]
    if not all(_fits(data) for data in ids):
        return None
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(_label(option, i), callback_data=data)]
            for i, (option, data) in enumerate(zip(options, ids, strict=True))
        ]
    )


def is_private(chat_id: int | str) -> bool:
    """A private chat with a person has the person's (positive) id; groups and channels do not."""
    return isinstance(chat_id, int) and chat_id > 0


@dataclass(frozen=True)
class Rendered:
    """A question as one Telegram message: its text and its inline keyboard, if any."""

    text: str
    keyboard: InlineKeyboardMarkup | None = None
    media: list[MediaItem] = field(default_factory=list)


def link_line(item: MediaItem) -> str:
    return f"{item.caption}: {item.url}" if item.caption else item.url


def render(delivery: ChannelDelivery, chat_id: int | str, links: Sequence[MediaItem] = ()) -> Rendered:
    """How ``delivery`` looks in chat ``chat_id``: pure, so every format's shape is testable.
    ``links`` are media items to show as lines (those Telegram could not send as files)."""
    media = [m for m in delivery.media or [] if m.kind in _SEND]
    lines = [link_line(m) for m in [*(m for m in delivery.media or [] if m.kind == "link"), *links]]
    suffix = "\n\n" + "\n".join(lines) if lines else ""
    question, control = delivery.question, common.control_of(delivery)
    keyboard: InlineKeyboardMarkup | None = None
    if control == "choice":
        keyboard = _choices(delivery.interaction_id, delivery.options or [])
        if keyboard is None:
            blank = msgspec.structs.replace(delivery, question="")
            suffix += common.numbered_prompt(blank)
    elif control == "yes_no":
        yes, no = yes_no_id(delivery.interaction_id, True), yes_no_id(delivery.interaction_id, False)
        if _fits(yes) and _fits(no):
            yes_button = InlineKeyboardButton("Yes", callback_data=yes)
            keyboard = InlineKeyboardMarkup([[yes_button, InlineKeyboardButton("No", callback_data=no)]])
        else:
            suffix += "\n\n" + common.YES_OR_NO
    elif control == "fields":
        if is_private(chat_id) and delivery.callback_url.startswith("https://"):
            button = InlineKeyboardButton("Open the form", web_app=WebAppInfo(delivery.callback_url))
        else:
            button = InlineKeyboardButton("Open the form", url=delivery.callback_url)
        keyboard = InlineKeyboardMarkup([[button]])
    elif control == "link":
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Open", url=delivery.callback_url)]])
    elif delivery.suggested_replies:
        keyboard = _choices(delivery.interaction_id, delivery.suggested_replies)
    return Rendered(text=fit(question, suffix), keyboard=keyboard, media=media)


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


class TelegramChannel:
    """A Telegram bot as a chat channel (docs/channels.md#telegram)."""

    supports_form_delivery = True

    def __init__(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        secrets: Mapping[str, bytes],
        clock: Clock | None = None,
    ) -> None:
        common.check_options(config, PLUGIN, OPTIONS)
        token = common.secret(config, "bot_token", secrets, PLUGIN)
        if not _BOT_TOKEN.fullmatch(token):
            raise ValueError(
                f"{PLUGIN} bot_token {config['bot_token']!r} does not hold a bot token "
                "(digits, ':', then letters, digits, '_' or '-')"
            )
        secret_token = common.secret(config, "secret_token", secrets, PLUGIN)
        if not _SECRET_TOKEN.fullmatch(secret_token):
            raise ValueError(
                f"{PLUGIN} secret_token {config['secret_token']!r} must hold 1-256 letters, digits, "
                "'_' or '-'"
            )
        recipient = config.get("default_recipient")
        if isinstance(recipient, bool) or not isinstance(recipient, str | int | None) or recipient == "":
            raise ValueError(f"{PLUGIN} default_recipient must be a chat id or an @channel name")
        timeout = config.get("timeout", 10)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError(f"{PLUGIN} timeout must be a positive number of seconds")
        self.name = name
        self.api_url = common.base_url(config, "api_url", API_URL, PLUGIN)
        self.file_url = common.base_url(config, "file_url", FILE_URL, PLUGIN)
        self.default_recipient = None if recipient is None else str(recipient)
        self._token = token
        _HIDE_TOKENS.tokens.add(token)
        self._secret_token = secret_token.encode()
        self._timeout = float(timeout)
        self._clock: Clock = clock or SystemClock()
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
                except ChannelDeliveryError:
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
            raise ChannelDeliveryError(
                f"telegram {self.name!r}: flood control, retry in {exc.seconds:g} s",
                retryable=True,
                retry_after=exc.seconds,
            ) from None
        except (BadRequest, Forbidden, InvalidToken, ChatMigrated) as exc:
            raise ChannelInputError(f"telegram {self.name!r}: {self._scrub(exc.message)}") from None
        except NetworkError as exc:  # timeouts, connection faults, 5xx
            raise ChannelDeliveryError(
                f"telegram {self.name!r}: {self._scrub(exc.message)}", retryable=True
            ) from None
        except TelegramError as exc:
            raise ChannelDeliveryError(f"telegram {self.name!r}: {self._scrub(exc.message)}") from None

    # -- outbound -----------------------------------------------------------------------------

    def _chat(self, recipient: str | None) -> int | str:
        target = recipient or self.default_recipient
        if not target:
            raise ChannelInputError(
                f"telegram {self.name!r}: no recipient (give one on the ask or set default_recipient)"
            )
        try:
            return int(target)
        except ValueError:
            return target  # an @channel name

    async def deliver(self, delivery: ChannelDelivery) -> Posted:
        if delivery.timeout_at <= self._clock.now():
            raise ChannelInputError(
                f"telegram {self.name!r}: the question already timed out at "
                f"{delivery.timeout_at.isoformat()}; nothing was sent"
            )
        chat_id = self._chat(delivery.recipient)
        bot = await self._client()
        unsent: list[MediaItem] = []
        for item in render(delivery, chat_id).media:
            send = getattr(bot, _SEND[item.kind])
            caption = cut(item.caption, CAPTION_LIMIT) if item.caption else None
            try:
                await self._call(send(chat_id, item.url, caption=caption))
            except ChannelInputError as exc:
                # A file Telegram cannot fetch still reaches the person, as a link in the text;
                # a chat that cannot be written to fails below, on the question itself.
                log.info("telegram.media_as_link", channel=self.name, kind=item.kind, error=str(exc))
                unsent.append(item)
        rendered = render(delivery, chat_id, links=unsent)
        message: Message = await self._call(
            bot.send_message(chat_id, rendered.text, reply_markup=rendered.keyboard)
        )
        return Posted(chat=str(message.chat.id), message=str(message.message_id))

    async def set_webhook(self, url: str) -> None:
        """Point the bot's webhook at ``url`` (Layby's ``/api/channels/<name>/events``) with the
        secret token every update must carry, and only the updates Layby reads."""
        bot = await self._client()
        await self._call(
            bot.set_webhook(url, secret_token=self._secret_token.decode(), allowed_updates=ALLOWED_UPDATES)
        )

    async def retract(self, posted: Posted, retraction: Retraction) -> None:
        """Rewrite the question's message with how it ended; no keyboard is passed, so Telegram
        drops the buttons."""
        bot = await self._client()
        text = fit(retraction.question, "\n\n" + common.retraction_line(retraction))
        try:
            await self._call(bot.edit_message_text(text, chat_id=posted.chat, message_id=int(posted.message)))
        except ChannelInputError as exc:
            if "message is not modified" not in str(exc).lower():
                raise

    # -- inbound ------------------------------------------------------------------------------

    async def inbound(self, request: InboundRequest) -> Inbound:
        given = request.headers.get(SECRET_HEADER)
        if given is None:
            raise InboundRefused("no X-Telegram-Bot-Api-Secret-Token header")
        if not hmac.compare_digest(given.encode(), self._secret_token):
            raise InboundRefused("a wrong X-Telegram-Bot-Api-Secret-Token")
        try:
            data = msgspec.json.decode(request.body)
        except msgspec.DecodeError as exc:
            raise InboundMalformed(f"the body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InboundMalformed("the body is not a Telegram Update object")
        try:
            update = Update.de_json(data, None)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InboundMalformed(f"the body is not a Telegram Update: {exc!r}") from None
        reply = self._reply(update)
        return Inbound(replies=[reply] if reply is not None else [])

    def _reply(self, update: Update) -> InboundReply | None:
        event_id = str(update.update_id)
        query = update.callback_query
        if query is not None:
            sender = query.from_user
            tap = parse_callback(query.data)
            chat = str(query.message.chat.id) if query.message is not None else str(sender.id)
            message = str(query.message.message_id) if query.message is not None else None
            common_fields: dict[str, Any] = {
                "sender": str(sender.id),
                "sender_name": sender.username or sender.first_name,
                "chat": chat,
                "message": message,
                "event_id": event_id,
                "context": {"callback_query_id": query.id},
            }
            if tap is not None and tap.value is not None:
                return InboundReply(
                    kind="yes_no", interaction_id=tap.interaction_id, value=tap.value, **common_fields
                )
            # A forged or stale tap carries no question: the door finds nothing to answer, and
            # the follow-up still acknowledges it (Telegram spins until a tap is answered).
            return InboundReply(
                kind="tap",
                interaction_id=tap.interaction_id if tap else None,
                index=tap.index if tap else None,
                **common_fields,
            )
        msg = update.message
        if msg is None or msg.text is None or msg.from_user is None or msg.from_user.is_bot:
            return None  # edits, channel posts, stickers, the bot's own: acknowledged, ignored
        replied = msg.reply_to_message
        return InboundReply(
            kind="typed",
            sender=str(msg.from_user.id),
            sender_name=msg.from_user.username or msg.from_user.first_name,
            chat=str(msg.chat.id),
            message=str(replied.message_id) if replied is not None else None,
            value=msg.text,
            event_id=event_id,
            context={"message_id": msg.message_id},
            direct=msg.chat.type == "private",
        )

    async def respond(self, reply: InboundReply, outcome: ReplyOutcome) -> InboundResponse | None:
        return None  # Telegram needs only the 200; everything else is a follow-up

    async def open_form(self, reply: InboundReply, delivery: ChannelDelivery) -> None:
        return None  # the web_app (or link) button opens the form page itself

    async def follow_up(self, reply: InboundReply, outcome: ReplyOutcome) -> None:
        """Acknowledge every tap (the person's client spins until it is answered) and tell a
        typist why a reply was refused or that the question has gone. Never raises."""
        try:
            bot = await self._client()
            context = reply.context or {}
            if reply.kind in ("tap", "yes_no") and "callback_query_id" in context:
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
                            _chat_id(reply.chat),
                            cut(line, TEXT_LIMIT),
                            reply_parameters=_reply_to(target),
                        )
                    )
        except ChannelDeliveryError as exc:
            log.warning(
                "telegram.follow_up_failed",
                channel=self.name,
                kind=reply.kind,
                status=outcome.status,
                error=str(exc),
            )


def tap_answer(outcome: ReplyOutcome) -> str:
    """The line a tapping person sees for what became of the tap."""
    match outcome.status:
        case "answered":
            return ANSWERED
        case "already":
            return ALREADY
        case "rejected":
            return outcome.reason or outcome.notice or "That answer was not accepted."
        case "form_opened":
            return ""
        case _:
            return NOT_OPEN


def _chat_id(chat: str) -> int | str:
    try:
        return int(chat)
    except ValueError:
        return chat


def _reply_to(message: object) -> ReplyParameters | None:
    try:
        message_id = int(str(message))
    except ValueError:
        return None
    return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)
