"""Liveness, readiness and metrics on a side port: a tiny health port.

The ask, delivery, resume and sweeper services only consume from NATS, so an orchestrator has
nothing to probe. With ``LAYBY_HEALTH_PORT`` set, each serves two answers on it, the same ones
the door serves (docs/kubernetes.md#probes), and every service, the door included, serves its
Prometheus metrics there — never on the door's public port (docs/observability.md):

- ``GET /healthz``: 200 while the event loop answers. The consumer loops run in a TaskGroup, so a
  dead loop already ends the process; what is left to detect is a wedged loop (a blocking call, a
  busy loop), and a wedged loop cannot answer this either.
- ``GET /readyz``: 200 when JetStream and PostgreSQL answer, else 503 naming which does not.
- ``GET /metrics``: the service's registry in Prometheus' text format.

It is plain asyncio rather than a web framework: three fixed answers, read-only, bounded reads.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import msgspec

from layby_contracts.http import Health, HealthData, NotReady, Ready, ReadyChecks, ReadyData
from layby_server.observability.metrics import CONTENT_TYPE

__all__ = ["Checks", "Exposition", "serve_health"]

Checks = Callable[[], Awaitable[ReadyChecks]]
"""Asks every dependency once; each field is True when it answered."""
Exposition = Callable[[], bytes]
"""The service's metrics in Prometheus' text format (``ServiceMetrics.render``)."""

_HEAD_LIMIT = 8192
_READ_TIMEOUT = 5.0
_enc = msgspec.json.Encoder()
_ONLY_GET = {"error": "only GET /healthz, /readyz or /metrics"}


def _response(status: str, body: object, content_type: str = "application/json") -> bytes:
    data = body if isinstance(body, bytes) else _enc.encode(body)
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + data


async def _answer(path: str, checks: Checks, metrics: Exposition | None) -> bytes:
    if path == "/healthz":
        return _response("200 OK", Health(data=HealthData()))
    if path == "/readyz":
        try:
            found = await checks()
        except Exception:  # noqa: BLE001 - readiness reports a failure instead of raising it
            found = ReadyChecks(nats=False, postgres=False)
        if found.nats and found.postgres:
            return _response("200 OK", Ready(data=ReadyData()))
        return _response("503 Service Unavailable", NotReady(error="not ready", checks=found))
    if path == "/metrics" and metrics is not None:
        return _response("200 OK", metrics(), CONTENT_TYPE)
    return _response("404 Not Found", {"error": "not found"})


async def _read_path(reader: asyncio.StreamReader) -> str | None:
    """The request's path, once its head has arrived; None for anything but a small GET."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > _HEAD_LIMIT:
        return None
    method, _, rest = head.partition(b" ")
    if method != b"GET":
        return None
    return rest.split(b" ", 1)[0].split(b"?", 1)[0].decode("ascii", "replace")


@contextlib.asynccontextmanager
async def serve_health(
    host: str, port: int, checks: Checks, metrics: Exposition | None = None
) -> AsyncIterator[asyncio.Server]:
    """Serve ``/healthz``, ``/readyz`` and (given ``metrics``) ``/metrics`` on ``host:port``
    until the block ends."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            path = await asyncio.wait_for(_read_path(reader), _READ_TIMEOUT)
            if path is None:
                writer.write(_response("400 Bad Request", _ONLY_GET))
            else:
                writer.write(await _answer(path, checks, metrics))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
            pass  # a probe that hung up or sent garbage gets nothing; the next one asks again
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    server = await asyncio.start_server(handle, host, port, limit=_HEAD_LIMIT)
    try:
        yield server
    finally:
        server.close()
        await server.wait_closed()
