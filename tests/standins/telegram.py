"""A Telegram Bot API stand-in: a small Litestar app on 127.0.0.1 that the real client (PTB,
pointed at it with ``base_url``) talks to, and a person who taps and types.

Three faces:

- **provider**: ``POST /bot<token>/<method>`` with form, multipart or JSON bodies, answered like
  the Bot API (``{"ok": true, "result": ...}`` / ``{"ok": false, "error_code", "description"}``).
  Every call is checked: a known token and method, required fields present, unknown fields
  refused, the text, caption, button and callback-data limits, ``web_app`` only https and only in
  private chats, edits only of stored messages. ``fail_next`` scripts a failure (a 429 with
  ``retry_after``, a 5xx, a ``Forbidden``).
- **person**: ``tap`` a stored message's button or ``type`` a message (optionally replying to
  one); the Update Telegram would build is POSTed to the webhook target with the
  ``X-Telegram-Bot-Api-Secret-Token`` header, with increasing ``update_id``s. Each tap records
  whether the bot answered its callback query.
- **inspection**: ``messages(chat)`` is what the person sees now (edits applied, notices in
  order); ``GET /_test/messages?chat=<id>`` serves the same as JSON.

Updates are built with PTB's own classes, so their shape is exactly what the SDK parses.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from litestar import Litestar, Request, Response, post
from telegram import CallbackQuery, Chat, Message, Update, User

from tests.standins.serving import messages_route, serve_standin

TOKEN = "123456789:TEST-standin_token"
BOT_ID = 123456789
BOT_USERNAME = "layby_test_bot"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"

_COMMON = {
    "business_connection_id",
    "message_thread_id",
    "direct_messages_topic_id",
    "disable_notification",
    "protect_content",
    "allow_paid_broadcast",
    "message_effect_id",
    "reply_parameters",
    "reply_markup",
    "suggested_post_parameters",
}
_MEDIA = _COMMON | {"caption", "parse_mode", "caption_entities", "show_caption_above_media"}
METHODS: dict[str, tuple[set[str], set[str]]] = {
    # method: (required fields, optional fields)
    "getMe": (set(), set()),
    "sendMessage": ({"chat_id", "text"}, _COMMON | {"parse_mode", "entities", "link_preview_options"}),
    "sendPhoto": ({"chat_id", "photo"}, _MEDIA | {"has_spoiler"}),
    "sendDocument": ({"chat_id", "document"}, _MEDIA | {"thumbnail", "disable_content_type_detection"}),
    "sendVideo": (
        {"chat_id", "video"},
        _MEDIA
        | {
            "duration",
            "width",
            "height",
            "thumbnail",
            "cover",
            "start_timestamp",
            "has_spoiler",
            "supports_streaming",
        },
    ),
    "sendAudio": ({"chat_id", "audio"}, _MEDIA | {"duration", "performer", "title", "thumbnail"}),
    "answerCallbackQuery": ({"callback_query_id"}, {"text", "show_alert", "url", "cache_time"}),
    "editMessageText": (
        {"text"},
        {
            "chat_id",
            "message_id",
            "inline_message_id",
            "parse_mode",
            "entities",
            "link_preview_options",
            "reply_markup",
            "business_connection_id",
        },
    ),
    "editMessageReplyMarkup": (
        set(),
        {"chat_id", "message_id", "inline_message_id", "reply_markup", "business_connection_id"},
    ),
    "deleteMessage": ({"chat_id", "message_id"}, set()),
    "setWebhook": (
        {"url"},
        {
            "certificate",
            "ip_address",
            "max_connections",
            "allowed_updates",
            "drop_pending_updates",
            "secret_token",
        },
    ),
    "deleteWebhook": (set(), {"drop_pending_updates"}),
    "getWebhookInfo": (set(), set()),
}
_JSON_FIELDS = {
    "reply_markup",
    "reply_parameters",
    "entities",
    "caption_entities",
    "link_preview_options",
    "allowed_updates",
    "suggested_post_parameters",
}
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_BUTTON_ACTIONS = {
    "callback_data",
    "url",
    "web_app",
    "login_url",
    "switch_inline_query",
    "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat",
    "copy_text",
    "callback_game",
    "pay",
}


def units(text: str) -> int:
    """Telegram's text length, read strictly: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


class ApiError(Exception):
    def __init__(self, description: str, code: int = 400, parameters: dict[str, Any] | None = None) -> None:
        super().__init__(description)
        self.description, self.code, self.parameters = description, code, parameters


@dataclass
class Call:
    """One request the bot made: its method, its decoded fields, and how it was answered."""

    method: str
    params: dict[str, Any]
    ok: bool = True
    description: str | None = None


@dataclass
class Stored:
    """A message as the person sees it now."""

    chat_id: int
    message_id: int
    from_bot: bool
    kind: str = "text"  # text, photo, document, video, audio
    text: str | None = None
    caption: str | None = None
    media: str | None = None
    keyboard: list[list[dict[str, Any]]] | None = None
    reply_to: int | None = None
    sender: int | None = None
    edits: int = 0

    def buttons(self) -> list[dict[str, Any]]:
        return [button for row in self.keyboard or [] for button in row]


@dataclass
class Tap:
    """A simulated tap and whether the bot answered its callback query (``answer`` its text)."""

    callback_query_id: str
    chat_id: int
    message_id: int
    data: str | None
    answered: bool = False
    answer: str | None = None


@dataclass
class Webhook:
    url: str
    secret_token: str | None = None
    allowed_updates: list[str] | None = None


@dataclass
class _Failure:
    method: str
    code: int
    description: str
    retry_after: int | None
    times: int


@dataclass
class TelegramStandin:
    """The stand-in's state and its person and inspection faces (see the module docstring)."""

    token: str = TOKEN
    url: str = ""
    chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    users: dict[int, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    taps: list[Tap] = field(default_factory=list)
    webhook: Webhook | None = None
    _messages: dict[tuple[int, int], Stored] = field(default_factory=dict)
    _ids: dict[int, itertools.count[int]] = field(default_factory=dict)
    _updates: itertools.count[int] = field(default_factory=lambda: itertools.count(100_001))
    _queries: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _failures: list[_Failure] = field(default_factory=list)

    # -- set-up -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"{self.url}/bot"

    @property
    def file_url(self) -> str:
        return f"{self.url}/file/bot"

    def add_person(self, user_id: int, first_name: str = "Ada", username: str | None = "ada") -> int:
        """A person who has started the bot: their private chat has their id."""
        self.users[user_id] = {"id": user_id, "first_name": first_name, "username": username}
        self.chats[user_id] = {
            "id": user_id,
            "type": "private",
            "first_name": first_name,
            "username": username,
        }
        return user_id

    def add_group(self, chat_id: int, title: str = "Ops") -> int:
        """A group the bot is in (Telegram's group ids are negative)."""
        self.chats[chat_id] = {"id": chat_id, "type": "supergroup", "title": title}
        return chat_id

    def fail_next(
        self,
        method: str,
        *,
        code: int = 429,
        description: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail with ``code`` (429: flood control,
        with ``retry_after`` seconds, 5 unless given)."""
        if code == 429 and retry_after is None:
            retry_after = 5
        if description is None:
            description = (
                f"Too Many Requests: retry after {retry_after}" if code == 429 else "Internal Server Error"
            )
        self._failures.append(_Failure(method, code, description, retry_after, times))

    def point_webhook(self, url: str, secret_token: str | None) -> None:
        """Set the webhook as ``setWebhook`` would (for a test that does not call it through the bot)."""
        self.webhook = Webhook(url=url, secret_token=secret_token)

    # -- inspection ---------------------------------------------------------------------------

    def messages(self, chat_id: int | str) -> list[Stored]:
        """What the person sees in ``chat_id`` now, oldest first."""
        chat = int(chat_id)
        return sorted((m for (c, _), m in self._messages.items() if c == chat), key=lambda m: m.message_id)

    def message(self, chat_id: int | str, message_id: int | str) -> Stored:
        return self._messages[int(chat_id), int(message_id)]

    def unanswered_taps(self) -> list[Tap]:
        return [tap for tap in self.taps if not tap.answered]

    def sent(self, method: str) -> list[Call]:
        """The accepted calls of ``method``, in order."""
        return [call for call in self.calls if call.method == method and call.ok]

    def refused(self) -> list[Call]:
        return [call for call in self.calls if not call.ok]

    # -- the person ---------------------------------------------------------------------------

    def tap_update(
        self,
        chat_id: int | str,
        message_id: int | str,
        button: str | int,
        *,
        user: int | None = None,
        data: str | None = None,
    ) -> dict[str, Any]:
        """The Update for tapping ``button`` (its label or flat index) of a stored message;
        ``data`` overrides the callback data (a forged or stale tap). Records the tap."""
        stored = self.message(chat_id, message_id)
        if data is None:
            buttons = stored.buttons()
            found = (
                buttons[button]
                if isinstance(button, int)
                else next((b for b in buttons if b["text"] == button), None)
            )
            if found is None or "callback_data" not in found:
                raise AssertionError(f"no button {button!r} with callback data on message {message_id}")
            data = found["callback_data"]
        sender = self._user(stored.chat_id, user)
        query_id = str(next(self._queries))
        query = CallbackQuery(
            id=query_id,
            from_user=sender,
            chat_instance=f"ci{stored.chat_id}",
            data=data,
            message=self._ptb_message(stored),
        )
        self.taps.append(Tap(query_id, stored.chat_id, stored.message_id, data))
        return Update(update_id=next(self._updates), callback_query=query).to_dict()

    def type_update(
        self, chat_id: int | str, text: str, *, reply_to: int | str | None = None, user: int | None = None
    ) -> dict[str, Any]:
        """The Update for typing ``text`` in ``chat_id`` (replying to message ``reply_to``); the
        message is stored, so the bot can reply to it."""
        chat = int(chat_id)
        sender = self._user(chat, user)
        replied = self.message(chat, reply_to) if reply_to is not None else None
        stored = self._store(
            chat,
            from_bot=False,
            text=text,
            sender=sender.id,
            reply_to=replied.message_id if replied else None,
        )
        return Update(update_id=next(self._updates), message=self._ptb_message(stored)).to_dict()

    async def tap(
        self,
        chat_id: int | str,
        message_id: int | str,
        button: str | int,
        *,
        user: int | None = None,
        data: str | None = None,
        target: str | None = None,
        secret: str | None = None,
    ) -> httpx.Response:
        """Tap a button and POST the Update to the webhook (or ``target``); the door's response."""
        return await self.send(
            self.tap_update(chat_id, message_id, button, user=user, data=data), target=target, secret=secret
        )

    async def type(
        self,
        chat_id: int | str,
        text: str,
        *,
        reply_to: int | str | None = None,
        user: int | None = None,
        target: str | None = None,
        secret: str | None = None,
    ) -> httpx.Response:
        """Type a message (optionally as a reply) and POST the Update; the door's response."""
        return await self.send(
            self.type_update(chat_id, text, reply_to=reply_to, user=user), target=target, secret=secret
        )

    async def send(
        self, update: dict[str, Any], *, target: str | None = None, secret: str | None = None
    ) -> httpx.Response:
        """POST an Update as Telegram does: JSON, with the secret token set at ``setWebhook``
        (``secret`` overrides it; an empty string sends no header)."""
        url = target or (self.webhook.url if self.webhook else None)
        if url is None:
            raise AssertionError("no webhook set and no target given")
        token = secret if secret is not None else (self.webhook.secret_token if self.webhook else None)
        headers = {"Content-Type": "application/json"}
        if token:
            headers[SECRET_HEADER] = token
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            return await http.post(url, content=json.dumps(update).encode(), headers=headers)

    # -- internals ----------------------------------------------------------------------------

    def _user(self, chat_id: int, user: int | None) -> User:
        uid = (
            user if user is not None else (chat_id if chat_id in self.users else next(iter(self.users), None))
        )
        if uid is None or uid not in self.users:
            raise AssertionError(f"no person {uid!r}: add_person first")
        u = self.users[uid]
        return User(id=uid, first_name=u["first_name"], is_bot=False, username=u["username"])

    def _bot_user(self) -> User:
        return User(id=BOT_ID, first_name="Layby", is_bot=True, username=BOT_USERNAME)

    def _ptb_chat(self, chat_id: int) -> Chat:
        c = self.chats[chat_id]
        return Chat(
            id=chat_id,
            type=c["type"],
            title=c.get("title"),
            username=c.get("username"),
            first_name=c.get("first_name"),
        )

    def _ptb_message(self, stored: Stored, *, nested: bool = True) -> Message:
        from telegram import Audio, Document, InlineKeyboardMarkup, PhotoSize, Video

        sender = self._bot_user() if stored.from_bot else self._user(stored.chat_id, stored.sender)
        extra: dict[str, Any] = {}
        fid = f"file-{stored.chat_id}-{stored.message_id}"
        if stored.kind == "photo":
            extra["photo"] = [PhotoSize(fid, fid, 640, 480)]
        elif stored.kind == "document":
            extra["document"] = Document(fid, fid)
        elif stored.kind == "video":
            extra["video"] = Video(fid, fid, 640, 480, 1)
        elif stored.kind == "audio":
            extra["audio"] = Audio(fid, fid, 1)
        if stored.keyboard:
            extra["reply_markup"] = InlineKeyboardMarkup.de_json({"inline_keyboard": stored.keyboard}, None)
        if nested and stored.reply_to is not None:
            extra["reply_to_message"] = self._ptb_message(
                self.message(stored.chat_id, stored.reply_to), nested=False
            )
        return Message(
            message_id=stored.message_id,
            date=datetime.now(UTC).replace(microsecond=0),
            chat=self._ptb_chat(stored.chat_id),
            from_user=sender,
            text=stored.text,
            caption=stored.caption,
            edit_date=datetime.now(UTC).replace(microsecond=0) if stored.edits else None,
            **extra,
        )

    def _store(self, chat_id: int, *, from_bot: bool, **fields: Any) -> Stored:
        ids = self._ids.setdefault(chat_id, itertools.count(1))
        stored = Stored(chat_id=chat_id, message_id=next(ids), from_bot=from_bot, **fields)
        self._messages[chat_id, stored.message_id] = stored
        return stored

    def _chat(self, params: dict[str, Any], key: str = "chat_id") -> int:
        raw = params.get(key)
        if isinstance(raw, str) and raw.startswith("@"):
            for cid, c in self.chats.items():
                if c.get("username") == raw[1:] and c["type"] == "channel":
                    return cid
            raise ApiError("Bad Request: chat not found")
        try:
            chat_id = int(raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ApiError(f"Bad Request: invalid chat_id {raw!r}") from None
        if chat_id not in self.chats:
            raise ApiError("Bad Request: chat not found")
        return chat_id

    def _keyboard(self, params: dict[str, Any], chat_id: int | None) -> list[list[dict[str, Any]]] | None:
        markup = params.get("reply_markup")
        if markup is None:
            return None
        rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
        if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
            raise ApiError("Bad Request: can't parse inline keyboard button: InlineKeyboardMarkup expected")
        if sum(len(row) for row in rows) > 100:
            raise ApiError("Bad Request: BUTTONS_TOO_MUCH")
        for row in rows:
            if len(row) > 8:
                raise ApiError("Bad Request: BUTTONS_TOO_MUCH")
            for button in row:
                if not isinstance(button, dict) or not str(button.get("text", "")).strip():
                    raise ApiError(
                        "Bad Request: can't parse inline keyboard button: Text buttons are unallowed "
                        "in the inline keyboard"
                    )
                actions = set(button) & _BUTTON_ACTIONS
                if len(actions) != 1 or set(button) - _BUTTON_ACTIONS - {"text", "style"}:
                    raise ApiError(
                        "Bad Request: can't parse inline keyboard button: exactly one action expected"
                    )
                if "callback_data" in button:
                    data = button["callback_data"]
                    if not isinstance(data, str) or not 1 <= len(data.encode()) <= 64:
                        raise ApiError("Bad Request: BUTTON_DATA_INVALID")
                if "url" in button and urlsplit(str(button["url"])).scheme not in ("http", "https", "tg"):
                    raise ApiError("Bad Request: BUTTON_URL_INVALID")
                if "web_app" in button:
                    url = str((button["web_app"] or {}).get("url", ""))
                    if urlsplit(url).scheme != "https":
                        raise ApiError(
                            f"Bad Request: inline keyboard button Web App URL '{url}' is invalid: "
                            "Only HTTPS links are allowed"
                        )
                    if chat_id is None or self.chats[chat_id]["type"] != "private":
                        raise ApiError("Bad Request: BUTTON_TYPE_INVALID")
        return rows

    def _text(self, value: Any, *, caption: bool = False) -> str | None:
        if caption:
            if value is not None and units(str(value)) > 1024:
                raise ApiError("Bad Request: message caption is too long")
            return None if value is None else str(value)
        text = str(value or "")
        if not text.strip():
            raise ApiError("Bad Request: message text is empty")
        if units(text) > 4096:
            raise ApiError("Bad Request: message is too long")
        return text

    def _reply_to(self, params: dict[str, Any], chat_id: int) -> int | None:
        reply = params.get("reply_parameters")
        if reply is None:
            return None
        target = int(reply["message_id"])
        if (chat_id, target) not in self._messages:
            if reply.get("allow_sending_without_reply"):
                return None
            raise ApiError("Bad Request: message to be replied not found")
        return target

    def call(self, method: str, params: dict[str, Any]) -> Any:
        """Validate one Bot API call and apply it; its result, or ``ApiError``."""
        if method not in METHODS:
            raise ApiError("Not Found", 404)
        required, optional = METHODS[method]
        missing = required - set(params)
        if missing:
            raise ApiError(f"Bad Request: parameter {sorted(missing)[0]!r} is required")
        unknown = set(params) - required - optional
        if unknown:
            raise ApiError(f"Bad Request: unknown parameter {sorted(unknown)[0]!r}")
        for failure in self._failures:
            if failure.method == method and failure.times > 0:
                failure.times -= 1
                parameters = {"retry_after": failure.retry_after} if failure.retry_after is not None else None
                raise ApiError(failure.description, failure.code, parameters)
        if method == "getMe":
            return self._bot_user().to_dict() | {
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            }
        if method == "sendMessage":
            chat_id = self._chat(params)
            text = self._text(params["text"])
            keyboard = self._keyboard(params, chat_id)
            reply_to = self._reply_to(params, chat_id)
            stored = self._store(chat_id, from_bot=True, text=text, keyboard=keyboard, reply_to=reply_to)
            return self._ptb_message(stored).to_dict()
        if method in ("sendPhoto", "sendDocument", "sendVideo", "sendAudio"):
            kind = method[4:].lower()
            chat_id = self._chat(params)
            media = params[kind]
            if not isinstance(media, str) or urlsplit(media).scheme not in ("http", "https"):
                raise ApiError(
                    "Bad Request: wrong remote file identifier specified: can't unserialize it. "
                    "Wrong last symbol"
                )
            caption = self._text(params.get("caption"), caption=True)
            keyboard = self._keyboard(params, chat_id)
            reply_to = self._reply_to(params, chat_id)
            stored = self._store(
                chat_id,
                from_bot=True,
                kind=kind,
                media=media,
                caption=caption,
                keyboard=keyboard,
                reply_to=reply_to,
            )
            return self._ptb_message(stored).to_dict()
        if method == "answerCallbackQuery":
            tap = next(
                (t for t in self.taps if t.callback_query_id == str(params["callback_query_id"])), None
            )
            if tap is None or tap.answered:
                raise ApiError(
                    "Bad Request: query is too old and response timeout expired or query ID is invalid"
                )
            text = params.get("text")
            if text is not None and units(str(text)) > 200:
                raise ApiError("Bad Request: MESSAGE_TOO_LONG")
            tap.answered, tap.answer = True, None if text is None else str(text)
            return True
        if method in ("editMessageText", "editMessageReplyMarkup", "deleteMessage"):
            if "inline_message_id" in params:
                raise ApiError("Bad Request: MESSAGE_ID_INVALID")
            chat_id = self._chat(params)
            key = (chat_id, int(params.get("message_id", 0)))
            stored = self._messages.get(key)
            if stored is None or not stored.from_bot:
                what = "delete" if method == "deleteMessage" else "edit"
                raise ApiError(f"Bad Request: message to {what} not found")
            if method == "deleteMessage":
                del self._messages[key]
                return True
            keyboard = self._keyboard(params, chat_id)
            text = self._text(params["text"]) if method == "editMessageText" else stored.text
            if method == "editMessageText" and stored.kind != "text":
                raise ApiError("Bad Request: there is no text in the message to edit")
            if text == stored.text and keyboard == stored.keyboard:
                raise ApiError(
                    "Bad Request: message is not modified: specified new message content and reply "
                    "markup are exactly the same as a current content and reply markup of the message"
                )
            stored.text, stored.keyboard, stored.edits = text, keyboard, stored.edits + 1
            return self._ptb_message(stored).to_dict()
        if method == "setWebhook":
            url = str(params["url"])
            parts = urlsplit(url)
            loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
            if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
                raise ApiError("Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
            secret = params.get("secret_token")
            if secret is not None and not _SECRET_TOKEN.fullmatch(str(secret)):
                raise ApiError("Bad Request: secret token contains unallowed characters")
            allowed = params.get("allowed_updates")
            self.webhook = Webhook(url=url, secret_token=secret, allowed_updates=allowed)
            return True
        if method == "deleteWebhook":
            self.webhook = None
            return True
        info = {
            "url": self.webhook.url if self.webhook else "",
            "has_custom_certificate": False,
            "pending_update_count": 0,
        }
        if self.webhook and self.webhook.allowed_updates:
            info["allowed_updates"] = self.webhook.allowed_updates
        return info  # getWebhookInfo


async def _params(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """The call's fields from a JSON, form or multipart body (nested objects arrive as JSON text
    in forms)."""
    content_type = request.headers.get("content-type", "")
    if not (await request.body()):
        return {}
    if content_type.startswith("application/json"):
        value = await request.json()
        if not isinstance(value, dict):
            raise ApiError("Bad Request: the body must be a JSON object")
        return value
    form = await request.form()
    params: dict[str, Any] = {}
    for key, value in form.multi_items():
        if isinstance(value, str) and key in _JSON_FIELDS:
            try:
                params[key] = json.loads(value)
            except ValueError:
                raise ApiError(f"Bad Request: can't parse {key} JSON object") from None
        elif isinstance(value, str):
            params[key] = value
        else:
            params[key] = f"attach://{getattr(value, 'filename', key)}"  # an upload; kept by name
    return params


def app(standin: TelegramStandin) -> Litestar:
    @post("/{path:path}", status_code=200)
    async def provider(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        prefix, _, method = str(request.path_params["path"]).strip("/").partition("/")
        call = Call(method=method, params={})
        try:
            if prefix != f"bot{standin.token}":
                raise ApiError("Unauthorized", 401)
            call.params = await _params(request)
            result = standin.call(method, call.params)
        except ApiError as exc:
            call.ok, call.description = False, exc.description
            standin.calls.append(call)
            body: dict[str, Any] = {"ok": False, "error_code": exc.code, "description": exc.description}
            if exc.parameters:
                body["parameters"] = exc.parameters
            return Response(body, status_code=exc.code)
        standin.calls.append(call)
        return Response({"ok": True, "result": result})

    return Litestar(route_handlers=[provider, messages_route(standin.messages, "chat")], debug=False)


def serve_telegram_standin(
    standin: TelegramStandin | None = None,
) -> contextlib.AbstractAsyncContextManager[TelegramStandin]:
    """Run the stand-in on 127.0.0.1 (a free port) in this event loop."""
    return serve_standin(standin or TelegramStandin(), app, "the Telegram stand-in")


@pytest.fixture
async def telegram_standin() -> AsyncIterator[TelegramStandin]:
    """A fresh Telegram stand-in per test (``standin.api_url`` / ``file_url`` for the plugin's
    ``api_url`` / ``file_url``, ``standin.token`` its bot token)."""
    async with serve_telegram_standin() as standin:
        yield standin
