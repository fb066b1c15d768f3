"""Request-scoped helpers of the door: the resources, the principal, the capped body."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from litestar import Request
from litestar.connection import ASGIConnection

from layby_domain.clock import Clock
from layby_server.auth import Authenticator, Principal
from layby_server.chat.inbound import ChatInbound
from layby_server.eventstore import EventStore
from layby_server.settings import Settings
from layby_server.visits import Visitor
from layby_services.door.access import IDENTITY_KEY
from layby_services.door.cache import AskedCache
from layby_services.door.errors import PayloadTooLarge
from layby_services.door.fanout import Tails
from layby_services.door.messages import PAYLOAD_TOO_LARGE
from layby_services.door.wakes import WakeHub


@dataclass
class DoorState:
    settings: Settings
    store: EventStore
    pool: asyncpg.Pool
    auth: Authenticator
    clock: Clock
    asked: AskedCache = field(default_factory=AskedCache)
    ask_waits: int = 0
    """Callbacks now waiting for their question to be recorded (the callback door bounds it)."""
    long_polls: int = 0
    """Outcome long polls this process holds now (bounded by LAYBY_HTTP_MAX_LONG_POLLS)."""
    wakes: WakeHub | None = None
    """The shared wake subscription of the long polls (wakes.py), made by the first one."""
    chat: ChatInbound | None = None
    """The chat channels' inbound webhooks (None: no chat channel is configured)."""
    visitor: Visitor = field(init=False)
    """Runs hook and conversation visits (docs/doors/hooks.md)."""
    tails: Tails = field(init=False)
    """The shared tails of the stream doors and their clients (docs/doors/stream.md#one-shared-tail)."""
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    """Best-effort work a request left behind after its response (``background``)."""

    def background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the response; it is awaited (briefly) when the door stops."""
        task = asyncio.ensure_future(work)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def drain(self, timeout: float = 5.0) -> None:
        """Let what ``background`` started finish, for at most ``timeout`` seconds."""
        if self.pending:
            await asyncio.wait(list(self.pending), timeout=timeout)


def door(request: ASGIConnection[Any, Any, Any, Any]) -> DoorState:
    state: DoorState = request.app.state.door
    return state


def principal_of(request: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """Every authenticated door calls this first: no token, no answer (401). The identity's name
    is left for the access-log line (access.py)."""
    who = door(request).auth.from_header(request.headers.get("authorization"))
    request.scope["state"][IDENTITY_KEY] = who.identity
    return who


def bearer_token(request: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The caller's token, for a command the door forwards to the ask service in the caller's
    name (call ``principal_of`` first: it checks the header's shape)."""
    return request.headers.get("authorization", "").partition(" ")[2].strip()


async def read_capped_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    """Read the body counting actual bytes, never trusting Content-Length
    (docs/doors/common.md#body-size-cap)."""
    return await capped(request.stream(), limit)


async def capped(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The chunks joined, refused (413) as soon as their actual bytes pass ``limit``."""
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(PAYLOAD_TOO_LARGE)
        parts.append(chunk)
    return b"".join(parts)
