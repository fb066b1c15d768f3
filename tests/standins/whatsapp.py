"""A WhatsApp Cloud API stand-in: a small Litestar app on 127.0.0.1 that the ``whatsapp``
plugin's own httpx client (pointed at it with ``api_url``) talks to, and a person who taps,
types, picks and submits Flows.

Three faces:

- **provider**: ``POST /<version>/<phone_number_id>/messages`` with a bearer token, answered like
  Graph (``{"messaging_product", "contacts", "messages": [{"id": wamid}]}`` or the error envelope
  ``{"error": {"message", "type", "code", "error_data", "fbtrace_id"}}``). Every request is
  checked against the documented shapes: the common fields, each message type's fields with
  unknown ones refused, text 1-4096, interactive body 1-1024, 1-3 reply buttons with unique
  titles of at most 20 and ids of at most 256, lists of at most 10 rows in all with unique
  titles of at most 24 and ids of at most 200, captions at most 1024, link buttons, Flows naming a
  registered Flow, templates only when approved (error 132001 otherwise), a reply's
  ``context.message_id`` only of a message it issued, and free-form messages only inside the
  24-hour window after the person last wrote (error 131047). ``fail_next`` scripts a failure.
- **person**: ``tap`` a reply button, ``pick`` a list row, ``type`` (optionally replying to a
  message), ``submit`` a Flow, ``press_template_button``; the notification Meta would build is
  serialised with ASCII escapes, signed ``X-Hub-Signature-256`` with the app secret exactly as Meta
  does, and POSTed to the webhook target. ``status`` posts a delivery status callback;
  ``handshake`` runs the ``hub.challenge`` subscription check.
- **inspection**: ``messages(wa_id)`` is what the person sees, oldest first;
  ``GET /_test/messages?to=<wa_id>`` serves the same as JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from litestar import Litestar, Request, Response, get, post

from tests.standins.serving import Failure, messages_route, serve_standin

TOKEN = "EAAG-standin-access-token"
APP_SECRET = "standin-app-secret"
VERIFY_TOKEN = "standin-verify-token"
PHONE_NUMBER_ID = "106540352242922"
DISPLAY_NUMBER = "15550783881"
WABA_ID = "102290129340398"
FLOW_ID = "1234567890123456"
_VERSION = re.compile(r"v[0-9]{1,3}\.[0-9]{1,3}")
_TYPES = {"text", "interactive", "image", "document", "video", "audio", "template"}
_COMMON = {"messaging_product", "recipient_type", "to", "type", "context", "biz_opaque_callback_data"}
_MEDIA_FIELDS = {
    "image": {"id", "link", "caption"},
    "document": {"id", "link", "caption", "filename"},
    "video": {"id", "link", "caption"},
    "audio": {"id", "link"},
}


class GraphError(Exception):
    def __init__(self, code: int, message: str, *, details: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.details, self.status = code, message, details, status

    def envelope(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "message": self.message,
            "type": "OAuthException",
            "code": self.code,
            "fbtrace_id": "AbCdEfGhIjKlMnOp",
        }
        if self.details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": self.details}
        return {"error": error}


def invalid(details: str) -> GraphError:
    return GraphError(100, "(#100) Invalid parameter", details=details)


@dataclass
class Call:
    """One request the plugin made: its body and how it was answered."""

    body: dict[str, Any]
    ok: bool = True
    code: int | None = None
    details: str | None = None


@dataclass
class Stored:
    """A message in a person's chat: ``from_business`` or the person's, its type and content."""

    wamid: str
    wa_id: str
    from_business: bool
    type: str
    body: dict[str, Any]
    reply_to: str | None = None

    @property
    def text(self) -> str | None:
        if self.type == "text":
            return str(self.body["text"]["body"])
        if self.type == "interactive":
            return str(self.body["interactive"]["body"]["text"])
        return None

    @property
    def interactive(self) -> str | None:
        return str(self.body["interactive"]["type"]) if self.type == "interactive" else None

    def buttons(self) -> list[dict[str, str]]:
        if self.interactive != "button":
            return []
        return [b["reply"] for b in self.body["interactive"]["action"]["buttons"]]

    def rows(self) -> list[dict[str, str]]:
        if self.interactive != "list":
            return []
        return [r for s in self.body["interactive"]["action"]["sections"] for r in s["rows"]]

    def flow(self) -> dict[str, Any]:
        assert self.interactive == "flow", f"message {self.wamid} is not a Flow"
        return dict(self.body["interactive"]["action"]["parameters"])


@dataclass
class Template:
    name: str
    language: str
    placeholders: int


@dataclass
class WhatsAppStandin:
    """The stand-in's state and its person and inspection faces (see the module docstring)."""

    token: str = TOKEN
    app_secret: str = APP_SECRET
    phone_number_id: str = PHONE_NUMBER_ID
    url: str = ""
    target: str | None = None
    """Layby's webhook (``/api/channels/<name>/events``)."""
    calls: list[Call] = field(default_factory=list)
    flows: set[str] = field(default_factory=lambda: {FLOW_ID})
    templates: dict[tuple[str, str], Template] = field(default_factory=dict)
    people: dict[str, str] = field(default_factory=dict)
    """wa_id -> profile name."""
    window: set[str] = field(default_factory=set)
    """People who wrote within 24 hours: free-form messages reach only them."""
    _messages: dict[str, Stored] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _failures: list[Failure] = field(default_factory=list)

    # -- set-up -------------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return self.url

    def add_person(self, wa_id: str, name: str = "Ada", *, in_window: bool = True) -> str:
        self.people[wa_id] = name
        if in_window:
            self.window.add(wa_id)
        return wa_id

    def approve_template(self, name: str, language: str = "en_US", placeholders: int = 0) -> None:
        self.templates[name, language] = Template(name, language, placeholders)

    def fail_next(
        self, code: int = 130429, *, status: int = 400, message: str | None = None, times: int = 1
    ) -> None:
        """The next ``times`` sends fail with Graph error ``code`` (130429: the throughput
        limit, answered with HTTP 400 as Meta does)."""
        text = message or {130429: "(#130429) Rate limit hit", 131000: "Something went wrong"}.get(
            code, "Error"
        )
        self._failures.append(Failure(code, status, text, times))

    # -- inspection ---------------------------------------------------------------------------

    def messages(self, wa_id: str) -> list[Stored]:
        return [m for m in self._messages.values() if m.wa_id == wa_id]

    def sent(self, wa_id: str) -> list[Stored]:
        """What the business sent ``wa_id``, oldest first."""
        return [m for m in self.messages(wa_id) if m.from_business]

    def message(self, wamid: str) -> Stored:
        return self._messages[wamid]

    def refused(self) -> list[Call]:
        return [c for c in self.calls if not c.ok]

    # -- the provider -------------------------------------------------------------------------

    def send_message(self, body: dict[str, Any]) -> dict[str, Any]:
        for failure in self._failures:
            if failure.times > 0:
                failure.times -= 1
                raise GraphError(failure.code, failure.message, status=failure.status)
        unknown = set(body) - _COMMON - _TYPES
        if unknown:
            raise invalid(f"Unexpected key {sorted(unknown)[0]!r} on param 'message'")
        if body.get("messaging_product") != "whatsapp":
            raise invalid("messaging_product must be 'whatsapp'")
        if body.get("recipient_type", "individual") != "individual":
            raise invalid("recipient_type must be 'individual'")
        to = body.get("to")
        if not isinstance(to, str) or not re.fullmatch(r"\+?[0-9]{5,20}", to):
            raise invalid("to must be a phone number")
        wa_id = to.lstrip("+")
        kind = body.get("type", "text")
        if kind not in _TYPES or kind not in body:
            raise invalid(f"type {kind!r} needs its object under the same key")
        if set(body) & _TYPES != {kind}:
            raise invalid("a message holds exactly one of its type's objects")
        reply_to = None
        if "context" in body:
            reply_to = (body["context"] or {}).get("message_id")
            if reply_to not in self._messages:
                raise GraphError(
                    131009, "(#131009) Parameter value is not valid", details="context.message_id"
                )
        if kind != "template" and wa_id not in self.window:
            raise GraphError(
                131047,
                "Re-engagement message",
                details="Message failed to send because more than 24 hours have passed since the customer last replied",
            )
        getattr(self, f"_check_{kind}")(body[kind])
        wamid = f"wamid.HBgL{next(self._ids):08d}"
        self._messages[wamid] = Stored(wamid, wa_id, True, kind, body, reply_to)
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": wa_id}],
            "messages": [{"id": wamid}],
        }

    @staticmethod
    def _fields(value: Any, allowed: set[str], required: set[str], where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise invalid(f"{where} must be an object")
        unknown = set(value) - allowed
        if unknown:
            raise invalid(f"Unexpected key {sorted(unknown)[0]!r} on param '{where}'")
        missing = required - set(value)
        if missing:
            raise invalid(f"The parameter {where}.{sorted(missing)[0]} is required.")
        return value

    @staticmethod
    def _length(value: Any, most: int, where: str, least: int = 1) -> None:
        if not isinstance(value, str) or not least <= len(value) <= most:
            raise invalid(f"{where} must be {least}-{most} characters")

    def _check_text(self, text: Any) -> None:
        text = self._fields(text, {"body", "preview_url"}, {"body"}, "text")
        self._length(text["body"], 4096, "text.body")

    def _check_media(self, kind: str, media: Any) -> None:
        media = self._fields(media, _MEDIA_FIELDS[kind], set(), kind)
        if ("id" in media) == ("link" in media):
            raise invalid(f"{kind} needs exactly one of id or link")
        if "link" in media and not str(media["link"]).startswith(("http://", "https://")):
            raise GraphError(131052, "Media download error", details=f"{kind}.link is not an http(s) URL")
        if "caption" in media:
            self._length(media["caption"], 1024, f"{kind}.caption")

    def _check_image(self, media: Any) -> None:
        self._check_media("image", media)

    def _check_document(self, media: Any) -> None:
        self._check_media("document", media)

    def _check_video(self, media: Any) -> None:
        self._check_media("video", media)

    def _check_audio(self, media: Any) -> None:
        self._check_media("audio", media)

    def _check_template(self, template: Any) -> None:
        template = self._fields(
            template, {"name", "language", "components"}, {"name", "language"}, "template"
        )
        language = (
            (template["language"] or {}).get("code") if isinstance(template["language"], dict) else None
        )
        known = self.templates.get((template["name"], str(language)))
        if known is None:
            raise GraphError(
                132001,
                "(#132001) Template name does not exist in the translation",
                details=f"template name ({template['name']}) does not exist in {language}",
            )
        parameters = [
            p
            for c in template.get("components") or []
            if c.get("type") == "body"
            for p in c.get("parameters") or []
        ]
        if len(parameters) != known.placeholders:
            raise GraphError(
                132000,
                "(#132000) Number of parameters does not match the expected number of params",
                details=f"body: number of localizable_params ({len(parameters)}) does not match the expected "
                f"number of params ({known.placeholders})",
            )

    def _check_interactive(self, interactive: Any) -> None:
        interactive = self._fields(
            interactive, {"type", "header", "body", "footer", "action"}, {"type", "action"}, "interactive"
        )
        kind = interactive["type"]
        if kind in ("button", "list", "flow", "cta_url"):
            body = self._fields(interactive.get("body"), {"text"}, {"text"}, "interactive.body")
            self._length(body["text"], 1024, "interactive.body.text")
        action = interactive["action"]
        if kind == "button":
            action = self._fields(action, {"buttons"}, {"buttons"}, "interactive.action")
            buttons = action["buttons"]
            if not isinstance(buttons, list) or not 1 <= len(buttons) <= 3:
                raise invalid("interactive.action.buttons must hold 1-3 buttons")
            titles = []
            for raw in buttons:
                button = self._fields(raw, {"type", "reply"}, {"type", "reply"}, "button")
                reply = self._fields(button["reply"], {"id", "title"}, {"id", "title"}, "button.reply")
                self._length(reply["title"], 20, "button.reply.title")
                self._length(reply["id"], 256, "button.reply.id")
                titles.append(reply["title"])
            if len(set(titles)) != len(titles):
                raise invalid("Buttons must have unique titles")
        elif kind == "list":
            action = self._fields(
                action, {"button", "sections"}, {"button", "sections"}, "interactive.action"
            )
            self._length(action["button"], 20, "interactive.action.button")
            sections = action["sections"]
            if not isinstance(sections, list) or not 1 <= len(sections) <= 10:
                raise invalid("interactive.action.sections must hold 1-10 sections")
            rows = []
            for raw_section in sections:
                section = self._fields(raw_section, {"title", "rows"}, {"rows"}, "section")
                for raw_row in section["rows"]:
                    row = self._fields(raw_row, {"id", "title", "description"}, {"id", "title"}, "row")
                    self._length(row["title"], 24, "row.title")
                    self._length(row["id"], 200, "row.id")
                    rows.append(row["title"])
            if not 1 <= len(rows) <= 10:
                raise invalid("Total row count exceed max allowed count: 10")
            if len(set(rows)) != len(rows):
                raise invalid("Row titles must be unique")
        elif kind == "cta_url":
            action = self._fields(
                action, {"name", "parameters"}, {"name", "parameters"}, "interactive.action"
            )
            p = self._fields(
                action["parameters"], {"display_text", "url"}, {"display_text", "url"}, "parameters"
            )
            self._length(p["display_text"], 20, "parameters.display_text")
            if not str(p["url"]).startswith(("http://", "https://")):
                raise invalid("parameters.url must be an http(s) URL")
        elif kind == "flow":
            action = self._fields(
                action, {"name", "parameters"}, {"name", "parameters"}, "interactive.action"
            )
            allowed = {
                "flow_message_version",
                "flow_id",
                "flow_name",
                "flow_cta",
                "flow_token",
                "mode",
                "flow_action",
                "flow_action_payload",
            }
            p = self._fields(
                action["parameters"], allowed, {"flow_message_version", "flow_cta"}, "parameters"
            )
            if p["flow_message_version"] != "3":
                raise invalid("flow_message_version must be '3'")
            if p.get("flow_id") not in self.flows:
                raise GraphError(
                    100, "(#100) Invalid parameter", details=f"Flow {p.get('flow_id')} does not exist"
                )
            self._length(p["flow_cta"], 20, "parameters.flow_cta")
            self._length(p.get("flow_token"), 1000, "parameters.flow_token")
            if p.get("flow_action", "navigate") == "navigate" and "screen" not in (
                p.get("flow_action_payload") or {}
            ):
                raise invalid("flow_action_payload.screen is required for navigate")
        else:
            raise invalid(f"interactive.type {kind!r} is not supported")

    # -- the person ---------------------------------------------------------------------------

    def _envelope(self, wa_id: str, message: dict[str, Any]) -> dict[str, Any]:
        self.window.add(wa_id)
        self._messages[message["id"]] = Stored(
            message["id"], wa_id, False, message["type"], message, (message.get("context") or {}).get("id")
        )
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": DISPLAY_NUMBER, "phone_number_id": self.phone_number_id},
            "contacts": [{"profile": {"name": self.people.get(wa_id, "Ada")}, "wa_id": wa_id}],
            "messages": [message],
        }
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
        }

    def _incoming(
        self, wa_id: str, kind: str, *, reply_to: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "from": wa_id,
            "id": f"wamid.IN{next(self._ids):08d}",
            "timestamp": "1764650000",
            "type": kind,
            **fields,
        }
        if reply_to is not None:
            message["context"] = {"from": DISPLAY_NUMBER, "id": reply_to}
        return self._envelope(wa_id, message)

    def tap_notification(
        self, wamid: str, button: str | int, *, button_id: str | None = None
    ) -> dict[str, Any]:
        """Tapping reply button ``button`` (its title or index) of message ``wamid``;
        ``button_id`` overrides its id (a forged or malformed tap)."""
        stored = self.message(wamid)
        buttons = stored.buttons()
        found = (
            buttons[button] if isinstance(button, int) else next(b for b in buttons if b["title"] == button)
        )
        reply = {"id": button_id if button_id is not None else found["id"], "title": found["title"]}
        interactive = {"type": "button_reply", "button_reply": reply}
        return self._incoming(stored.wa_id, "interactive", reply_to=wamid, interactive=interactive)

    def pick_notification(self, wamid: str, row: str | int) -> dict[str, Any]:
        stored = self.message(wamid)
        rows = stored.rows()
        found = rows[row] if isinstance(row, int) else next(r for r in rows if r["title"] == row)
        interactive = {"type": "list_reply", "list_reply": {"id": found["id"], "title": found["title"]}}
        return self._incoming(stored.wa_id, "interactive", reply_to=wamid, interactive=interactive)

    def type_notification(
        self, wa_id: str, text: str, *, reply_to: str | None = None, referral: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        extra: dict[str, Any] = {"referral": referral} if referral else {}
        return self._incoming(wa_id, "text", reply_to=reply_to, text={"body": text}, **extra)

    def submit_notification(self, wamid: str, values: dict[str, Any]) -> dict[str, Any]:
        """Completing the Flow of message ``wamid``: ``response_json`` holds the values and the
        Flow's token, as WhatsApp sends it."""
        stored = self.message(wamid)
        token = stored.flow().get("flow_token", "unused")
        response = json.dumps({**values, "flow_token": token})
        interactive = {
            "type": "nfm_reply",
            "nfm_reply": {"name": "flow", "body": "Sent", "response_json": response},
        }
        return self._incoming(stored.wa_id, "interactive", reply_to=wamid, interactive=interactive)

    def template_button_notification(self, wa_id: str, wamid: str, payload: str, text: str) -> dict[str, Any]:
        return self._incoming(wa_id, "button", reply_to=wamid, button={"payload": payload, "text": text})

    def status_notification(self, wamid: str, status: str) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": wamid,
            "status": status,
            "timestamp": "1764650000",
            "recipient_id": self.message(wamid).wa_id,
        }
        if status == "failed":
            entry["errors"] = [{"code": 131026, "title": "Message undeliverable"}]
        value = {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": DISPLAY_NUMBER, "phone_number_id": self.phone_number_id},
            "statuses": [entry],
        }
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
        }

    async def tap(self, wamid: str, button: str | int, **kw: Any) -> httpx.Response:
        return await self.send(self.tap_notification(wamid, button, **kw))

    async def pick(self, wamid: str, row: str | int) -> httpx.Response:
        return await self.send(self.pick_notification(wamid, row))

    async def type(self, wa_id: str, text: str, **kw: Any) -> httpx.Response:
        return await self.send(self.type_notification(wa_id, text, **kw))

    async def submit(self, wamid: str, values: dict[str, Any]) -> httpx.Response:
        return await self.send(self.submit_notification(wamid, values))

    def body_of(self, notification: dict[str, Any]) -> bytes:
        """The bytes Meta sends: JSON with non-ASCII characters escaped."""
        return json.dumps(notification, ensure_ascii=True).encode()

    def sign(self, body: bytes, secret: str | None = None) -> str:
        key = (secret if secret is not None else self.app_secret).encode()
        return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()

    async def send(
        self, notification: dict[str, Any] | bytes, *, signature: str | None = None, target: str | None = None
    ) -> httpx.Response:
        """POST a notification as Meta does, signed with the app secret (``signature`` overrides
        the header; an empty string sends none)."""
        url = target or self.target
        if url is None:
            raise AssertionError("no webhook target set")
        body = notification if isinstance(notification, bytes) else self.body_of(notification)
        header = self.sign(body) if signature is None else signature
        headers = {"Content-Type": "application/json"}
        if header:
            headers["X-Hub-Signature-256"] = header
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            return await http.post(url, content=body, headers=headers)

    async def handshake(self, verify_token: str, challenge: str = "1158201444") -> httpx.Response:
        """Meta's subscription check, as it runs when the callback URL is configured."""
        if self.target is None:
            raise AssertionError("no webhook target set")
        query = {"hub.mode": "subscribe", "hub.verify_token": verify_token, "hub.challenge": challenge}
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            return await http.get(self.target, params=query)


def app(standin: WhatsAppStandin) -> Litestar:
    @get("/{version:str}/{number:str}")
    async def phone_number(request: Request[Any, Any, Any]) -> Response[Any]:
        """The phone number node: what a token check (``layby doctor``) reads."""
        version, number = str(request.path_params["version"]), str(request.path_params["number"])
        if request.headers.get("authorization") != f"Bearer {standin.token}":
            refused = GraphError(190, "Invalid OAuth access token - Cannot parse access token", status=401)
            return Response(refused.envelope(), status_code=refused.status)
        if not _VERSION.fullmatch(version) or number != standin.phone_number_id:
            refused = GraphError(100, "Unsupported get request.", status=400)
            return Response(refused.envelope(), status_code=refused.status)
        return Response(
            {"verified_name": "Layby stand-in", "display_phone_number": DISPLAY_NUMBER, "id": number}
        )

    @post("/{version:str}/{number:str}/messages", status_code=200)
    async def messages_endpoint(request: Request[Any, Any, Any]) -> Response[Any]:
        version, number = str(request.path_params["version"]), str(request.path_params["number"])
        call = Call(body={})
        try:
            if request.headers.get("authorization") != f"Bearer {standin.token}":
                raise GraphError(190, "Invalid OAuth access token - Cannot parse access token", status=401)
            if not _VERSION.fullmatch(version) or number != standin.phone_number_id:
                raise GraphError(100, "Unsupported post request.", status=400)
            try:
                call.body = json.loads(await request.body())
            except ValueError:
                raise invalid("the body is not JSON") from None
            if not isinstance(call.body, dict):
                raise invalid("the body must be a JSON object")
            result = standin.send_message(call.body)
        except GraphError as exc:
            call.ok, call.code, call.details = False, exc.code, exc.details
            standin.calls.append(call)
            return Response(exc.envelope(), status_code=exc.status)
        standin.calls.append(call)
        return Response(result)

    return Litestar(
        route_handlers=[phone_number, messages_endpoint, messages_route(standin.messages, "to")], debug=False
    )


def serve_whatsapp_standin(
    standin: WhatsAppStandin | None = None,
) -> contextlib.AbstractAsyncContextManager[WhatsAppStandin]:
    """Run the stand-in on 127.0.0.1 (a free port) in this event loop."""
    return serve_standin(standin or WhatsAppStandin(), app, "the WhatsApp stand-in")


@pytest.fixture
async def whatsapp_standin() -> AsyncIterator[WhatsAppStandin]:
    """A fresh WhatsApp stand-in per test (``standin.api_url`` for the plugin's ``api_url``)."""
    async with serve_whatsapp_standin() as standin:
        yield standin
