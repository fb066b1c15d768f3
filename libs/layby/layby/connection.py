"""The NATS connection every Layby process opens: the SDK's, the worker's and the services'."""

from __future__ import annotations

import nats
from nats.aio.client import Client as NATS

NO_MESSAGE_FOUND = 10037
"""JetStream's error code for a read of an empty subject (an answer, not a failure)."""


async def connect_nats(url: str, *, name: str) -> NATS:
    """Connect with reconnects forever: a NATS restart must not kill a service or a waiting ask."""
    return await nats.connect(
        url,
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        allow_reconnect=True,
    )
