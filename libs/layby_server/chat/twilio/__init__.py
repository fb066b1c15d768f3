"""The built-in ``twilio`` channel: questions as SMS or WhatsApp messages through Twilio, answers
as the person's text reply (docs/channels.md#twilio).

Configuration (``LAYBY_CHANNELS``)::

    {"sms": {"plugin": "twilio", "account_sid": "AC…", "auth_token": "twilio-token",
             "from": "+15557654321", "public_url": "https://layby.example.com/api/channels/sms/events",
             "default_recipient": "+15551234567"}}

``auth_token`` names an entry of ``LAYBY_WEBHOOK_SECRETS``; its value never appears in a log line
or an error. ``from`` is our number (``+…``), a WhatsApp sender (``whatsapp:+…``) or a Messaging
Service (``MG…``). ``public_url`` is the exact URL Twilio posts to, which its signature covers.
``api_url`` points the client at another host (a test stand-in); ``timeout`` bounds each call;
``mms`` lets an SMS number attach media.

What a question looks like is in ``rendering`` (pure); the signature and the webhook's fields
are in ``webhook``; what a failed call means is in ``errors``. This module holds the channel:
its settings, the SDK's asynchronous client pointed at ``api_url``, and the sends.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp
from twilio.http.async_http_client import AsyncTwilioHttpClient
from twilio.http.response import Response
from twilio.rest import Client

from layby_contracts import channels
from layby_contracts.events import MediaItem
from layby_server.chat import common
from layby_server.chat.twilio.errors import FINAL_CODES, RETRYABLE_CODES, delivery_error
from layby_server.chat.twilio.rendering import (
    NOT_OPEN,
    TEXT_LIMIT,
    Rendered,
    cut,
    render,
    retraction_text,
    segments,
)
from layby_server.chat.twilio.webhook import (
    EMPTY_TWIML,
    SIGNATURE_HEADER,
    pair,
    person_of,
    read,
    signature,
    verified_params,
)
from layby_server.observability.logs import get_logger

__all__ = [
    "API_URL",
    "EMPTY_TWIML",
    "FINAL_CODES",
    "NOT_OPEN",
    "OPTIONS",
    "PLUGIN",
    "RETRYABLE_CODES",
    "SIGNATURE_HEADER",
    "TEXT_LIMIT",
    "Rendered",
    "TwilioChannel",
    "render",
    "retraction_text",
    "segments",
    "signature",
]

log = get_logger("layby_server.chat.twilio")

PLUGIN = "twilio"
OPTIONS = {
    "account_sid",
    "auth_token",
    "from",
    "public_url",
    "default_recipient",
    "api_url",
    "timeout",
    "mms",
}
API_URL = "https://api.twilio.com"
WHATSAPP = "whatsapp:"
_ACCOUNT_SID = re.compile(r"AC[0-9a-fA-F]{32}")
_SERVICE_SID = re.compile(r"MG[0-9a-fA-F]{32}")
_NUMBER = re.compile(r"\+[1-9][0-9]{6,14}")
_ADDRESS = re.compile(rf"(?:{WHATSAPP})?\+[1-9][0-9]{{6,14}}")


class _HttpClient(AsyncTwilioHttpClient):  # type: ignore[misc] # the SDK ships no type hints
    """The SDK's asynchronous HTTP client, sending every call to ``base`` (Twilio's API host, or
    a stand-in) on a session of its own, opened on first use inside the running event loop. The
    Basic credentials go in a header built here (aiohttp's own helper is deprecated)."""

    def __init__(self, base: str, timeout: float) -> None:
        super().__init__(pool_connections=False, timeout=timeout)
        self._base = urlsplit(base)
        self._seconds = timeout
        self._session: aiohttp.ClientSession | None = None

    async def request(  # noqa: PLR0917 - the SDK calls it with these positional arguments
        self,
        method: str,
        url: str,
        params: Mapping[str, object] | None = None,
        data: Mapping[str, object] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,
        allow_redirects: bool = False,
    ) -> Response:
        parts = urlsplit(url)
        path = self._base.path.rstrip("/") + parts.path
        target = urlunsplit((self._base.scheme, self._base.netloc, path, parts.query, ""))
        sent = dict(headers or {})
        if auth is not None:
            sent["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        body = urlencode(_pairs(data)).encode() if data is not None else None
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._seconds))
        async with self._session.request(
            method.upper(),
            target,
            params=_pairs(params) or None,
            data=body,
            headers=sent,
            allow_redirects=allow_redirects,
        ) as response:
            return Response(response.status, await response.text(), response.headers)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _pairs(values: Mapping[str, object] | None) -> list[tuple[str, str]]:
    """Form fields as name/value pairs, a list (``MediaUrl``) as one pair per item."""
    pairs: list[tuple[str, str]] = []
    for name, value in (values or {}).items():
        for item in value if isinstance(value, list | tuple) else [value]:
            pairs.append((name, str(item)))
    return pairs


class TwilioChannel(common.ChatPlugin, plugin=PLUGIN, options=OPTIONS):
    """A Twilio number, WhatsApp sender or Messaging Service as a chat channel
    (docs/channels.md#twilio). No form, no buttons: every answer is a text reply."""

    def _configure(self, settings: common.PluginConfig) -> None:
        account_sid = settings.text(
            "account_sid", _ACCOUNT_SID.fullmatch, "must be the account's SID: AC and 32 hex digits"
        )
        token = settings.secret("auth_token")
        sender = settings.text(
            "from",
            lambda value: _ADDRESS.fullmatch(value) or _SERVICE_SID.fullmatch(value),
            "must be a number (+ and 7-15 digits), a WhatsApp sender "
            "(whatsapp:+…) or a Messaging Service SID (MG and 32 hex digits)",
        )
        public_url = settings.get("public_url")
        parts = urlsplit(public_url) if isinstance(public_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise ValueError(
                f"{PLUGIN} public_url must be the absolute http(s) URL Twilio posts to "
                "(https://<your layby>/api/channels/<name>/events)"
            )
        recipient = settings.optional_text(
            "default_recipient", _ADDRESS.fullmatch, "must be a number (+…) or a whatsapp:+… address"
        )
        mms = settings.flag("mms")
        self.account_sid = account_sid
        self.sender = sender
        self.public_url = str(public_url)
        self.default_recipient = recipient
        self.mms = mms
        self.api_url = settings.base_url("api_url", API_URL)
        self._token = token
        self._timeout = settings.timeout()
        self._client: Client | None = None
        self._http: _HttpClient | None = None

    # -- the client ---------------------------------------------------------------------------

    @property
    def service(self) -> bool:
        """Sends go through a Messaging Service (Twilio picks the number)."""
        return self.sender.startswith("MG")

    def _twilio(self) -> Client:
        if self._client is None:
            self._http = _HttpClient(self.api_url, self._timeout)
            # Region and edge stay Twilio's defaults whatever the environment says: the host is
            # api_url's.
            self._client = Client(
                self.account_sid,
                self._token,
                http_client=self._http,
                environment={"TWILIO_REGION": "", "TWILIO_EDGE": ""},
            )
        return self._client

    async def aclose(self) -> None:
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.close()

    def _recipient(self, recipient: str | None) -> str:
        """The ``To`` address: a WhatsApp sender writes to ``whatsapp:`` addresses (a bare number
        gains the prefix); an SMS number cannot write to one."""
        target = recipient or self.default_recipient
        if not target:
            raise channels.ChannelInputError(
                f"twilio {self.name!r}: no recipient (give one on the ask or set default_recipient)"
            )
        if not _ADDRESS.fullmatch(target):
            raise channels.ChannelInputError(
                f"twilio {self.name!r}: recipient {target!r} is not a number (+ and 7-15 digits) "
                "or a whatsapp:+… address"
            )
        if self.sender.startswith(WHATSAPP) and not target.startswith(WHATSAPP):
            return WHATSAPP + target
        if _NUMBER.fullmatch(self.sender) and target.startswith(WHATSAPP):
            raise channels.ChannelInputError(
                f"twilio {self.name!r}: recipient {target!r} is a WhatsApp address, but from is an SMS number"
            )
        return target

    def _attaches(self, to: str) -> bool:
        """Whether a message to ``to`` can carry attachments: WhatsApp always, SMS with ``mms``."""
        return to.startswith(WHATSAPP) or self.mms

    async def _send(self, to: str, *, body: str | None = None, media: list[str] | None = None) -> str:
        """One message; its SID. Failures as ``ChannelDeliveryError`` (errors.py)."""
        fields: dict[str, Any] = {"to": to}
        if self.service:
            fields["messaging_service_sid"] = self.sender
        else:
            fields["from_"] = self.sender
        if body is not None:
            fields["body"] = body
        if media:
            fields["media_url"] = media
        try:
            message = await self._twilio().messages.create_async(**fields)
        except Exception as exc:  # noqa: BLE001 - delivery_error re-raises what it does not know
            raise delivery_error(self.name, exc) from None
        log.info(
            "twilio.sent",
            channel=self.name,
            sid=message.sid,
            segments=segments(body) if body and not to.startswith(WHATSAPP) else None,
        )
        return str(message.sid)

    # -- outbound -----------------------------------------------------------------------------

    async def identity(self) -> str:
        """``layby doctor``'s check of the credentials: the account they sign in to."""
        try:
            account = await self._twilio().api.v2010.accounts(self.account_sid).fetch_async()
        except Exception as exc:  # noqa: BLE001 - delivery_error re-raises what it does not know
            raise delivery_error(self.name, exc) from None
        return (
            f"Twilio accepts the credentials: account {account.sid} "
            f"({account.friendly_name}, {account.status})"
        )

    async def deliver(self, delivery: channels.ChannelDelivery) -> channels.Posted:
        self._refuse_late(delivery)
        if common.control_of(delivery) == "fields":
            raise channels.ChannelInputError(f"twilio {self.name!r}: a form cannot be sent as a text message")
        to = self._recipient(delivery.recipient)
        unsent: list[MediaItem] = []
        for item in render(delivery, attach=self._attaches(to)).media:
            try:
                await self._send(to, body=cut(item.caption) if item.caption else None, media=[item.url])
            except channels.ChannelInputError as exc:
                # An attachment Twilio refuses still reaches the person, as a link in the text;
                # a recipient that cannot be written to fails below, on the question itself.
                log.info("twilio.media_as_link", channel=self.name, kind=item.kind, error=str(exc))
                unsent.append(item)
        text = render(delivery, attach=self._attaches(to), links=unsent).text
        sid = await self._send(to, body=text)
        return channels.Posted(chat=pair(to, self.sender), message=sid)

    async def notify(self, notification: channels.ChannelNotification) -> list[str]:
        """A one-way text message (docs/notifications.md): plain text only, cut to Twilio's
        1,600 characters; its SID."""
        for field in ("media", "template", "options", "schema"):
            if getattr(notification, field) is not None:
                raise channels.ChannelInputError(
                    f"twilio {self.name!r}: a notification's {field} cannot be sent"
                )
        to = self._recipient(notification.recipient)
        return [await self._send(to, body=cut(notification.message))]

    async def say(self, chat: str, text: str, thread: str | None = None) -> None:
        """A conversation's reply into ``chat`` (a pair id) as a plain message, cut to the limit."""
        await self._send(self._recipient(person_of(chat)), body=cut(text))

    async def retract(self, posted: channels.Posted, retraction: channels.Retraction) -> None:
        """A delivered text message cannot be edited: send the person a short follow-up quoting
        the question and saying how it ended."""
        await self._send(person_of(posted.chat), body=retraction_text(retraction))

    # -- inbound ------------------------------------------------------------------------------

    async def inbound(self, request: channels.InboundRequest) -> channels.Inbound:
        params = verified_params(request, self._token.encode(), self.public_url)
        return read(request, params, account_sid=self.account_sid, service=self.service)

    async def respond(
        self, reply: channels.InboundReply, outcome: channels.ReplyOutcome
    ) -> channels.InboundResponse | None:
        return EMPTY_TWIML  # everything the person hears goes out through the API

    async def open_form(self, reply: channels.InboundReply, delivery: channels.ChannelDelivery) -> None:
        return None  # no form is ever sent here

    async def follow_up(self, reply: channels.InboundReply, outcome: channels.ReplyOutcome) -> None:
        """Tell the person why a reply was refused, or that the question has gone. Never raises."""
        line = outcome.notice if outcome.status == "rejected" else None
        line = NOT_OPEN if outcome.status == "late" else line
        if not line:
            return
        try:
            await self._send(self._recipient(reply.sender), body=cut(line))
        except channels.ChannelDeliveryError as exc:
            log.warning("twilio.follow_up_failed", channel=self.name, status=outcome.status, error=str(exc))
