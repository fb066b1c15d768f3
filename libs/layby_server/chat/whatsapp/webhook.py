"""How the ``whatsapp`` channel reads its webhook (docs/channels.md#whatsapp-inbound): the
``X-Hub-Signature-256`` check over the raw body, the ``hub.challenge`` handshake, and a
notification's messages as ``InboundReply``s (statuses are acknowledged and ignored)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from layby_contracts.channels import InboundMalformed, InboundRefused, InboundReply, InboundResponse
from layby_server.chat import common
from layby_server.chat.whatsapp.rendering import NO, YES, parse_flow_token

SIGNATURE_HEADER = "x-hub-signature-256"
_HEX = re.compile(r"[0-9a-f]{64}")
_CHALLENGE = re.compile(r"[A-Za-z0-9_.-]{1,200}")
TEXT_MESSAGE = "text"
"""WhatsApp's message type of a typed message (a wire value, not Layby's answer format)."""
FORM_SUFFIX = "#form"
"""Appended to a Flow submission's event id for the reply that re-sends a refused form."""


def signature(app_secret: bytes, body: bytes) -> str:
    """The header value Meta sends: ``sha256=`` and the hex HMAC-SHA256 of the raw body under
    the app secret."""
    return "sha256=" + hmac.new(app_secret, body, hashlib.sha256).hexdigest()


def verify(app_secret: bytes, headers: Mapping[str, str], body: bytes) -> None:
    """Raise ``InboundRefused`` unless ``X-Hub-Signature-256`` signs exactly ``body``."""
    given = headers.get(SIGNATURE_HEADER)
    if given is None:
        raise InboundRefused("no X-Hub-Signature-256 header")
    scheme, _, digest = given.strip().partition("=")
    digest = digest.lower()
    if scheme != "sha256" or not _HEX.fullmatch(digest):
        raise InboundRefused("a malformed X-Hub-Signature-256 header")
    expected = hmac.new(app_secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), digest.encode()):
        raise InboundRefused("a wrong X-Hub-Signature-256")


def handshake(verify_token: bytes, query: Mapping[str, str]) -> InboundResponse:
    """Meta's subscription check: the challenge back as text when the verify token matches,
    403 otherwise."""
    mode = query.get("hub.mode")
    token = query.get("hub.verify_token", "")
    challenge = query.get("hub.challenge", "")
    if mode != "subscribe" or not hmac.compare_digest(token.encode(), verify_token):
        return InboundResponse(status=403, body=b"Forbidden")
    if not _CHALLENGE.fullmatch(challenge):
        raise InboundMalformed("hub.challenge must be 1-200 letters, digits, '.', '_' or '-'")
    return InboundResponse(status=200, body=challenge.encode(), content_type="text/plain")


@dataclass(frozen=True)
class Notification:
    """What one webhook body holds for our phone number: the person's replies and the delivery
    statuses that failed."""

    replies: list[InboundReply] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)


def read(body: bytes, phone_number_id: str) -> Notification:
    """The replies a verified notification carries for ``phone_number_id``."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise InboundMalformed(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("entry", []), list):
        raise InboundMalformed("the body is not a WhatsApp notification (an object with an entry list)")
    replies: list[InboundReply] = []
    failures: list[dict[str, Any]] = []
    for entry in data.get("entry") or []:
        changes = entry.get("changes") if isinstance(entry, dict) else None
        for change in changes if isinstance(changes, list) else []:
            if not isinstance(change, dict) or change.get("field") != "messages":
                continue
            value = change.get("value")
            if not isinstance(value, dict):
                raise InboundMalformed("entry.changes.value must be an object")
            metadata = value.get("metadata") or {}
            if str(metadata.get("phone_number_id", "")) != phone_number_id:
                continue  # another number of the same business account
            names = _names(value.get("contacts"))
            for message in value.get("messages") or []:
                replies.extend(_replies(message, names))
            for status in value.get("statuses") or []:
                if isinstance(status, dict) and status.get("status") == "failed":
                    failures.append(status)
    return Notification(replies=replies, failures=failures)


def _names(contacts: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    for contact in contacts if isinstance(contacts, list) else []:
        if isinstance(contact, dict) and isinstance(contact.get("profile"), dict):
            name = contact["profile"].get("name")
            if isinstance(name, str) and contact.get("wa_id"):
                names[str(contact["wa_id"])] = name
    return names


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InboundMalformed(f"{what} must be a non-empty string")
    return value


def _replies(message: Any, names: Mapping[str, str]) -> list[InboundReply]:
    if not isinstance(message, dict):
        raise InboundMalformed("entry.changes.value.messages[] must be objects")
    sender = _str(message.get("from"), "messages[].from")
    wamid = _str(message.get("id"), "messages[].id")
    found = message.get("context")
    context: dict[str, Any] = found if isinstance(found, dict) else {}
    replied = context.get("id") if isinstance(context.get("id"), str) else None
    base: dict[str, Any] = {
        "sender": sender,
        "sender_name": names.get(sender),
        "chat": sender,
        "event_id": wamid,
    }
    own = {"wamid": wamid}
    kind = message.get("type")
    params: dict[str, Any] = {}
    if isinstance(message.get("referral"), dict):
        params["referral"] = message["referral"]
    if kind == TEXT_MESSAGE:
        text = (message.get("text") or {}).get("body")
        return [
            InboundReply(
                kind="typed",
                message=replied,
                value=_str(text, "text.body"),
                direct=True,
                context=own,
                params=params or None,
                **base,
            )
        ]
    if kind == "interactive":
        return _interactive(message.get("interactive"), replied, base, own)
    if kind == "button":
        # A template's quick-reply button: no question of ours asked it; its payload is
        # enrichment for the program reading inbound messages.
        button = message.get("button") or {}
        params["payload"] = button.get("payload")
        return [_bridged(base, own, button.get("text"), params)]
    # An image, a location, a reaction...: recorded as an inbound message with its type.
    params["type"] = str(kind)
    return [_bridged(base, own, None, params)]


def _bridged(base: dict[str, Any], own: dict[str, Any], text: Any, params: dict[str, Any]) -> InboundReply:
    """A reply that names no question and no message: the door records it as an inbound message
    (``unmatched``), with ``params`` beside it."""
    return InboundReply(
        kind="tap", value=text if isinstance(text, str) else None, context=own, params=params, **base
    )


def _interactive(
    interactive: Any, replied: str | None, base: dict[str, Any], own: dict[str, Any]
) -> list[InboundReply]:
    if not isinstance(interactive, dict):
        raise InboundMalformed("messages[].interactive must be an object")
    kind = interactive.get("type")
    if kind in ("button_reply", "list_reply"):
        picked = interactive.get(kind) or {}
        title = picked.get("title")
        tap = _tap(picked.get("id"))
        if tap is None:
            # Malformed, forged or from a template: never an answer.
            return [_bridged(base, own, title, {"id": picked.get("id")})]
        interaction_id, value = tap
        if isinstance(value, bool):
            return [
                InboundReply(
                    kind="yes_no",
                    interaction_id=interaction_id,
                    value=value,
                    message=replied,
                    context=own,
                    **base,
                )
            ]
        return [
            InboundReply(
                kind="tap", interaction_id=interaction_id, index=value, message=replied, context=own, **base
            )
        ]
    if kind == "nfm_reply":
        return _submitted(interactive.get("nfm_reply"), replied, base, own)
    raise InboundMalformed(f"unknown interactive reply type {kind!r}")


def _tap(value: Any) -> tuple[str, int | bool] | None:
    if not isinstance(value, str) or len(value) > 256:
        return None
    parsed = common.parse_tap_id(value)
    if parsed is not None:
        return parsed
    interaction_id, sep, flag = value.rpartition(common.TAP_SEPARATOR)
    if sep and interaction_id and flag in (YES, NO):
        return interaction_id, flag == YES
    return None


def _submitted(
    reply: Any, replied: str | None, base: dict[str, Any], own: dict[str, Any]
) -> list[InboundReply]:
    """A Flow's submission: the values in ``response_json``, the question (or notification) in
    its ``flow_token``. A question's submission is followed by an ``open_form`` reply, which
    sends the form again if the door refused the values (docs/channels.md#whatsapp-forms)."""
    raw = (reply or {}).get("response_json") if isinstance(reply, dict) else None
    try:
        values = msgspec.json.decode(_str(raw, "nfm_reply.response_json"))
    except msgspec.DecodeError as exc:
        raise InboundMalformed(f"nfm_reply.response_json is not JSON: {exc}") from None
    if not isinstance(values, dict):
        raise InboundMalformed("nfm_reply.response_json must be a JSON object")
    token = values.pop("flow_token", None)
    parsed = parse_flow_token(token)
    if parsed is None:
        return [_bridged(base, own, None, {"flow_token": token, "values": values})]
    interaction_id, marker = parsed
    if interaction_id is None:
        return [
            InboundReply(kind="submitted", value=values, notification_id=str(marker), context=own, **base)
        ]
    resends = int(marker)
    submitted = InboundReply(
        kind="submitted", interaction_id=interaction_id, value=values, message=replied, context=own, **base
    )
    reopen = msgspec.structs.replace(
        submitted,
        kind="open_form",
        value=None,
        event_id=f"{base['event_id']}{FORM_SUFFIX}",
        context=own | {"resends": resends},
    )
    return [submitted, reopen]
