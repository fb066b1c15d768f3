"""Channel test support: plugins loaded by ``module:attr`` (a plugin is user code), and a
local HTTP bridge the built-in ``webhook`` channel posts to, as a chat bridge would receive it."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from layby_contracts import channels


class HangingChannel:
    """A medium that never answers: the delivery service must cut it at the remaining budget.
    Records the question of every send it has started; a test that is done with a hung send may
    end it (``release``), so the service's shutdown does not wait on it."""

    started: ClassVar[list[str]] = []
    hangs: ClassVar[dict[str, asyncio.Event]] = {}

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.calls = 0

    async def deliver(self, delivery: channels.ChannelDelivery) -> None:
        self.calls += 1
        hang = HangingChannel.hangs.setdefault(delivery.interaction_id, asyncio.Event())
        HangingChannel.started.append(delivery.interaction_id)
        try:
            await hang.wait()
        finally:
            HangingChannel.hangs.pop(delivery.interaction_id, None)
        raise channels.ChannelDeliveryError("the hung send was released by the test")

    @classmethod
    def release(cls, interaction_id: str) -> None:
        """End the hung send of ``interaction_id`` (it fails, as a medium that gave up would)."""
        if hang := cls.hangs.get(interaction_id):
            hang.set()


class LeakyChannel:
    """A plugin whose error quotes the callback URL it was given (as a careless one might)."""

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        pass

    async def deliver(self, delivery: channels.ChannelDelivery) -> None:
        raise channels.ChannelDeliveryError(f"the medium refused the button {delivery.callback_url}")


class RetryLaterChannel:
    """A medium that is always busy (retryable, ``retry_after`` 0.3 s); records every attempt."""

    calls: ClassVar[list[str]] = []

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        pass

    async def deliver(self, delivery: channels.ChannelDelivery) -> None:
        RetryLaterChannel.calls.append(delivery.interaction_id)
        raise channels.ChannelDeliveryError("busy", retryable=True, retry_after=0.3)


class CrashingChannel:
    """A plugin with a bug: an untyped exception fails on the first attempt and crashes nothing."""

    supports_form_delivery = True

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.limit = int(config.get("max_fields", 2))

    def validate_form_schema(self, schema: dict[str, Any], question: str) -> None:
        if len(schema.get("properties", {})) > self.limit:
            raise ValueError(f"at most {self.limit} fields fit on this medium")

    async def deliver(self, delivery: channels.ChannelDelivery) -> None:
        raise KeyError("recipient_id")


BRIDGE_SECRET = "bridge-secret-0123456789"


@dataclass
class Bridge:
    """A local HTTP endpoint: records deliveries; answers each with the next scripted status."""

    url: str = ""
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    signatures: list[str] = field(default_factory=list)
    statuses: list[tuple[int, dict[str, str]]] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        headers = {
            k.strip().lower(): v.strip()
            for k, _, v in (ln.decode().partition(":") for ln in head.split(b"\r\n")[1:] if ln)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.deliveries.append(json.loads(body))
        self.signatures.append(headers.get("x-layby-signature-256", ""))
        expected = hmac.new(BRIDGE_SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(self.signatures[-1], f"sha256={expected}")
        status, extra = self.statuses.pop(0) if self.statuses else (200, {})
        lines = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n{lines}\r\n".encode())
        await writer.drain()
        writer.close()

    async def next_delivery(self, count: int = 1) -> dict[str, Any]:
        """The ``count``-th delivery, once it has arrived."""
        from tests.helpers import eventually  # here: the helpers import the fixtures that import this

        arrived = await eventually(
            lambda: self.deliveries, f"{count} deliveries", until=lambda got: len(got) >= count, timeout=25
        )
        return arrived[count - 1]


def channels_json(bridge_url: str) -> str:
    return json.dumps(
        {
            "ops": {"plugin": "webhook", "url": bridge_url, "secret": "bridge"},
            "sms": {"plugin": "webhook", "url": bridge_url, "secret": "bridge", "forms": False},
            "stuck": {"plugin": "tests.channel_plugins:HangingChannel"},
            "buggy": {"plugin": "tests.channel_plugins:CrashingChannel", "max_fields": 2},
            "leaky": {"plugin": "tests.channel_plugins:LeakyChannel"},
            "later": {"plugin": "tests.channel_plugins:RetryLaterChannel"},
            "chat-a": {"plugin": "tests.channel_plugins:ScriptedChat", "secret": "bridge"},
            "chat-b": {"plugin": "tests.channel_plugins:ScriptedChat", "secret": "bridge"},
        }
    )


@dataclass
class ChatLog:
    """What a scripted chat medium saw: posted questions, outcomes of replies, retractions."""

    posted: list[channels.ChannelDelivery] = field(default_factory=list)
    outcomes: list[Any] = field(default_factory=list)
    retracted: dict[str, Any] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class ScriptedChat:
    """A chat plugin for the channel-neutral rules (docs/channels.md#chat-channels): it posts
    nothing anywhere, remembers what it was asked to post, and reads inbound requests as JSON
    ``InboundReply`` fields signed with ``X-Test-Signature: hex(HMAC-SHA256(secret, body))``.
    The door, the delivery and the ask service each build their own instance, so what it saw
    is kept per channel name in ``LOGS``."""

    LOGS: ClassVar[dict[str, ChatLog]] = {}
    supports_form_delivery = True

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.name = name
        self._secret = secrets[config["secret"]]
        self.log = ScriptedChat.LOGS.setdefault(name, ChatLog())

    async def deliver(self, delivery: channels.ChannelDelivery) -> channels.Posted:
        self.log.posted.append(delivery)
        self.log.arrived.set()
        return channels.Posted(chat=delivery.recipient or "room", message=f"m-{delivery.interaction_id}")

    async def inbound(self, request: channels.InboundRequest) -> channels.Inbound:
        given = request.headers.get("x-test-signature", "")
        expected = hmac.new(self._secret, request.body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given, expected):
            raise channels.InboundRefused("bad test signature")
        try:
            reply = msgspec.json.decode(request.body, type=channels.InboundReply)
        except msgspec.DecodeError as exc:
            raise channels.InboundMalformed(str(exc)) from None
        return channels.Inbound(replies=[reply])

    async def respond(
        self, reply: channels.InboundReply, outcome: channels.ReplyOutcome
    ) -> channels.InboundResponse | None:
        self.log.outcomes.append(outcome)
        return channels.InboundResponse(body=msgspec.json.encode(outcome), content_type="application/json")

    async def follow_up(self, reply: channels.InboundReply, outcome: channels.ReplyOutcome) -> None:
        return None

    async def open_form(self, reply: channels.InboundReply, delivery: channels.ChannelDelivery) -> None:
        return None

    async def retract(self, posted: channels.Posted, retraction: channels.Retraction) -> None:
        self.log.retracted[retraction.interaction_id] = retraction


def sign_chat(body: bytes) -> dict[str, str]:
    return {
        "X-Test-Signature": hmac.new(BRIDGE_SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


class NotifyingChannel:
    """A one-way medium for notification tests (docs/notifications.md#on-a-channel). Config:
    ``flags`` (the fields it supports: ``media``, ``template``, ``options``, ``schema``), ``fail``
    (``retryable``, ``final``, ``input`` or absent: how every send fails), ``retry_after``. Every
    notification it was handed is kept in ``sent`` (failed sends too), with the medium's ids it
    returned in ``ids``."""

    sent: ClassVar[list[channels.ChannelNotification]] = []
    ids: ClassVar[dict[str, list[str]]] = {}

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.name = name
        for key in config.get("flags", []):
            setattr(self, channels.NOTIFY_FLAGS[key], True)
        self.fail = config.get("fail")
        self.retry_after = config.get("retry_after")

    async def deliver(self, delivery: channels.ChannelDelivery) -> None:
        raise channels.ChannelDeliveryError("this medium only notifies")

    async def notify(self, notification: channels.ChannelNotification) -> list[str]:
        NotifyingChannel.sent.append(notification)
        if self.fail == "retryable":
            raise channels.ChannelDeliveryError(
                "medium busy at https://medium.example/token-abc",
                retryable=True,
                retry_after=self.retry_after,
            )
        if self.fail == "final":
            raise channels.ChannelDeliveryError("medium said no at https://medium.example/token-abc")
        if self.fail == "input":
            raise channels.ChannelInputError("the medium refuses this recipient")
        ids = [
            f"{self.name}-{len(NotifyingChannel.sent)}-{i}" for i in range(len(notification.media or []) + 1)
        ]
        NotifyingChannel.ids[notification.notification_id] = ids
        return ids

    @classmethod
    def with_message(cls, message: str) -> list[channels.ChannelNotification]:
        return [n for n in cls.sent if n.message == message]


class DeliverOnlyChannel:
    """A channel with no ``notify``: it delivers questions only (a notification to it is a 501)."""

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        pass

    async def deliver(self, delivery: channels.ChannelDelivery) -> None:
        return None
