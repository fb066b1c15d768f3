"""A Twilio REST API stand-in: a small Litestar app on 127.0.0.1 that the real client (the
``twilio`` SDK, its HTTP client pointed here by the plugin's ``api_url``) talks to, and a person
who texts back.

Three faces:

- **provider**: ``POST /2010-04-01/Accounts/{AccountSid}/Messages.json`` (form-encoded), answered
  as Twilio answers: ``201`` with the message resource and a numbered ``SM…`` SID, or an error
  envelope ``{"code", "message", "more_info", "status"}``. Every call is checked: Basic
  credentials matching the path's account, ``To`` an E.164 number or ``whatsapp:`` address of a
  known person, ``From`` our number (or ``MessagingServiceSid`` our service), both on the same
  channel, ``Body`` or ``MediaUrl`` present, ``Body`` at most 1,600 characters, at most 10
  ``MediaUrl``s (1 on WhatsApp), no unknown field; a WhatsApp send outside the person's 24-hour
  window is refused with 63016, a person who replied STOP with 21610. ``fail_next`` scripts a
  failure (a 429/20429, a 500, any code).
- **person**: ``text`` a reply from a person's phone: the form Twilio would POST (``MessageSid``,
  ``AccountSid``, ``From``, ``To``, ``Body``, …) is signed exactly as Twilio signs it, with the
  auth token over the configured public URL and the sorted parameters, and POSTed to the door.
  ``post`` re-sends any form (a replay) and lets a test sign another URL or forge the signature.
- **inspection**: ``messages(address)`` is what the person's phone shows, oldest first;
  ``GET /_test/messages?to=<address>`` serves the same as JSON.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
from litestar import Litestar, Request, Response, get, post

from tests.standins.serving import Failure, messages_route, serve_standin

ACCOUNT_SID = "AC" + "0123456789abcdef" * 2
AUTH_TOKEN = "twilio-standin-auth-token-0123456789"
NUMBER = "+15557654321"
SERVICE_SID = "MG" + "fedcba9876543210" * 2
SIGNATURE_HEADER = "X-Twilio-Signature"
BODY_LIMIT = 1600
WINDOW = timedelta(hours=24)

_ADDRESS = re.compile(r"(whatsapp:)?\+[1-9][0-9]{6,14}")
_FIELDS = {"To", "From", "MessagingServiceSid", "Body", "MediaUrl", "StatusCallback"}


class ApiError(Exception):
    def __init__(self, code: int, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status

    def envelope(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "more_info": f"https://www.twilio.com/docs/errors/{self.code}",
            "status": self.status,
        }


@dataclass
class Sent:
    """A message as the person's phone shows it (ours or theirs)."""

    sid: str
    to: str
    sender: str
    body: str | None
    media: list[str] = field(default_factory=list)
    inbound: bool = False


@dataclass
class Call:
    """One request our client made: its fields, how it was answered."""

    params: list[tuple[str, str]]
    ok: bool = True
    code: int | None = None


@dataclass
class Webhook:
    """A number's webhook: ``public_url`` is the URL Twilio is configured with (and signs);
    ``target`` is where the request really goes (the door, behind a proxy in production)."""

    public_url: str
    target: str


@dataclass
class TwilioStandin:
    """The stand-in's state and its person and inspection faces (see the module docstring)."""

    account_sid: str = ACCOUNT_SID
    auth_token: str = AUTH_TOKEN
    numbers: set[str] = field(default_factory=lambda: {NUMBER, f"whatsapp:{NUMBER}"})
    service_sid: str = SERVICE_SID
    url: str = ""
    webhooks: dict[str, Webhook] = field(default_factory=dict)
    """Each of our addresses' incoming-message webhook, as set in Twilio's console."""
    people: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    _phones: list[Sent] = field(default_factory=list)
    _sids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _failures: list[Failure] = field(default_factory=list)

    # -- set-up -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.url

    def add_person(self, number: str, *, whatsapp: bool = False, name: str = "Ada") -> str:
        """A mobile number that can receive texts (and, with ``whatsapp``, WhatsApp messages, its
        24-hour window opened now as if the person had written first); its address."""
        self.people[number] = {"name": name, "stopped": False, "last_inbound": self.now if whatsapp else None}
        return f"whatsapp:{number}" if whatsapp else number

    def point(self, ours: str, public_url: str, target: str | None = None) -> None:
        """Set our address's webhook (``target`` defaults to ``public_url``)."""
        self.webhooks[ours] = Webhook(public_url, target or public_url)

    def stop(self, number: str) -> None:
        """The person replied STOP: Twilio refuses every later send to them (21610)."""
        self.people[number]["stopped"] = True

    def fail_next(
        self, code: int = 20429, *, status: int = 429, message: str | None = None, times: int = 1
    ) -> None:
        """The next ``times`` sends fail with Twilio's ``code`` and HTTP ``status``."""
        self._failures.append(Failure(code, status, message or f"Error {code}", times))

    # -- inspection ---------------------------------------------------------------------------

    def messages(self, address: str) -> list[Sent]:
        """What the phone at ``address`` shows (WhatsApp and SMS apart), oldest first."""
        return [m for m in self._phones if address in (m.to, m.sender)]

    def received(self, address: str) -> list[Sent]:
        """The messages we sent to ``address``, oldest first."""
        return [m for m in self._phones if m.to == address and not m.inbound]

    def refused(self) -> list[Call]:
        return [call for call in self.calls if not call.ok]

    # -- the person ---------------------------------------------------------------------------

    def form(
        self, address: str, body: str, *, to: str | None = None, media: Sequence[str] = ()
    ) -> list[tuple[str, str]]:
        """The fields Twilio POSTs for a message from ``address`` to our number (``to``): the
        message is on the phone from now on, and a WhatsApp person's window reopens."""
        whatsapp = address.startswith("whatsapp:")
        ours = to or (f"whatsapp:{NUMBER}" if whatsapp else NUMBER)
        sid = self._sid()
        number = address.removeprefix("whatsapp:")
        if number in self.people and whatsapp:
            self.people[number]["last_inbound"] = self.now
        self._phones.append(
            Sent(sid=sid, to=ours, sender=address, body=body, media=list(media), inbound=True)
        )
        fields = [
            ("ToCountry", "US"),
            ("SmsMessageSid", sid),
            ("NumMedia", str(len(media))),
            ("SmsSid", sid),
            ("SmsStatus", "received"),
            ("Body", body),
            ("To", ours),
            ("NumSegments", "1"),
            ("MessageSid", sid),
            ("AccountSid", self.account_sid),
            ("From", address),
            ("ApiVersion", "2010-04-01"),
            ("MessagingServiceSid", self.service_sid),
        ]
        fields += [(f"MediaUrl{i}", url) for i, url in enumerate(media)]
        if whatsapp:
            fields += [("ProfileName", self.people.get(number, {}).get("name", "")), ("WaId", number[1:])]
        return fields

    def _hook(self, fields: Sequence[tuple[str, str]]) -> Webhook:
        ours = dict(fields).get("To", "")
        if ours not in self.webhooks:
            raise AssertionError(f"no webhook set for {ours!r}: point it first")
        return self.webhooks[ours]

    def sign(self, fields: Sequence[tuple[str, str]], url: str | None = None) -> str:
        """Twilio's X-Twilio-Signature for ``fields`` POSTed to ``url`` (the webhook's public URL
        unless given)."""
        values: dict[str, set[str]] = {}
        for name, value in fields:
            values.setdefault(name, set()).add(value)
        text = (url or self._hook(fields).public_url) + "".join(
            n + v for n in sorted(values) for v in sorted(values[n])
        )
        digest = hmac.new(self.auth_token.encode(), text.encode(), hashlib.sha1).digest()
        return base64.b64encode(digest).decode()

    async def post(
        self,
        fields: Sequence[tuple[str, str]],
        *,
        signature: str | None = None,
        signed_url: str | None = None,
        target: str | None = None,
        content_type: str = "application/x-www-form-urlencoded",
    ) -> httpx.Response:
        """POST ``fields`` as Twilio does, signed over ``signed_url`` (the public URL unless
        given); ``signature`` overrides the header (an empty string sends none)."""
        sig = signature if signature is not None else self.sign(fields, signed_url)
        headers = {"Content-Type": content_type, "User-Agent": "TwilioProxy/1.1"}
        if sig:
            headers[SIGNATURE_HEADER] = sig
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            return await http.post(
                target or self._hook(fields).target, content=urlencode(fields).encode(), headers=headers
            )

    async def text(self, address: str, body: str, *, to: str | None = None) -> httpx.Response:
        """The person at ``address`` texts ``body`` to our number (``to``); the door's response."""
        return await self.post(self.form(address, body, to=to))

    async def status_callback(self, sid: str, status: str = "delivered") -> httpx.Response:
        """Twilio reports a message's status (signed like every webhook)."""
        sent = next(m for m in self._phones if m.sid == sid)
        fields = [
            ("MessageSid", sid),
            ("SmsSid", sid),
            ("AccountSid", self.account_sid),
            ("From", sent.sender),
            ("To", sent.to),
            ("MessageStatus", status),
            ("SmsStatus", status),
            ("ApiVersion", "2010-04-01"),
        ]
        hook = self.webhooks[sent.sender]  # sent to the sender's webhook, as a service's callback is
        return await self.post(fields, signed_url=hook.public_url, target=hook.target)

    # -- the provider -------------------------------------------------------------------------

    def _sid(self) -> str:
        return f"SM{next(self._sids):032x}"

    def create(
        self, authorization: str | None, account: str, params: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """Validate one Messages create and apply it; the message resource, or ``ApiError``."""
        expected = base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        if authorization != f"Basic {expected}" or account != self.account_sid:
            raise ApiError(20003, "Authenticate", 401)
        unknown = {name for name, _ in params} - _FIELDS
        if unknown:
            raise ApiError(21659, f"Unknown parameter {sorted(unknown)[0]}")
        fields = dict(params)
        media = [value for name, value in params if name == "MediaUrl"]
        to = fields.get("To", "")
        if not to:
            raise ApiError(21604, "A 'To' phone number is required.")
        if not _ADDRESS.fullmatch(to):
            raise ApiError(21211, f"Invalid 'To' Phone Number: {to}")
        if "From" in fields and "MessagingServiceSid" in fields:
            raise ApiError(21603, "Give From or MessagingServiceSid, not both")
        sender = fields.get("From") or fields.get("MessagingServiceSid")
        if not sender:
            raise ApiError(21603, "A 'From' phone number is required.")
        whatsapp = to.startswith("whatsapp:")
        if "MessagingServiceSid" in fields:
            if sender != self.service_sid:
                raise ApiError(21701, "The Messaging Service Sid is invalid")
            sender = f"whatsapp:{NUMBER}" if whatsapp else NUMBER
        elif sender not in self.numbers:
            raise ApiError(
                21606,
                f"The 'From' phone number provided ({sender}) is not a valid message-capable Twilio phone number for this destination.",
            )
        if sender.startswith("whatsapp:") != whatsapp:
            raise ApiError(21910, "Invalid From and To pair. From and To should be of the same channel")
        body = fields.get("Body")
        if not body and not media:
            raise ApiError(21602, "Message body is required.")
        if body is not None and len(body.encode("utf-16-le")) // 2 > BODY_LIMIT:
            raise ApiError(21617, "The concatenated message body exceeds the 1600 character limit.")
        if len(media) > (1 if whatsapp else 10):
            raise ApiError(21623, "Too many media URLs")
        number = to.removeprefix("whatsapp:")
        person = self.people.get(number)
        if person is None:
            raise ApiError(21211, f"Invalid 'To' Phone Number: {to}")
        if person["stopped"]:
            raise ApiError(21610, "Attempt to send to unsubscribed recipient")
        if whatsapp and (person["last_inbound"] is None or self.now - person["last_inbound"] > WINDOW):
            raise ApiError(
                63016, "Failed to send freeform message because you are outside the allowed window."
            )
        for failure in self._failures:
            if failure.times > 0:
                failure.times -= 1
                raise ApiError(failure.code, failure.message, failure.status)
        sid = self._sid()
        self._phones.append(Sent(sid=sid, to=to, sender=sender, body=body, media=media))
        stamp = self.now.strftime("%a, %d %b %Y %H:%M:%S +0000")
        return {
            "account_sid": self.account_sid,
            "api_version": "2010-04-01",
            "body": body or "",
            "date_created": stamp,
            "date_sent": None,
            "date_updated": stamp,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": None if "MessagingServiceSid" in fields else sender,
            "messaging_service_sid": fields.get("MessagingServiceSid"),
            "num_media": str(len(media)),
            "num_segments": "1",
            "price": None,
            "price_unit": "USD",
            "sid": sid,
            "status": "accepted" if "MessagingServiceSid" in fields else "queued",
            "subresource_uris": {
                "media": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}/Media.json"
            },
            "to": to,
            "uri": f"/2010-04-01/Accounts/{self.account_sid}/Messages/{sid}.json",
        }


def app(standin: TwilioStandin) -> Litestar:
    @get("/2010-04-01/Accounts/{resource:str}")
    async def fetch_account(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        """The account resource: what a credentials check (``layby doctor``) fetches."""
        expected = base64.b64encode(f"{standin.account_sid}:{standin.auth_token}".encode()).decode()
        account = str(request.path_params["resource"]).removesuffix(".json")
        if request.headers.get("authorization") != f"Basic {expected}" or account != standin.account_sid:
            refused = ApiError(20003, "Authenticate", 401)
            return Response(refused.envelope(), status_code=refused.status)
        return Response(
            {
                "sid": standin.account_sid,
                "friendly_name": "Layby stand-in",
                "status": "active",
                "type": "Full",
                "uri": f"/2010-04-01/Accounts/{standin.account_sid}.json",
            }
        )

    @post("/2010-04-01/Accounts/{account:str}/Messages.json", status_code=201)
    async def create(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
        account = str(request.path_params["account"])
        params = parse_qsl((await request.body()).decode(), keep_blank_values=True)
        call = Call(params=params)
        try:
            if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
                raise ApiError(21600, "The body must be form-encoded")
            result = standin.create(request.headers.get("authorization"), account, params)
        except ApiError as exc:
            call.ok, call.code = False, exc.code
            standin.calls.append(call)
            return Response(exc.envelope(), status_code=exc.status)
        standin.calls.append(call)
        return Response(result, status_code=201)

    return Litestar(
        route_handlers=[fetch_account, create, messages_route(standin.messages, "to")], debug=False
    )


def serve_twilio_standin(
    standin: TwilioStandin | None = None,
) -> contextlib.AbstractAsyncContextManager[TwilioStandin]:
    """Run the stand-in on 127.0.0.1 (a free port) in this event loop."""
    return serve_standin(standin or TwilioStandin(), app, "the Twilio stand-in")
