"""The two transports of ``layby mcp`` (docs/mcp.md#transports, ADR 0031).

stdio: one client, connected with the environment's token as the CLI connects. Streamable HTTP:
on its own port, every request must carry ``Authorization: Bearer <token>``; the token is checked
by the ask service before the request reaches the MCP session (a missing or refused token is a
401 and nothing is done), and the request's tools act with that token's identity, through one
connection per token.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from typing import Any

import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from layby.logs import get_logger
from layby.mcp.server import PROGRESS_SECONDS, LaybyTools
from layby.sdk import Client, connect
from layby.settings import ClientSettings
from layby_contracts.commands import Refused, VisitStatus
from layby_contracts.errors import LaybyError, NotFound, Unauthorized, Unavailable
from layby_contracts.refusals import from_refused

log = get_logger("layby.mcp")
_PROBE_VISIT = "token-check"
"""Not a visit id: the ask service checks the token, then answers not found, and does nothing."""


async def serve_stdio(settings: ClientSettings, *, progress_seconds: float = PROGRESS_SECONDS) -> None:
    client = await connect(settings=settings)

    async def client_for(_: ServerRequestContext[Any, Any]) -> Client:
        return client

    tools = LaybyTools(
        client_for, default_timeout=settings.answer_timeout_seconds, progress_seconds=progress_seconds
    )
    server = tools.server()
    try:
        pipes = await _stdio_pipes()
        async with stdio_server(*pipes) as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await client.close()


MAX_LINE = 64 * 1024 * 1024
"""The longest JSON-RPC line read from standard input (a form with inline media is long)."""


class _Lines:
    """Standard input's lines, read by the event loop (no thread per line)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Out:
    """Standard output, written by the event loop (no thread per message)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


async def _stdio_pipes() -> tuple[Any, Any] | tuple[()]:
    """Standard input and output as event-loop pipes, when both are pipes (as an MCP client
    starts a server): the SDK's default reads and writes each message in a worker thread, which
    costs a thread hop per message. The wire keeps private copies of the descriptors; fd 0 then
    reads the null device and fd 1 writes to standard error, so nothing stray reaches the wire.
    Anything else (a file, a terminal, Windows): the SDK's own streams."""
    if sys.platform == "win32" or not all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (0, 1)):
        return ()
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", 0))
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", 0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return _Lines(reader), _Out(writer)


class TokenClients:
    """One SDK connection per bearer token, made once the ask service accepted the token."""

    def __init__(self, settings: ClientSettings) -> None:
        self._settings = settings
        self._clients: dict[str, Client] = {}
        self._lock = asyncio.Lock()

    async def check(self, token: str) -> Client:
        """The token's client, after the ask service accepted the token (``Unauthorized`` when it
        did not; ``Unavailable`` when it could not be asked)."""
        async with self._lock:
            client = self._clients.get(token)
            if client is None:
                try:
                    client = await connect(settings=self._settings, token=token)
                except Unavailable as exc:
                    # Under NATS authorization a token's derived key is admitted only for a
                    # known token (docs/security.md#nats-identities): a refusal is the token's.
                    if "Authorization Violation" in str(exc):
                        raise Unauthorized("the bearer token was not accepted") from None
                    raise
                self._clients[token] = client
        reply = await client.request_door(VisitStatus(token=token, visit_id=_PROBE_VISIT))
        error = from_refused(reply) if isinstance(reply, Refused) else None
        if isinstance(error, NotFound):
            return client
        if isinstance(error, Unauthorized):
            async with self._lock:
                if self._clients.pop(token, None) is not None:
                    await client.close()
            raise error
        raise Unavailable(f"the ask service answered a token check with {type(reply).__name__}")

    def get(self, token: str) -> Client:
        return self._clients[token]

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()


def bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    for key, value in headers:
        if key.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


async def _reply(send: Any, status: int, message: str, **headers: str) -> None:
    body = msgspec.json.encode({"error": message})
    extra = [(k.encode(), v.encode()) for k, v in headers.items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *extra],
        }
    )
    await send({"type": "http.response.body", "body": body})


def guarded(app: Any, clients: TokenClients) -> Any:
    """The MCP app behind the bearer check: 401 before anything reaches a session."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        token = bearer(scope.get("headers", []))
        if token is None:
            await _reply(
                send, 401, "Authorization: Bearer <token> is required", **{"www-authenticate": "Bearer"}
            )
            return
        try:
            await clients.check(token)
        except Unauthorized:
            await _reply(send, 401, "the bearer token was not accepted", **{"www-authenticate": "Bearer"})
            return
        except (LaybyError, OSError, RuntimeError) as exc:
            log.warning("mcp.token_check_failed", error=type(exc).__name__)
            await _reply(send, 503, "Layby could not check the token; try again")
            return
        await app(scope, receive, send)

    return asgi


def http_app(
    settings: ClientSettings, host: str, *, progress_seconds: float = PROGRESS_SECONDS
) -> tuple[Any, TokenClients]:
    clients = TokenClients(settings)

    async def client_for(ctx: ServerRequestContext[Any, Any]) -> Client:
        request = ctx.request
        token = request.headers.get("authorization", "").partition(" ")[2].strip() if request else ""
        return clients.get(token)

    tools = LaybyTools(
        client_for, default_timeout=settings.answer_timeout_seconds, progress_seconds=progress_seconds
    )
    app = tools.server().streamable_http_app(host=host)
    return guarded(app, clients), clients


async def serve_http(
    settings: ClientSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    progress_seconds: float = PROGRESS_SECONDS,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve MCP over streamable HTTP until interrupted, or until ``stop`` is set (then it shuts
    down as on a signal: the listening socket and every connection are closed)."""
    import uvicorn

    app, clients = http_app(settings, host, progress_seconds=progress_seconds)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)

    async def stop_when_asked(event: asyncio.Event) -> None:
        await event.wait()
        server.should_exit = True

    watcher = asyncio.create_task(stop_when_asked(stop)) if stop is not None else None
    try:
        await server.serve()
    finally:
        if watcher is not None:
            watcher.cancel()
        await clients.close()
