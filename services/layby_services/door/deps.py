"""The door's request-scoped seams: the authentication guard, and the dependencies its handlers
receive as parameters (the resources, the caller, the token, the capped body)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.di import NamedDependency, Provide
from litestar.handlers import BaseRouteHandler

from layby_contracts.errors import Forbidden
from layby_domain.clock import Clock
from layby_server.auth import Authenticator, Principal
from layby_server.chat.inbound import ChatInbound
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_server.write.doors import OPERATORS_ONLY
from layby_server.write.visits import Visitor
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


PRINCIPAL_KEY = "layby.principal"
"""Where the guard leaves the authenticated caller in the request's scope state (for ``who``)."""


def _state_of(connection: ASGIConnection[Any, Any, Any, Any]) -> DoorState:
    state: DoorState = connection.app.state.door
    return state


def authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """The caller: no token, no answer (401). The identity's name is left for the access-log
    line (access.py), the principal for the handler's ``who``."""
    who = _state_of(connection).auth.from_header(connection.headers.get("authorization"))
    connection.scope["state"][IDENTITY_KEY] = who.identity
    connection.scope["state"][PRINCIPAL_KEY] = who
    return who


def authenticated(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """The guard of every authenticated door: it runs before any parameter is converted or any
    body read, so a request without valid credentials learns nothing else. ``OPTIONS`` names only
    the path's methods, the same for everyone: it is not authenticated (as in Litestar's own
    authentication middleware)."""
    if connection.scope.get("method") != "OPTIONS":
        authenticate(connection)


def operators_only(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """A guard after ``authenticated``: a ``user`` token is refused (403)."""
    if connection.scope["state"][PRINCIPAL_KEY].restricted:
        raise Forbidden(OPERATORS_ONLY)


def bearer_token(request: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The caller's token, for a command the door forwards to the ask service in the caller's
    name (the guard has checked the header's shape)."""
    return request.headers.get("authorization", "").partition(" ")[2].strip()


def _door(request: Request[Any, Any, Any]) -> DoorState:
    return _state_of(request)


def _principal(request: Request[Any, Any, Any]) -> Principal:
    who: Principal = request.scope["state"][PRINCIPAL_KEY]
    return who


async def _raw_body(request: Request[Any, Any, Any], door: NamedDependency[DoorState]) -> bytes:
    return await read_capped_body(request, door.settings.max_body_bytes)


Door = NamedDependency[DoorState]
"""The door's resources (every handler may ask for them)."""
Who = NamedDependency[Principal]
"""The authenticated caller (the doors behind the ``authenticated`` guard)."""
Token = NamedDependency[str]
"""The caller's bearer token, for a command forwarded in its name."""
Raw = NamedDependency[bytes]
"""The request's body, read under the body cap (docs/doors/common.md#body-size-cap)."""
DEPENDENCIES = {"door": Provide(_door, sync_to_thread=False), "raw": Provide(_raw_body)}
AUTHENTICATED = {
    "who": Provide(_principal, sync_to_thread=False),
    "token": Provide(bearer_token, sync_to_thread=False),
}


def json_body(parse: Callable[[bytes], Any]) -> Provide:
    """A handler's ``payload``: its body read under the cap, then ``parse``d (bodies.py) — the
    one way every door reads what it is sent."""

    async def payload(raw: Raw) -> Any:
        return parse(raw)

    return Provide(payload)


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
