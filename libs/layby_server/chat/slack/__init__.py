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

A one-way notification (``notify``) is a message of the same kind: its text, its media, its
options as buttons whose tap comes back as an inbound message from the person, and an ask-less
form behind an *Open form* button (docs/channels.md#notifications-on-slack).

The Block Kit a question becomes is in ``blocks``, reading what Slack posts is in ``payloads``; this
module holds the channel itself: its settings, the Web API client and its errors.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import aiohttp
import msgspec
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from layby_contracts.channels import (
    ChannelDelivery,
    ChannelDeliveryError,
    ChannelInputError,
    ChannelNotification,
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
from layby_server.chat.slack.blocks import (
    ANSWER_IN_THREAD,
    BLOCK_ID,
    BUTTON_VALUE,
    CONTROL_TEXT,
    FORM_CALLBACK,
    LABEL,
    MAX_BUTTONS,
    MAX_ELEMENTS,
    MAX_MENU,
    MAX_SECTIONS,
    MESSAGE_TEXT,
    MODAL_BLOCKS,
    MODAL_TITLE,
    OPTION_VALUE,
    SECTION_TEXT,
    context_block,
    cut,
    enum_labels,
    escape,
    fallback_text,
    field_label,
    field_named,
    form_view,
    message_blocks,
    modal_view,
    notification_blocks,
    notification_text,
    pack_form,
    question_sections,
    unescape,
    unpack_form,
)
from layby_server.chat.slack.payloads import action_replies, form_payload, submission_reply, typed_reply
from layby_server.observability.logs import get_logger

__all__ = [
    "ANSWER_IN_THREAD",
    "API_URL",
    "BLOCK_ID",
    "CONTROL_TEXT",
    "FORM_CALLBACK",
    "LABEL",
    "MAX_BUTTONS",
    "MAX_ELEMENTS",
    "MAX_MENU",
    "MAX_SECTIONS",
    "MESSAGE_TEXT",
    "MODAL_BLOCKS",
    "MODAL_TITLE",
    "NO_LONGER_OPEN",
    "OPTIONS",
    "OPTION_VALUE",
    "RETRYABLE_ERRORS",
    "SECTION_TEXT",
    "SIGNATURE_WINDOW",
    "SlackChannel",
    "field_named",
    "message_blocks",
    "modal_view",
]

log = get_logger(__name__)

API_URL = "https://slack.com/api/"
OPTIONS = {"bot_token", "signing_secret", "api_url", "default_recipient", "timeout"}
SIGNATURE_WINDOW = 300  # seconds either side of now, as Slack's own verifier allows
NO_LONGER_OPEN = "This question is no longer open."
# Slack's error codes that another attempt may get past; every other code (channel_not_found,
# not_in_channel, invalid_blocks, msg_too_long, invalid_auth...) refuses this input for good.
RETRYABLE_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


class SlackChannel(common.ChatPlugin, plugin="slack", options=OPTIONS):
    """A Slack app's bot (docs/channels.md#slack)."""

    supports_form_delivery = True
    # A notification's media, options and ask-less form (docs/channels.md#notifications-on-slack);
    # no provider templates.
    supports_media_notifications = True
    supports_interactive_notifications = True
    supports_form_notifications = True

    def __init__(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        secrets: Mapping[str, bytes],
        clock: Callable[[], float] = time.time,
    ) -> None:
        # Slack signs a request with Unix seconds: this plugin's clock is a callable returning them.
        self.clock = clock
        super().__init__(name=name, config=config, secrets=secrets)

    def _configure(self, settings: common.PluginConfig) -> None:
        self._token = settings.secret("bot_token")
        self._signing_secret = settings.secret("signing_secret").encode()
        self.api_url = settings.base_url("api_url", API_URL)
        self.default_recipient: str | None = settings.optional_text(
            "default_recipient", str.strip, "must be a channel or user id"
        )
        self._timeout = settings.timeout()
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

    async def identity(self) -> str:
        """Who the bot token signs in as (``auth.test``): ``layby doctor``'s check of the token."""
        data = await self._call("auth.test")
        bot = data.get("user") or data.get("user_id") or "?"
        team = data.get("team") or data.get("team_id") or "?"
        return f"Slack accepts the bot token: bot {bot} in workspace {team}"

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
            text=fallback_text(delivery),
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

    async def notify(self, notification: ChannelNotification) -> list[str]:
        """One ``chat.postMessage`` of the notification; returns its ``ts``
        (docs/channels.md#notifications-on-slack)."""
        channel = notification.recipient or self.default_recipient
        if not channel:
            raise ChannelInputError(f"slack {self.name!r}: no recipient and no default_recipient configured")
        if notification.template is not None:
            raise ChannelInputError(f"slack {self.name!r}: template: Slack has no message templates")
        nid = notification.notification_id
        if not nid or len(f"layby:nform:{nid}") > BLOCK_ID:
            raise ChannelInputError(
                f"slack {self.name!r}: notification_id must be 1-{BLOCK_ID - 12} characters"
            )
        for n, option in enumerate(notification.options or []):
            if not option.strip() or len(option) > BUTTON_VALUE:
                raise ChannelInputError(
                    f"slack {self.name!r}: options[{n}] must be non-blank and at most "
                    f"{BUTTON_VALUE} characters"
                )
        form = None
        if notification.schema is not None:
            try:
                self.validate_form_schema(notification.schema, notification.message)
            except ValueError as exc:
                raise ChannelInputError(f"slack {self.name!r}: schema: {exc}") from None
            form = pack_form(notification.schema, notification.data)
            if len(form) > BUTTON_VALUE:
                raise ChannelInputError(
                    f"slack {self.name!r}: schema: the form (with data) is too large to carry on a Slack "
                    f"button ({len(form)} characters packed, at most {BUTTON_VALUE}); shorten it"
                )
        data = await self._call(
            "chat.postMessage",
            channel=channel,
            text=notification_text(notification),
            blocks=notification_blocks(notification, form),
            unfurl_links=False,
            unfurl_media=False,
        )
        ts = data.get("ts")
        if not isinstance(ts, str):
            raise ChannelDeliveryError(f"slack {self.name!r}: chat.postMessage answered without ts")
        return [ts]

    async def retract(self, posted: Posted, retraction: Retraction) -> None:
        # chat.update without blocks keeps the old ones (and their buttons): always send them.
        blocks = [*question_sections(retraction.question), context_block(common.retraction_line(retraction))]
        await self._call(
            "chat.update",
            channel=posted.chat,
            ts=posted.message,
            text=escape(cut(retraction.question, MESSAGE_TEXT)),
            blocks=blocks,
        )

    async def say(self, chat: str, text: str, thread: str | None = None) -> None:
        """Post a conversation's reply to ``chat`` as plain text, in ``thread`` (a ``ts``) when
        given; escaped, so a reply cannot mention ``@channel`` or hide a link (docs/doors/hooks.md)."""
        params: dict[str, Any] = {"channel": chat, "text": escape(cut(text, MESSAGE_TEXT))}
        if thread:
            params["thread_ts"] = thread
        await self._call("chat.postMessage", **params, unfurl_links=False, unfurl_media=False)

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
            if len(field_label(name, prop)) > LABEL:
                raise ValueError(f"property {name!r}: its title is longer than {LABEL} characters")
            enum = prop.get("enum")
            if enum is None:
                continue
            if len(enum) > MAX_MENU:
                raise ValueError(f"property {name!r}: a Slack menu holds at most {MAX_MENU} options")
            for value, text in zip(enum, enum_labels(name, prop, None), strict=True):
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

    async def _open_notification_form(self, reply: InboundReply) -> None:
        """Open the modal of a notification's form (its *Open form* button carries the form).
        Best effort, like a tap's follow-up: Slack allows three seconds, and a person whose
        modal did not open may tap again."""
        context = reply.context or {}
        trigger = context.get("trigger_id")
        form = unpack_form(str(context.get("form") or ""))
        if not isinstance(trigger, str) or not trigger or form is None:
            log.warning("slack notification form not opened", channel=self.name, reason="no trigger or form")
            return
        schema, data = form
        meta = {"notification_id": reply.notification_id, "chat": reply.chat, "message": reply.message}
        question = unescape(str(context.get("text") or "")) or "Form"
        try:
            await self._call("views.open", trigger_id=trigger, view=form_view(question, schema, data, meta))
        except ChannelDeliveryError as exc:
            log.warning("slack notification form not opened", channel=self.name, error=str(exc))

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
            payload = form_payload(request.body) or {}
            kind = payload.get("type")
            if kind == "block_actions":
                replies = []
                for action in action_replies(payload):
                    if action.kind == "open_form" and action.notification_id is not None:
                        await self._open_notification_form(action)  # no question: nothing to record
                    else:
                        replies.append(action)
                return Inbound(replies=replies)
            if kind == "view_submission":
                return Inbound(replies=[submission_reply(payload)])
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
            reply = typed_reply(envelope)
            return Inbound(replies=[reply] if reply else [])
        return Inbound()

    async def respond(self, reply: InboundReply, outcome: ReplyOutcome) -> InboundResponse | None:
        if reply.kind != "submitted" or outcome.status != "rejected":
            return None
        fields = [f for f in (reply.context or {}).get("fields", []) if isinstance(f, str)]
        reason = outcome.reason or "This answer was not accepted."
        if not fields:
            return None
        body = {"response_action": "errors", "errors": {field_named(reason, fields): cut(reason, LABEL)}}
        return InboundResponse(body=msgspec.json.encode(body), content_type="application/json")

    async def follow_up(self, reply: InboundReply, outcome: ReplyOutcome) -> None:
        if outcome.status == "rejected" and outcome.notice and reply.kind != "submitted":
            text = outcome.notice  # a rejected form shows its reason in the modal instead
        elif outcome.status == "late":
            text = NO_LONGER_OPEN
        else:
            return
        params: dict[str, Any] = {"channel": reply.chat, "text": escape(cut(text, MESSAGE_TEXT))}
        if reply.message:
            params["thread_ts"] = reply.message
        try:
            await self._call("chat.postMessage", **params)
        except Exception as exc:  # noqa: BLE001 - a follow-up is best effort and must never fail the reply
            log.warning("slack follow-up not sent", channel=self.name, status=outcome.status, error=str(exc))


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
