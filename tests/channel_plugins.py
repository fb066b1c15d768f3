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

from layby_contracts.channels import ChannelDelivery, ChannelDeliveryError


class HangingChannel:
    """A medium that never answers: the delivery service must cut it at the remaining budget.
    Records the question of every send it has started."""

    started: ClassVar[list[str]] = []

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.calls = 0

    async def deliver(self, delivery: ChannelDelivery) -> None:
        self.calls += 1
        HangingChannel.started.append(delivery.interaction_id)
        await asyncio.Event().wait()


class LeakyChannel:
    """A plugin whose error quotes the callback URL it was given (as a careless one might)."""

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        pass

    async def deliver(self, delivery: ChannelDelivery) -> None:
        raise ChannelDeliveryError(f"the medium refused the button {delivery.callback_url}")


class RetryLaterChannel:
    """A medium that is always busy (retryable, ``retry_after`` 0.3 s); records every attempt."""

    calls: ClassVar[list[str]] = []

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        pass

    async def deliver(self, delivery: ChannelDelivery) -> None:
        RetryLaterChannel.calls.append(delivery.interaction_id)
        raise ChannelDeliveryError("busy", retryable=True, retry_after=0.3)


class CrashingChannel:
    """A plugin with a bug: an untyped exception fails on the first attempt and crashes nothing."""

    supports_form_delivery = True

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.limit = int(config.get("max_fields", 2))

    def validate_form_schema(self, schema: dict[str, Any], question: str) -> None:
        if len(schema.get("properties", {})) > self.limit:
            raise ValueError(f"at most {self.limit} fields fit on this medium")

    async def deliver(self, delivery: ChannelDelivery) -> None:
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
        }
    )
