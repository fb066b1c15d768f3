"""Channel plugins loaded by ``module:attr`` in the channel tests (a plugin is user code)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from layby.channels import ChannelDelivery


class HangingChannel:
    """A medium that never answers: the delivery service must cut it at the remaining budget."""

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        self.calls = 0

    async def deliver(self, delivery: ChannelDelivery) -> None:
        self.calls += 1
        await asyncio.Event().wait()


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
