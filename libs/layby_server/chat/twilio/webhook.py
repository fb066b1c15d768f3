"""How the ``twilio`` channel reads a webhook: the ``X-Twilio-Signature`` check over the
configured public URL and the POSTed parameters, then an incoming message as an
``InboundReply`` (docs/channels.md#twilio-replies)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from layby_contracts import channels
from layby_server.chat.twilio.rendering import TEXT_LIMIT, units

SIGNATURE_HEADER = "x-twilio-signature"
FORM = "application/x-www-form-urlencoded"
EMPTY_TWIML = channels.InboundResponse(
    body=b'<?xml version="1.0" encoding="UTF-8"?><Response/>', content_type="text/xml"
)
"""Twilio's acknowledgement: TwiML that does nothing (every reply goes out through the API)."""
PAIR_SEPARATOR = "|"

Params = Sequence[tuple[str, str]]


def signature(token: bytes, url: str, params: Params) -> str:
    """Twilio's request signature: base64 of HMAC-SHA1 under the auth token over the URL followed
    by each parameter's name and value, names sorted and, for a repeated name, its distinct
    values sorted."""
    values: dict[str, set[str]] = {}
    for name, value in params:
        values.setdefault(name, set()).add(value)
    text = url + "".join(name + value for name in sorted(values) for value in sorted(values[name]))
    return base64.b64encode(hmac.new(token, text.encode(), hashlib.sha1).digest()).decode()


def url_forms(url: str) -> list[str]:
    """The configured URL as written, without its port and with the scheme's default port: Twilio
    signs some requests with the port and some without."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    bare = host if parts.port is None else host.rsplit(":", 1)[0]
    default = "443" if parts.scheme == "https" else "80"
    forms = [url, urlunsplit(parts._replace(netloc=bare))]
    if parts.port is None:
        forms.append(urlunsplit(parts._replace(netloc=f"{bare}:{default}")))
    return list(dict.fromkeys(forms))


def verified_params(request: channels.InboundRequest, token: bytes, public_url: str) -> list[tuple[str, str]]:
    """The POSTed parameters once the signature over ``public_url`` holds; ``InboundRefused``
    (nothing else read) when the header is missing or wrong. The URL is the configured one,
    never one rebuilt from the request's Host or forwarding headers."""
    given = request.headers.get(SIGNATURE_HEADER)
    if not given:
        raise channels.InboundRefused("no X-Twilio-Signature header")
    try:
        params = parse_qsl(request.body.decode(), keep_blank_values=True, strict_parsing=bool(request.body))
    except (UnicodeDecodeError, ValueError):
        raise channels.InboundRefused("a body that is not the form Twilio signs") from None
    for url in url_forms(public_url):
        if hmac.compare_digest(signature(token, url, params).encode(), given.encode()):
            return params
    raise channels.InboundRefused("a wrong X-Twilio-Signature")


def pair(person: str, ours: str) -> str:
    """A stable id of the conversation between a person's address and ours (a number, a
    ``whatsapp:`` address or a Messaging Service's SID)."""
    return f"{person}{PAIR_SEPARATOR}{ours}"


def person_of(chat: str) -> str:
    """The person's address in a ``pair`` id."""
    return chat.partition(PAIR_SEPARATOR)[0]


def read(
    request: channels.InboundRequest, params: Params, *, account_sid: str, service: bool
) -> channels.Inbound:
    """The reply a verified webhook carries: an incoming message as a typed reply in the
    person's direct conversation with our number; a status callback, or a message for another
    account, is acknowledged and ignored. ``service``: the channel sends through a Messaging
    Service, whose SID (not the number it picked) is our side of the pair."""
    content_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if content_type != FORM:
        raise channels.InboundMalformed(f"the body must be {FORM}, not {content_type or 'untyped'}")
    fields = dict(params)
    if "MessageStatus" in fields or fields.get("AccountSid") != account_sid:
        return channels.Inbound(response=EMPTY_TWIML)
    for name in ("MessageSid", "From", "To"):
        if not fields.get(name):
            raise channels.InboundMalformed(f"no {name}")
    body = fields.get("Body", "")
    if units(body) > TEXT_LIMIT:
        raise channels.InboundMalformed(f"Body is longer than {TEXT_LIMIT} characters")
    ours = fields.get("MessagingServiceSid") if service else None
    reply = channels.InboundReply(
        kind="typed",
        sender=fields["From"],
        sender_name=fields.get("ProfileName") or None,
        chat=pair(fields["From"], ours or fields["To"]),
        value=body,
        event_id=fields["MessageSid"],
        context={"to": fields["To"]},
        direct=True,
    )
    return channels.Inbound(replies=[reply], response=EMPTY_TWIML)
