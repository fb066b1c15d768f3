"""The built-in ``slack`` channel: questions as Block Kit messages, answers from taps, thread
replies and modals (docs/channels.md#slack).

Configuration (``LAYBY_CHANNELS``)::

    {"team": {"plugin": "slack", "bot_token": "slack-bot", "signing_secret": "slack-signing",
              "default_recipient": "C0123456789"}}

``bot_token`` and ``signing_secret`` name entries of ``LAYBY_WEBHOOK_SECRETS``; ``api_url``
(default ``https://slack.com/api/``) points at GovSlack or a stand-in; ``timeout`` is seconds per
API call. Slack posts the person's actions to ``/api/channels/<name>/events``; every request is
verified against the signing secret before anything in it is read.

Controls carry ids, never the text shown: a button's value is the tap id of its option
(``common.tap_id``), so a tap names an option by index and the door checks it against the
question it belongs to.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any, cast
from urllib.parse import parse_qs

import aiohttp
import msgspec
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

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
from layby_server.chat import common
from layby_server.logs import get_logger

log = get_logger(__name__)

API_URL = "https://slack.com/api/"
OPTIONS = {"bot_token", "signing_secret", "api_url", "default_recipient", "timeout"}
SIGNATURE_WINDOW = 300  # seconds either side of now, as Slack's own verifier allows
SECTION_TEXT = 3000
MESSAGE_TEXT = 40_000
MAX_SECTIONS = 10  # a question longer than 30,000 characters is cut (the `text` keeps more)
CONTROL_TEXT = 75  # a button's or an option's text
OPTION_VALUE = 150
MAX_ELEMENTS = 25  # elements in one actions block
MAX_BUTTONS = 5  # a select with more options gets a menu
MAX_MENU = 100
MODAL_BLOCKS = 100
MODAL_TITLE = 24
LABEL = 2000
BLOCK_ID = 255
FORM_CALLBACK = "layby:form"
NO_LONGER_OPEN = "This question is no longer open."
ANSWER_IN_THREAD = "Reply in this thread to answer."
# Slack's error codes that another attempt may get past; every other code (channel_not_found,
# not_in_channel, invalid_blocks, msg_too_long, invalid_auth...) refuses this input for good.
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class SlackChannel:
    """A Slack app's bot (docs/channels.md#slack)."""

    supports_form_delivery = True

    def __init__(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        secrets: Mapping[str, bytes],
        clock: Callable[[], float] = time.time,
    ) -> None:
        common.check_options(config, "slack", OPTIONS)
        self.name = name
        self._token = common.secret(config, "bot_token", secrets, "slack")
        self._signing_secret = common.secret(config, "signing_secret", secrets, "slack").encode()
        self.api_url = common.base_url(config, "api_url", API_URL, "slack")
        recipient = config.get("default_recipient")
        if recipient is not None and (not isinstance(recipient, str) or not recipient.strip()):
            raise ValueError("slack default_recipient must be a channel or user id")
        self.default_recipient: str | None = recipient
        timeout = config.get("timeout", 10)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ValueError("slack timeout must be a positive number of seconds")
        self._timeout = float(timeout)
        self.clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None

    def __repr__(self) -> str:
        return f"SlackChannel(name={self.name!r}, api_url={self.api_url!r})"

    # -- the Web API ---------------------------------------------------------------------------

    def _web(self) -> AsyncWebClient:
        # Created on first use, inside the running loop (aiohttp sessions belong to one loop).
        if self._client is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
            # retry_handlers=[]: the delivery service owns retries and honours retry_after; the
            # SDK's own rate-limit handler would sleep inside one attempt.
            self._client = AsyncWebClient(
                token=self._token,
                base_url=self.api_url,
                session=self._session,
                timeout=int(max(1, self._timeout)),
                retry_handlers=[],
            )
        return self._client

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._client = None

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        try:
            response = await self._web().api_call(method, json=params)
        except SlackApiError as exc:
            raise _api_error(self.name, method, exc) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ChannelDeliveryError(
                f"slack {self.name!r}: {type(exc).__name__} calling {method}", retryable=True
            ) from None
        return cast(dict[str, Any], response.data)

    # -- delivery ------------------------------------------------------------------------------

    async def deliver(self, delivery: ChannelDelivery) -> Posted:
        if delivery.timeout_at.timestamp() <= self.clock():
            raise ChannelInputError(
                f"slack {self.name!r}: the question already timed out before it could be sent; "
                "nothing was sent"
            )
        channel = delivery.recipient or self.default_recipient
        if not channel:
            raise ChannelInputError(f"slack {self.name!r}: no recipient and no default_recipient configured")
        data = await self._call(
            "chat.postMessage",
            channel=channel,
            text=_fallback_text(delivery),
            blocks=message_blocks(delivery),
            unfurl_links=False,
            unfurl_media=False,
        )
        chat, ts = data.get("channel"), data.get("ts")
        if not isinstance(chat, str) or not isinstance(ts, str):
            raise ChannelDeliveryError(
                f"slack {self.name!r}: chat.postMessage answered without channel and ts"
            )
        return Posted(chat=chat, message=ts)

    async def retract(self, posted: Posted, retraction: Retraction) -> None:
        # chat.update without blocks keeps the old ones (and their buttons): always send them.
        blocks = [*_question_sections(retraction.question), _context(common.retraction_line(retraction))]
        await self._call(
            "chat.update",
            channel=posted.chat,
            ts=posted.message,
            text=_escape(_cut(retraction.question, MESSAGE_TEXT)),
            blocks=blocks,
        )

    def validate_form_schema(self, schema: dict[str, Any], question: str) -> None:
        """Refuse a form a Slack modal cannot hold, naming the property."""
        properties: dict[str, Any] = schema.get("properties") or {}
        if len(properties) > MODAL_BLOCKS - 1:
            raise ValueError(
                f"a Slack modal holds at most {MODAL_BLOCKS - 1} fields; this form has {len(properties)}"
            )
        for name, prop in properties.items():
            if not name or len(name) > BLOCK_ID:
                raise ValueError(f"property {name!r}: a Slack field id is 1-{BLOCK_ID} characters")
            if len(_label(name, prop)) > LABEL:
                raise ValueError(f"property {name!r}: its title is longer than {LABEL} characters")
            enum = prop.get("enum")
            if enum is None:
                continue
            if len(enum) > MAX_MENU:
                raise ValueError(f"property {name!r}: a Slack menu holds at most {MAX_MENU} options")
            for value, text in zip(enum, _enum_labels(name, prop, None), strict=True):
                if len(str(value)) > OPTION_VALUE:
                    raise ValueError(
                        f"property {name!r}: option {value!r} is longer than {OPTION_VALUE} characters"
                    )
                if not text or len(text) > CONTROL_TEXT:
                    raise ValueError(
                        f"property {name!r}: option text {text!r} must be 1-{CONTROL_TEXT} characters"
                    )

    # -- forms ---------------------------------------------------------------------------------

    async def open_form(self, reply: InboundReply, delivery: ChannelDelivery) -> None:
        trigger = (reply.context or {}).get("trigger_id")
        if not isinstance(trigger, str) or not trigger:
            raise ChannelInputError(f"slack {self.name!r}: no trigger_id to open the form with")
        await self._call(
            "views.open", trigger_id=trigger, view=modal_view(delivery, reply.chat, reply.message)
        )

    # -- inbound -------------------------------------------------------------------------------

    def verify(self, request: InboundRequest) -> None:
        """Raise ``InboundRefused`` unless Slack signed this raw body within the last 5 minutes."""
        stamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not stamp.isdigit() or len(stamp) > 12:
            raise InboundRefused("missing or malformed X-Slack-Request-Timestamp")
        if not signature.startswith("v0="):
            raise InboundRefused("missing or malformed X-Slack-Signature")
        if abs(self.clock() - int(stamp)) > SIGNATURE_WINDOW:
            raise InboundRefused("stale X-Slack-Request-Timestamp")
        base = b"v0:" + stamp.encode() + b":" + request.body
        expected = "v0=" + hmac.new(self._signing_secret, base, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            raise InboundRefused("wrong X-Slack-Signature")

    async def inbound(self, request: InboundRequest) -> Inbound:
        self.verify(request)
        content_type = request.headers.get("content-type", "")
        if content_type.startswith("application/x-www-form-urlencoded"):
            payload = _form_payload(request.body) or {}
            kind = payload.get("type")
            if kind == "block_actions":
                return Inbound(replies=_actions(payload))
            if kind == "view_submission":
                return Inbound(replies=[_submission(payload)])
            return Inbound()
        try:
            envelope = json.loads(request.body)
        except ValueError:
            raise InboundMalformed("the body is neither JSON nor a form with payload") from None
        if not isinstance(envelope, dict):
            raise InboundMalformed("the body is not a JSON object")
        if envelope.get("type") == "url_verification":
            challenge = envelope.get("challenge")
            if not isinstance(challenge, str):
                raise InboundMalformed("url_verification without a challenge")
            return Inbound(response=InboundResponse(body=challenge.encode(), content_type="text/plain"))
        if envelope.get("type") == "event_callback":
            reply = _typed(envelope)
            return Inbound(replies=[reply] if reply else [])
        return Inbound()

    async def respond(self, reply: InboundReply, outcome: ReplyOutcome) -> InboundResponse | None:
        if reply.kind != "submitted" or outcome.status != "rejected":
            return None
        fields = [f for f in (reply.context or {}).get("fields", []) if isinstance(f, str)]
        reason = outcome.reason or "This answer was not accepted."
        if not fields:
            return None
        body = {"response_action": "errors", "errors": {field_named(reason, fields): _cut(reason, LABEL)}}
        return InboundResponse(body=msgspec.json.encode(body), content_type="application/json")

    async def follow_up(self, reply: InboundReply, outcome: ReplyOutcome) -> None:
        if outcome.status == "rejected" and outcome.notice and reply.kind != "submitted":
            text = outcome.notice  # a rejected form shows its reason in the modal instead
        elif outcome.status == "late":
            text = NO_LONGER_OPEN
        else:
            return
        params: dict[str, Any] = {"channel": reply.chat, "text": _escape(_cut(text, MESSAGE_TEXT))}
        if reply.message:
            params["thread_ts"] = reply.message
        try:
            await self._call("chat.postMessage", **params)
        except Exception as exc:  # noqa: BLE001 - a follow-up is best effort and must never fail the reply
            log.warning("slack follow-up not sent", channel=self.name, status=outcome.status, error=str(exc))


# -- rendering -----------------------------------------------------------------------------------


def _escape(text: str) -> str:
    """Slack's markup treats ``&``, ``<`` and ``>`` as control characters (mentions, links)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plain(text: str, limit: int = SECTION_TEXT) -> dict[str, Any]:
    return {"type": "plain_text", "text": _cut(text, limit) or " ", "emoji": True}


def _question_sections(question: str) -> list[dict[str, Any]]:
    # plain_text, never mrkdwn: a question must not be able to mention @channel or hide a link.
    text = question.strip() or "(no text)"
    chunks = [text[i : i + SECTION_TEXT] for i in range(0, len(text), SECTION_TEXT)]
    if len(chunks) > MAX_SECTIONS:
        chunks = chunks[:MAX_SECTIONS]
        chunks[-1] = _cut(chunks[-1], SECTION_TEXT)
    return [{"type": "section", "text": _plain(chunk)} for chunk in chunks]


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [_plain(text)]}


def _button(text: str, action_id: str, value: str, *, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": _plain(text, CONTROL_TEXT),
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def _fits(labels: list[str], most: int) -> bool:
    return 0 < len(labels) <= most and all(0 < len(label) <= CONTROL_TEXT for label in labels)


def _fallback_text(delivery: ChannelDelivery) -> str:
    if common.control_of(delivery) == "choice" and not _fits(delivery.options or [], MAX_MENU):
        return _escape(_cut(common.numbered_prompt(delivery), MESSAGE_TEXT))
    return _escape(_cut(delivery.question, MESSAGE_TEXT))


def message_blocks(delivery: ChannelDelivery) -> list[dict[str, Any]]:
    """The question as Block Kit: its text, its media, then the controls of its format."""
    iid = delivery.interaction_id
    options = delivery.options or []
    blocks: list[dict[str, Any]] = []
    control = common.control_of(delivery)
    numbered = control == "choice" and not _fits(options, MAX_MENU)
    blocks += _question_sections(common.numbered_prompt(delivery) if numbered else delivery.question)
    blocks += _media_blocks(delivery)
    if control == "yes_no":
        blocks.append(
            {
                "type": "actions",
                "block_id": f"layby:{iid}",
                "elements": [
                    _button("Yes", f"layby:yes:{iid}", iid, style="primary"),
                    _button("No", f"layby:no:{iid}", iid),
                ],
            }
        )
    elif control == "choice" and _fits(options, MAX_BUTTONS):
        blocks.append(_tap_buttons(iid, options))
    elif control == "choice" and not numbered:
        menu = {
            "type": "static_select",
            "action_id": f"layby:pick:{iid}",
            "placeholder": _plain("Choose an option", CONTROL_TEXT),
            "options": [
                {"text": _plain(option, CONTROL_TEXT), "value": common.tap_id(iid, n)}
                for n, option in enumerate(options)
            ],
        }
        blocks.append({"type": "actions", "block_id": f"layby:{iid}", "elements": [menu]})
    elif control == "fields":
        blocks.append(
            {
                "type": "actions",
                "block_id": f"layby:{iid}",
                "elements": [
                    _button("Open form", f"layby:open:{iid}", iid, style="primary"),
                ],
            }
        )
    elif control == "link":
        link = _button("Open", f"layby:link:{iid}", iid, style="primary")
        link["url"] = delivery.callback_url
        blocks.append({"type": "actions", "block_id": f"layby:{iid}", "elements": [link]})
    elif control == "free_text" and _fits(delivery.suggested_replies or [], MAX_ELEMENTS):
        blocks.append(_tap_buttons(iid, delivery.suggested_replies or []))
    if control == "free_text" or numbered:
        blocks.append(_context(ANSWER_IN_THREAD))
    return blocks


def _tap_buttons(iid: str, labels: list[str]) -> dict[str, Any]:
    elements = [
        _button(label, f"layby:tap:{common.tap_id(iid, n)}", common.tap_id(iid, n))
        for n, label in enumerate(labels)
    ]
    return {"type": "actions", "block_id": f"layby:{iid}", "elements": elements}


def _media_blocks(delivery: ChannelDelivery) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    links: list[str] = []
    for item in delivery.media or []:
        if item.kind == "image" and len(item.url) <= SECTION_TEXT:
            block: dict[str, Any] = {
                "type": "image",
                "image_url": item.url,
                "alt_text": _cut(item.caption or "image", LABEL),
            }
            if item.caption:
                block["title"] = _plain(item.caption, LABEL)
            blocks.append(block)
        else:
            name = item.caption or item.filename or item.kind
            url = item.url.replace("|", "%7C").replace(">", "%3E")
            links.append(f"<{_escape(url)}|{_escape(name)}>")
    if links:
        # A context block holds at most 10 elements.
        blocks += [
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _cut(line, SECTION_TEXT)}]}
            for line in links[:10]
        ]
    return blocks


def _label(name: str, prop: Mapping[str, Any]) -> str:
    title = prop.get("title")
    return title if isinstance(title, str) and title else name


def _enum_labels(name: str, prop: Mapping[str, Any], data: Mapping[str, Any] | None) -> list[str]:
    enum = [str(v) for v in prop.get("enum") or []]
    labels = (data or {}).get("options")
    given = labels.get(name) if isinstance(labels, dict) else None
    if isinstance(given, list) and len(given) == len(enum) and all(isinstance(g, str) for g in given):
        return list(given)
    if isinstance(given, dict):
        return [str(given.get(v, v)) for v in enum]
    return enum


def modal_view(
    delivery: ChannelDelivery, chat: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """The form as a modal: one input block per property, ``block_id`` = the property's name."""
    schema = delivery.schema or {}
    required = set(schema.get("required") or [])
    prefill = (delivery.data or {}).get("values") or {}
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _plain(delivery.question)}]
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        initial = prefill.get(name) if isinstance(prefill, dict) else None
        element: dict[str, Any] = {"action_id": "value"}
        optional = name not in required
        if kind == "boolean":
            # An unticked box is the answer "false", so the field can never be left unanswered.
            optional = True
            element |= {
                "type": "checkboxes",
                "options": [{"text": _plain("Yes", CONTROL_TEXT), "value": "true"}],
            }
            if initial is True:
                element["initial_options"] = element["options"]
        elif kind in ("integer", "number"):
            element |= {"type": "number_input", "is_decimal_allowed": kind == "number"}
            if isinstance(initial, int | float) and not isinstance(initial, bool):
                element["initial_value"] = str(initial)
        elif "enum" in prop:
            options = [
                {"text": _plain(text, CONTROL_TEXT), "value": str(value)}
                for value, text in zip(prop["enum"], _enum_labels(name, prop, delivery.data), strict=True)
            ]
            element |= {"type": "static_select", "options": options}
            chosen = [o for o in options if o["value"] == initial]
            if chosen:
                element["initial_option"] = chosen[0]
        else:
            element |= {"type": "plain_text_input", "multiline": (prop.get("maxLength") or 0) > 150}
            if isinstance(initial, str) and initial:
                element["initial_value"] = initial
        blocks.append(
            {
                "type": "input",
                "block_id": name,
                "label": _plain(_label(name, prop), LABEL),
                "optional": optional,
                "element": element,
            }
        )
    meta = {"interaction_id": delivery.interaction_id, "chat": chat, "message": message}
    return {
        "type": "modal",
        "callback_id": FORM_CALLBACK,
        "private_metadata": json.dumps(meta, separators=(",", ":")),
        "title": _plain(delivery.question.strip() or "Answer", MODAL_TITLE),
        "submit": _plain("Submit", MODAL_TITLE),
        "close": _plain("Cancel", MODAL_TITLE),
        "blocks": blocks,
    }


def field_named(reason: str, fields: list[str]) -> str:
    """The field a rejection's reason names (the longest that appears as a word), else the first."""
    named = [f for f in fields if re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", reason)]
    return max(named, key=len) if named else fields[0]


# -- inbound parsing -----------------------------------------------------------------------------


def _form_payload(body: bytes) -> dict[str, Any] | None:
    """The interactivity payload; None for a form without one (a slash command: not ours)."""
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=True)
        if "payload" not in fields:
            return None
        payload = json.loads(fields["payload"][0])
    except (UnicodeDecodeError, ValueError):
        raise InboundMalformed("an interactivity request must carry payload=<JSON>") from None
    if not isinstance(payload, dict):
        raise InboundMalformed("the interactivity payload is not a JSON object")
    return payload


def _obj(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InboundMalformed(f"{what} is missing")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InboundMalformed(f"{what} is missing")
    return value


def _tap(value: Any) -> tuple[str, int]:
    parsed = common.parse_tap_id(value) if isinstance(value, str) else None
    if parsed is None:
        raise InboundMalformed("the action's value is not a Layby option id")
    return parsed


def _actions(payload: dict[str, Any]) -> list[InboundReply]:
    user = _obj(payload.get("user"), "user")
    sender = _str(user.get("id"), "user.id")
    name = user.get("username") or user.get("name")
    chat = _str(_obj(payload.get("channel"), "channel").get("id"), "channel.id")
    message = (payload.get("container") or {}).get("message_ts")
    trigger = payload.get("trigger_id")
    context = {"trigger_id": trigger, "response_url": payload.get("response_url")}
    replies: list[InboundReply] = []
    actions = payload.get("actions")
    if not isinstance(actions, list):
        raise InboundMalformed("block_actions without actions")
    for action in actions:
        action_id = _str(_obj(action, "action").get("action_id"), "action.action_id")
        verb, _, rest = action_id.removeprefix("layby:").partition(":")
        if not action_id.startswith("layby:") or verb == "link":
            continue  # not ours, or a link button (its page takes the answer)
        base: dict[str, Any] = {
            "sender": sender,
            "chat": chat,
            "sender_name": name if isinstance(name, str) else None,
            "message": message if isinstance(message, str) else None,
            "event_id": trigger if isinstance(trigger, str) else None,
            "context": context,
        }
        if verb == "tap":
            iid, index = _tap(action.get("value"))
            replies.append(InboundReply(kind="tap", interaction_id=iid, index=index, **base))
        elif verb == "pick":
            iid, index = _tap(_obj(action.get("selected_option"), "selected_option").get("value"))
            replies.append(InboundReply(kind="tap", interaction_id=iid, index=index, **base))
        elif verb in ("yes", "no") and rest:
            replies.append(InboundReply(kind="yes_no", interaction_id=rest, value=verb == "yes", **base))
        elif verb == "open" and rest:
            replies.append(InboundReply(kind="open_form", interaction_id=rest, **base))
        else:
            raise InboundMalformed(f"unknown action {action_id[:80]!r}")
    return replies


def _submission(payload: dict[str, Any]) -> InboundReply:
    user = _obj(payload.get("user"), "user")
    view = _obj(payload.get("view"), "view")
    if view.get("callback_id") != FORM_CALLBACK:
        raise InboundMalformed("view_submission of a view Layby did not open")
    try:
        meta = json.loads(_str(view.get("private_metadata"), "view.private_metadata"))
        iid = _str(meta["interaction_id"], "interaction_id")
    except (ValueError, KeyError, TypeError):
        raise InboundMalformed("view.private_metadata is not Layby's") from None
    values = _obj(_obj(view.get("state"), "view.state").get("values"), "view.state.values")
    elements = {b.get("block_id"): b.get("element") for b in view.get("blocks") or [] if isinstance(b, dict)}
    answer: dict[str, Any] = {}
    for field, actions in values.items():
        state = _obj(_obj(actions, f"view.state.values.{field}").get("value"), f"{field}.value")
        element = elements.get(field)
        decimal = isinstance(element, dict) and element.get("is_decimal_allowed") is True
        value = _state_value(field, state, decimal=decimal)
        if value is not None:
            answer[field] = value
    trigger = payload.get("trigger_id")
    name = user.get("username") or user.get("name")
    chat = meta.get("chat")
    message = meta.get("message")
    return InboundReply(
        kind="submitted",
        sender=_str(user.get("id"), "user.id"),
        sender_name=name if isinstance(name, str) else None,
        chat=chat if isinstance(chat, str) else "",
        message=message if isinstance(message, str) else None,
        interaction_id=iid,
        value=answer,
        event_id=trigger if isinstance(trigger, str) else None,
        context={"trigger_id": trigger, "view_id": view.get("id"), "fields": list(values)},
    )


def _state_value(field: str, state: dict[str, Any], *, decimal: bool) -> Any:
    """One modal field's value, typed by the element Layby put there (blank → None)."""
    kind = state.get("type")
    if kind == "checkboxes":
        return bool(state.get("selected_options"))
    if kind == "static_select":
        option = state.get("selected_option")
        return option.get("value") if isinstance(option, dict) else None
    raw = state.get("value")
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise InboundMalformed(f"{field}: the value is not text")
    if kind == "number_input":
        try:
            return float(raw) if decimal else int(raw)
        except ValueError:
            return raw  # not a number of the field's kind: the question's schema refuses it, named
    return raw


def _typed(envelope: dict[str, Any]) -> InboundReply | None:
    event = envelope.get("event")
    if not isinstance(event, dict) or event.get("type") != "message":
        return None
    if event.get("subtype") or event.get("bot_id") or event.get("bot_profile"):
        return None  # edits, joins, deletions, bots (ourselves included)
    user, channel, text = event.get("user"), event.get("channel"), event.get("text")
    if not isinstance(user, str) or not isinstance(channel, str) or not isinstance(text, str):
        raise InboundMalformed("a message event needs user, channel and text")
    bots = {
        a.get("user_id")
        for a in envelope.get("authorizations") or []
        if isinstance(a, dict) and a.get("is_bot")
    }
    if user in bots:
        return None
    thread = event.get("thread_ts")
    threaded = isinstance(thread, str) and thread != event.get("ts")
    direct = event.get("channel_type") == "im" or channel.startswith("D")
    if not threaded and not direct:
        return None  # channel chatter outside a question's thread is not addressed to us
    event_id = envelope.get("event_id")
    return InboundReply(
        kind="typed",
        sender=user,
        chat=channel,
        message=thread if threaded else None,
        value=text,
        event_id=event_id if isinstance(event_id, str) else None,
        direct=direct,
    )


def _api_error(name: str, method: str, exc: SlackApiError) -> ChannelDeliveryError:
    response = exc.response
    status = getattr(response, "status_code", None) or getattr(response, "status", None) or 0
    data = getattr(response, "data", None)
    code = data.get("error") if isinstance(data, dict) else None
    headers = getattr(response, "headers", None) or {}
    what = f"slack {name!r}: {method} failed ({code or f'HTTP {status}'})"
    if status == 429 or code in RETRYABLE_ERRORS or (isinstance(status, int) and status >= 500):
        return ChannelDeliveryError(
            what, retryable=True, retry_after=_retry_after(headers.get("Retry-After"))
        )
    return ChannelInputError(what)


def _retry_after(value: Any) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None
