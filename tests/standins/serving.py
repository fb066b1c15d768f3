"""What every stand-in (and a test's small door) shares: serving an ASGI app on 127.0.0.1 in
this event loop, and the inspection route ``GET /_test/messages``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

import uvicorn
from litestar import Request, get
from litestar.handlers import HTTPRouteHandler


@contextlib.asynccontextmanager
async def serve(app: Any, what: str) -> AsyncIterator[str]:
    """Serve ``app`` on a free port of 127.0.0.1 for the block's length; its base URL. A server
    that fails to start raises its error (``what`` names it in the wait's failure)."""
    from tests.helpers import eventually

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually(lambda: server.started or task.done(), f"{what} to listen", timeout=10)
        if task.done():
            task.result()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@dataclass
class Failure:
    """A provider error the stand-in answers with for the next ``times`` calls (its API's error
    ``code``, HTTP ``status`` and ``message``)."""

    code: int
    status: int
    message: str
    times: int


class _Standin(Protocol):
    url: str


S = TypeVar("S", bound=_Standin)


@contextlib.asynccontextmanager
async def serve_standin(standin: S, app: Callable[[S], Any], what: str) -> AsyncIterator[S]:
    """Serve ``app(standin)`` (see ``serve``); the stand-in, its ``url`` set."""
    async with serve(app(standin), what) as url:
        standin.url = url
        yield standin


def messages_route(messages: Callable[[str], Iterable[Any]], key: str) -> HTTPRouteHandler:
    """``GET /_test/messages?<key>=<address>``: what the person at that address sees, as JSON
    (``messages`` returns the stand-in's stored dataclasses)."""

    @get("/_test/messages", sync_to_thread=False)
    def listed(request: Request[Any, Any, Any]) -> list[dict[str, Any]]:
        return [asdict(m) for m in messages(request.query_params[key])]

    return listed
