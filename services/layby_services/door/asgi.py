"""A JSON error sent straight from ASGI middleware, before any door (or Litestar) runs."""

from __future__ import annotations

import msgspec
from litestar.types import HTTPResponseBodyEvent, HTTPResponseStartEvent, Send


async def send_error(send: Send, status: int, message: str, *extra: tuple[bytes, bytes]) -> None:
    """``{"error": message}`` with the headers every door error carries, plus ``extra``."""
    body = msgspec.json.encode({"error": message})
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"),
            *extra,
        ],
    }
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    await send(start)
    await send(end)
