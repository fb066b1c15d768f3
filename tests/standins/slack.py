"""A Slack stand-in (docs/channels.md#slack): a small Litestar app on 127.0.0.1 with three faces.

- **Provider face** ``POST /api/<method>``: answers the official ``slack_sdk`` client as Slack
  does (``{"ok": true, ...}`` / ``{"ok": false, "error": ...}``, a scripted 429 with
  ``Retry-After``) and checks every call: the bot token, a known method, its required
  parameters, Block Kit through ``slack_sdk.models`` plus the checks those models miss (option
  and button text ≤ 75, a button's value ≤ 2,000, no empty text, no empty actions, ≤ 50
  blocks, modal title ≤ 24, no element type the models do not know), ``views.open`` only with a
  fresh, unused trigger id, ``chat.update`` only for a message it issued.
- **Person face**: ``build_*`` make the exact request Slack would send for what a person does
  on a posted message (a tap, a menu pick, a form submission, a threaded message), signed ``v0``
  with the signing secret at the stand-in's clock; the async methods of the same names without
  ``build_`` POST it to ``target`` and return the response.
- **Inspection face**: ``messages(channel)``, ``message(channel, ts)`` (current text and blocks,
  thread replies) and ``views``.

Use the ``slack_standin`` fixture (import it into a test module or conftest), or
``serve_slack_standin()`` as an async context manager.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
import pytest
from litestar import Litestar, Request, Response, post
from litestar.params import FromPath
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from slack_sdk.signature import SignatureVerifier

from layby_contracts.channels import InboundRequest
from tests.standins.serving import serve_standin

BOT_TOKEN = "xoxb-1111-2222-standin"
SIGNING_SECRET = "standin-signing-secret-0123456789abcdef"
TEAM = "T0STANDIN"
APP = "A0LAYBY"
BOT_USER = "U0LAYBYBOT"
BOT_ID = "B0LAYBYBOT"
PERSON = "U0ALICE01"
PERSON_NAME = "alice"
CHANNEL = "C0DEPLOYS"
TRIGGER_LIFETIME = 3.0
MAX_MESSAGE_BLOCKS = 50
MAX_MODAL_BLOCKS = 100
CONTROL_TEXT = 75
BUTTON_VALUE = 2000
MODAL_TITLE = 24
ELEMENT_TYPES = {
    "button", "static_select", "image", "plain_text_input", "checkboxes", "number_input",
    "plain_text", "mrkdwn", "overflow", "datepicker", "radio_buttons",
}  # fmt: skip
REQUIRED = {
    "auth.test": (),
    "chat.postMessage": ("channel",),
    "chat.update": ("channel", "ts"),
    "chat.delete": ("channel", "ts"),
    "views.open": ("trigger_id", "view"),
}


class StandinClock:
    """The stand-in's wall clock in epoch seconds; tests move it instead of sleeping."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Message:
    """A message as the person sees it now (edits applied); ``replies`` is its thread."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    user: str
    bot: bool
    thread_ts: str | None = None
    edited: bool = False
    replies: list[Message] = field(default_factory=list)

    def buttons(self) -> list[dict[str, Any]]:
        return [
            element
            for block in self.blocks
            if block.get("type") == "actions"
            for element in block.get("elements", [])
            if element.get("type") == "button"
        ]

    def menus(self) -> list[dict[str, Any]]:
        found = [e for b in self.blocks if b.get("type") == "actions" for e in b.get("elements", [])]
        found += [b["accessory"] for b in self.blocks if isinstance(b.get("accessory"), dict)]
        return [e for e in found if e.get("type") == "static_select"]

    def has_controls(self) -> bool:
        return any(b.get("type") == "actions" or "accessory" in b for b in self.blocks)

    def lines(self) -> list[str]:
        """Every text the blocks show, in order (sections, context lines, buttons excluded)."""
        out: list[str] = []
        for block in self.blocks:
            if isinstance(block.get("text"), dict):
                out.append(block["text"]["text"])
            if block.get("type") == "context":
                out += [e["text"] for e in block["elements"] if "text" in e]
        return out


@dataclass
class OpenedView:
    id: str
    user: str
    view: dict[str, Any]
    trigger_id: str
    closed: bool = False
    errors: dict[str, str] | None = None


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    error: str | None = None


@dataclass(frozen=True)
class SignedRequest:
    """A request as Slack would send it to the app's Request URL."""

    body: bytes
    headers: dict[str, str]
    view_id: str | None = None

    def inbound(self, url: str = "http://layby.test/api/channels/slack/events") -> InboundRequest:
        """The same request as the door hands it to the plugin (lower-case header names)."""
        headers = {k.lower(): v for k, v in self.headers.items()}
        return InboundRequest(method="POST", url=url, headers=headers, query={}, body=self.body)


class SlackApiRefusal(Exception):
    def __init__(self, error: str, status: int = 200, retry_after: float | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.retry_after = retry_after


class SlackStandin:
    def __init__(
        self,
        *,
        token: str = BOT_TOKEN,
        signing_secret: str = SIGNING_SECRET,
        clock: StandinClock | None = None,
        target: str | None = None,
    ) -> None:
        self.token = token
        self.signing_secret = signing_secret
        self.clock = clock or StandinClock()
        self.target = target
        """Where the person face POSTs (the door's ``/api/channels/<name>/events``)."""
        self.url = ""
        self.channels: set[str] = {CHANNEL}
        self.users: dict[str, str] = {PERSON: PERSON_NAME}
        self.calls: list[Call] = []
        self.views: list[OpenedView] = []
        self._messages: dict[str, list[Message]] = {}
        self._by_ts: dict[tuple[str, str], Message] = {}
        self._triggers: dict[str, tuple[float, str, bool]] = {}  # id -> (issued at, user, used)
        self._failures: dict[str, list[SlackApiRefusal]] = {}
        self._seq = itertools.count(1)
        self.app = self._build_app()

    # -- setup ---------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/"

    def add_channel(self, channel: str) -> None:
        self.channels.add(channel)

    def fail_next(
        self, method: str, error: str, *, status: int = 200, retry_after: float | None = None
    ) -> None:
        """The next call of ``method`` fails with ``error`` (HTTP ``status``, ``Retry-After``)."""
        self._failures.setdefault(method, []).append(SlackApiRefusal(error, status, retry_after))

    # -- inspection face -----------------------------------------------------------------------

    def messages(self, channel: str = CHANNEL) -> list[Message]:
        return list(self._messages.get(channel, []))

    def message(self, channel: str, ts: str) -> Message:
        return self._by_ts[(channel, ts)]

    def last_message(self, channel: str = CHANNEL) -> Message:
        return self._messages[channel][-1]

    def view(self, view_id: str | None = None) -> OpenedView:
        if view_id is None:
            return self.views[-1]
        return next(v for v in self.views if v.id == view_id)

    def errors(self) -> list[Call]:
        return [c for c in self.calls if c.error]

    # -- provider face -------------------------------------------------------------------------

    def _build_app(self) -> Litestar:
        standin = self

        @post("/api/{method:str}", status_code=200)
        async def api(request: Request[Any, Any, Any], method: FromPath[str]) -> Response[bytes]:
            body = await request.body()
            try:
                params = _params(request.headers.get("content-type", ""), body)
                result = standin._handle(method, request.headers.get("authorization", ""), params)
            except SlackApiRefusal as refusal:
                standin.calls.append(Call(method, {}, refusal.error))
                headers = {"Retry-After": str(int(refusal.retry_after))} if refusal.retry_after else {}
                content = json.dumps({"ok": False, "error": refusal.error}).encode()
                return Response(
                    content, status_code=refusal.status, media_type="application/json", headers=headers
                )
            return Response(json.dumps({"ok": True, **result}).encode(), media_type="application/json")

        return Litestar(route_handlers=[api], debug=False)

    def _handle(self, method: str, auth: str, params: dict[str, Any]) -> dict[str, Any]:
        if not auth.startswith("Bearer "):
            raise SlackApiRefusal("not_authed")
        if auth.removeprefix("Bearer ") != self.token or not self.token.startswith("xoxb-"):
            raise SlackApiRefusal("invalid_auth")
        if method not in REQUIRED:
            raise SlackApiRefusal("unknown_method")
        missing = [p for p in REQUIRED[method] if params.get(p) in (None, "")]
        if missing:
            raise SlackApiRefusal(
                f"missing_argument:{missing[0]}" if method != "views.open" else "invalid_arguments"
            )
        queued = self._failures.get(method)
        if queued:
            raise queued.pop(0)
        self.calls.append(Call(method, params))
        if method == "auth.test":
            return {"user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM}
        if method == "chat.postMessage":
            return self._post(params)
        if method == "chat.update":
            return self._update(params)
        if method == "chat.delete":
            msg = self._find(params)
            self._messages[msg.channel].remove(msg)
            return {"channel": msg.channel, "ts": msg.ts}
        return self._open_view(params)

    def _channel(self, name: str) -> str:
        if name in self.channels:
            return name
        if name in self.users:  # a user id: the app's direct message with that person
            dm = "D" + name[1:]
            self.channels.add(dm)
            return dm
        raise SlackApiRefusal("channel_not_found")

    def _post(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(str(params["channel"]))
        text = params.get("text") or ""
        blocks = _json_param(params.get("blocks"))
        if not text and not blocks:
            raise SlackApiRefusal("no_text")
        if len(text) > 40_000:
            raise SlackApiRefusal("msg_too_long")
        if blocks:
            _check_blocks(blocks, MAX_MESSAGE_BLOCKS)
        msg = Message(channel, self._ts(), text, blocks or [], BOT_USER, bot=True)
        thread = params.get("thread_ts")
        if thread:
            root = self._by_ts.get((channel, str(thread)))
            if root is None:
                raise SlackApiRefusal("thread_not_found")
            msg.thread_ts = root.ts
            root.replies.append(msg)
        else:
            self._messages.setdefault(channel, []).append(msg)
        self._by_ts[(channel, msg.ts)] = msg
        return {"channel": channel, "ts": msg.ts, "message": _message_json(msg)}

    def _find(self, params: dict[str, Any]) -> Message:
        channel = str(params["channel"])
        if channel not in self.channels:
            raise SlackApiRefusal("channel_not_found")
        msg = self._by_ts.get((channel, str(params["ts"])))
        if msg is None:
            raise SlackApiRefusal("message_not_found")
        if not msg.bot:
            raise SlackApiRefusal("cant_update_message")
        return msg

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        msg = self._find(params)
        blocks = _json_param(params.get("blocks"))
        if blocks is not None:  # without blocks, Slack keeps the old ones (buttons included)
            _check_blocks(blocks, MAX_MESSAGE_BLOCKS)
            msg.blocks = blocks
        if "text" in params:
            msg.text = params["text"] or ""
        msg.edited = True
        return {"channel": msg.channel, "ts": msg.ts, "text": msg.text}

    def _open_view(self, params: dict[str, Any]) -> dict[str, Any]:
        trigger = str(params["trigger_id"])
        issued = self._triggers.get(trigger)
        if issued is None:
            raise SlackApiRefusal("invalid_trigger_id")
        at, user, used = issued
        if used:
            raise SlackApiRefusal("exchanged_trigger_id")
        if self.clock() - at >= TRIGGER_LIFETIME:
            raise SlackApiRefusal("expired_trigger_id")
        view = _json_param(params["view"])
        if not isinstance(view, dict):
            raise SlackApiRefusal("invalid_arguments")
        _check_view(view)
        self._triggers[trigger] = (at, user, True)
        opened = OpenedView(id=f"V{next(self._seq):08d}", user=user, view=view, trigger_id=trigger)
        self.views.append(opened)
        return {"view": {**view, "id": opened.id, "team_id": TEAM, "state": {"values": {}}}}

    def _ts(self) -> str:
        return f"{int(self.clock())}.{next(self._seq):06d}"

    # -- person face ---------------------------------------------------------------------------

    def sign(self, body: bytes, content_type: str, *, view_id: str | None = None) -> SignedRequest:
        stamp = str(int(self.clock()))
        verifier = SignatureVerifier(self.signing_secret)
        signature = verifier.generate_signature(timestamp=stamp, body=body)
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": signature or "",
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        }
        return SignedRequest(body=body, headers=headers, view_id=view_id)

    def _interaction(self, payload: dict[str, Any], view_id: str | None = None) -> SignedRequest:
        body = urlencode({"payload": json.dumps(payload, separators=(",", ":"))}).encode()
        return self.sign(body, "application/x-www-form-urlencoded", view_id=view_id)

    def _event(self, event: dict[str, Any]) -> SignedRequest:
        envelope = {
            "token": "verification-token-unused",
            "team_id": TEAM,
            "api_app_id": APP,
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{next(self._seq):010d}",
            "event_time": int(self.clock()),
            "authorizations": [{"enterprise_id": None, "team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        return self.sign(json.dumps(envelope).encode(), "application/json")

    def _user(self, user: str) -> dict[str, Any]:
        return {
            "id": user,
            "username": self.users.get(user, user),
            "name": self.users.get(user, user),
            "team_id": TEAM,
        }

    def _trigger(self, user: str) -> str:
        trigger = f"{next(self._seq)}.{int(self.clock())}.standin{next(self._seq):06x}"
        self._triggers[trigger] = (self.clock(), user, False)
        return trigger

    def _actions_payload(self, msg: Message, action: dict[str, Any], user: str) -> dict[str, Any]:
        return {
            "type": "block_actions",
            "user": self._user(user),
            "api_app_id": APP,
            "token": "verification-token-unused",
            "container": {
                "type": "message",
                "message_ts": msg.ts,
                "channel_id": msg.channel,
                "is_ephemeral": False,
            },
            "trigger_id": self._trigger(user),
            "team": {"id": TEAM, "domain": "standin"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": msg.channel, "name": msg.channel.lower()},
            "message": _message_json(msg),
            "state": {"values": {}},
            "response_url": f"{self.url}/actions/{msg.channel}/{msg.ts}",
            "actions": [action],
        }

    def build_url_verification(
        self, challenge: str = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    ) -> SignedRequest:
        body = json.dumps({"token": "unused", "challenge": challenge, "type": "url_verification"})
        return self.sign(body.encode(), "application/json")

    def build_tap(self, channel: str, ts: str, label: str, *, user: str = PERSON) -> SignedRequest:
        """A tap on the button showing ``label`` of message ``ts``."""
        msg = self.message(channel, ts)
        for block in msg.blocks:
            for element in block.get("elements", []) if block.get("type") == "actions" else []:
                if element.get("type") == "button" and element["text"]["text"] == label:
                    action = {
                        "action_id": element["action_id"],
                        "block_id": block.get("block_id", ""),
                        "text": element["text"],
                        "type": "button",
                        "action_ts": f"{self.clock():.6f}",
                    }
                    if "value" in element:
                        action["value"] = element["value"]
                    return self._interaction(self._actions_payload(msg, action, user))
        raise AssertionError(
            f"no button {label!r} on message {ts}: {[b['text']['text'] for b in msg.buttons()]}"
        )

    def build_pick(self, channel: str, ts: str, label: str, *, user: str = PERSON) -> SignedRequest:
        """A choice of the menu option showing ``label`` on message ``ts``."""
        msg = self.message(channel, ts)
        for block in msg.blocks:
            elements = list(block.get("elements", [])) + (
                [block["accessory"]] if "accessory" in block else []
            )
            for element in elements:
                if element.get("type") != "static_select":
                    continue
                for option in element.get("options", []):
                    if option["text"]["text"] == label:
                        action = {
                            "type": "static_select",
                            "action_id": element["action_id"],
                            "block_id": block.get("block_id", ""),
                            "selected_option": option,
                            "placeholder": element.get("placeholder"),
                            "action_ts": f"{self.clock():.6f}",
                        }
                        return self._interaction(self._actions_payload(msg, action, user))
        raise AssertionError(f"no menu option {label!r} on message {ts}")

    def build_submit(self, values: dict[str, Any], *, view_id: str | None = None) -> SignedRequest:
        """Submit an open modal with ``values`` by block id (a menu takes its option's value or
        text, a checkbox a bool, a number input a number or its text); fields left out are blank."""
        opened = self.view(view_id)
        if opened.closed:
            raise AssertionError(f"view {opened.id} is closed")
        state: dict[str, dict[str, Any]] = {}
        for block in opened.view.get("blocks", []):
            if block.get("type") != "input":
                continue
            element = block["element"]
            given = values.get(block["block_id"])
            entry: dict[str, Any] = {"type": element["type"]}
            if element["type"] == "checkboxes":
                entry["selected_options"] = element["options"][:1] if given else []
            elif element["type"] == "static_select":
                chosen = [o for o in element["options"] if given in (o["value"], o["text"]["text"])]
                entry["selected_option"] = chosen[0] if chosen else None
            else:
                entry["value"] = None if given is None else str(given)
            state[block["block_id"]] = {element["action_id"]: entry}
        view = {
            **opened.view,
            "id": opened.id,
            "team_id": TEAM,
            "state": {"values": state},
            "hash": f"{int(self.clock())}.standin",
            "app_id": APP,
            "bot_id": BOT_ID,
        }
        payload = {
            "type": "view_submission",
            "team": {"id": TEAM, "domain": "standin"},
            "user": self._user(opened.user),
            "api_app_id": APP,
            "token": "verification-token-unused",
            "trigger_id": self._trigger(opened.user),
            "view": view,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        return self._interaction(payload, view_id=opened.id)

    def build_message(
        self, channel: str, text: str, *, thread_ts: str | None = None, user: str = PERSON
    ) -> SignedRequest:
        """The person types ``text`` (in the thread of ``thread_ts``); the stand-in shows it too."""
        msg = Message(channel, self._ts(), text, [], user, bot=False, thread_ts=thread_ts)
        if thread_ts:
            self.message(channel, thread_ts).replies.append(msg)
        else:
            self._messages.setdefault(channel, []).append(msg)
        self._by_ts[(channel, msg.ts)] = msg
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": msg.ts,
            "event_ts": msg.ts,
            "channel_type": "im" if channel.startswith("D") else "channel",
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return self._event(event)

    async def send(self, signed: SignedRequest, target: str | None = None) -> httpx.Response:
        """POST a signed request to ``target`` (default ``self.target``); a modal answered with
        anything but ``response_action: errors`` closes."""
        url = target or self.target
        if not url:
            raise AssertionError("the stand-in has no target: set standin.target to the door's events URL")
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(url, content=signed.body, headers=signed.headers)
        if signed.view_id is not None:
            opened = self.view(signed.view_id)
            try:
                answer = response.json() if response.content else {}
            except ValueError:
                answer = {}
            if response.status_code == 200 and answer.get("response_action") == "errors":
                opened.errors = answer.get("errors")
            elif response.status_code == 200:
                opened.closed = True
        return response

    async def verify_url(
        self, challenge: str = "challenge-0123456789", target: str | None = None
    ) -> httpx.Response:
        return await self.send(self.build_url_verification(challenge), target)

    async def tap(
        self, channel: str, ts: str, label: str, *, user: str = PERSON, target: str | None = None
    ) -> httpx.Response:
        return await self.send(self.build_tap(channel, ts, label, user=user), target)

    async def pick(
        self, channel: str, ts: str, label: str, *, user: str = PERSON, target: str | None = None
    ) -> httpx.Response:
        return await self.send(self.build_pick(channel, ts, label, user=user), target)

    async def submit(
        self, values: dict[str, Any], *, view_id: str | None = None, target: str | None = None
    ) -> httpx.Response:
        return await self.send(self.build_submit(values, view_id=view_id), target)

    async def type_message(
        self,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        user: str = PERSON,
        target: str | None = None,
    ) -> httpx.Response:
        return await self.send(self.build_message(channel, text, thread_ts=thread_ts, user=user), target)


# -- validation ---------------------------------------------------------------------------------


def _params(content_type: str, body: bytes) -> dict[str, Any]:
    if content_type.startswith("application/json"):
        try:
            value = json.loads(body or b"{}")
        except ValueError:
            raise SlackApiRefusal("invalid_json") from None
        if not isinstance(value, dict):
            raise SlackApiRefusal("invalid_json")
        return value
    return {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}


def _json_param(value: Any) -> Any:
    """Block and view parameters arrive as JSON values, or as JSON strings in a form body."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise SlackApiRefusal("invalid_blocks_format") from None
    return value


def _check_blocks(blocks: Any, most: int) -> None:
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise SlackApiRefusal("invalid_blocks_format")
    if not blocks or len(blocks) > most:
        raise SlackApiRefusal("invalid_blocks")
    try:
        parsed = Block.parse_all(blocks)
        if any(block is None for block in parsed):
            raise SlackApiRefusal("invalid_blocks")
        for block in parsed:
            block.to_dict()
    except (SlackObjectFormationError, KeyError, TypeError, ValueError):
        raise SlackApiRefusal("invalid_blocks") from None
    for block in blocks:
        _walk(block)


def _walk(node: Any) -> None:
    """What ``slack_sdk.models`` lets through: unknown elements, empty text, empty actions,
    option and button text over 75 characters."""
    if isinstance(node, list):
        for item in node:
            _walk(item)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind in ("plain_text", "mrkdwn") and not str(node.get("text", "")).strip():
        raise SlackApiRefusal("invalid_blocks")
    if kind == "actions" and not node.get("elements"):
        raise SlackApiRefusal("invalid_blocks")
    for element in node.get("elements", []) if kind in ("actions", "context") else []:
        if not isinstance(element, dict) or element.get("type") not in ELEMENT_TYPES:
            raise SlackApiRefusal("invalid_blocks")
    element = node.get("element") or node.get("accessory")
    if isinstance(element, dict) and element.get("type") not in ELEMENT_TYPES:
        raise SlackApiRefusal("invalid_blocks")
    if kind == "button" and len(node["text"].get("text", "")) > CONTROL_TEXT:
        raise SlackApiRefusal("invalid_blocks")
    if kind == "button" and len(str(node.get("value", ""))) > BUTTON_VALUE:
        raise SlackApiRefusal("invalid_blocks")
    for option in node.get("options", []) if isinstance(node.get("options"), list) else []:
        if not isinstance(option, dict) or len(option.get("text", {}).get("text", "")) > CONTROL_TEXT:
            raise SlackApiRefusal("invalid_blocks")
    for value in node.values():
        _walk(value)


def _check_view(view: dict[str, Any]) -> None:
    title = view.get("title")
    if view.get("type") != "modal" or not isinstance(title, dict) or len(title.get("text", "")) > MODAL_TITLE:
        raise SlackApiRefusal("invalid_arguments")
    try:
        View(**view).validate_json()
    except (SlackObjectFormationError, TypeError, ValueError):
        raise SlackApiRefusal("invalid_arguments") from None
    blocks = view.get("blocks") or []
    if not blocks:
        raise SlackApiRefusal("invalid_arguments")
    _check_blocks(blocks, MAX_MODAL_BLOCKS)
    if len(json.dumps(view)) > 250_000:
        raise SlackApiRefusal("view_too_large")


def _message_json(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "message", "ts": msg.ts, "text": msg.text, "user": msg.user, "team": TEAM}
    if msg.blocks:
        out["blocks"] = msg.blocks
    if msg.bot:
        out["bot_id"] = BOT_ID
        out["app_id"] = APP
    if msg.thread_ts:
        out["thread_ts"] = msg.thread_ts
    return out


# -- serving -------------------------------------------------------------------------------------


def serve_slack_standin(**options: Any) -> contextlib.AbstractAsyncContextManager[SlackStandin]:
    """A stand-in listening on 127.0.0.1 (a free port) in this event loop."""
    return serve_standin(SlackStandin(**options), lambda standin: standin.app, "the Slack stand-in")


@pytest.fixture
async def slack_standin() -> AsyncIterator[SlackStandin]:
    """A running Slack stand-in; set ``slack_standin.target`` to the door's events URL."""
    async with serve_slack_standin() as standin:
        yield standin
