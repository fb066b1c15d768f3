"""A lean asyncio HTTP/1.1 client for benchmarks: keep-alive, no parsing beyond what we need.

httpx tops out near 700 requests/s on a 2-core machine, which would measure the client rather
than Layby; this one is a few hundred lines less general and several times faster.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any


class Conn:
    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port, self.token = host, port, token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def close(self) -> None:
        if self.writer:
            self.writer.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bool = False,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """``raw``: ``body`` is sent as given (bytes); ``headers`` are added as they are."""
        assert self.reader and self.writer
        payload = body if raw else (b"" if body is None else json.dumps(body).encode())
        auth = f"Authorization: Bearer {self.token}\r\n" if self.token else ""
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n{auth}{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        self.writer.write(head + payload)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        chunked = False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
            return status, data
        return status, await self.reader.readexactly(length)


async def sse(host: str, port: int, token: str) -> AsyncIterator[dict[str, Any]]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        f"GET /api/interactions/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    fields: dict[str, str] = {}
    try:
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.strip() or b"0", 16)
            chunk = await reader.readexactly(size + 2)
            for line in chunk[:-2].decode().split("\n"):
                if not line:
                    if "data" in fields:
                        yield {
                            "id": fields.get("id"),
                            "event": fields.get("event"),
                            "data": json.loads(fields["data"]),
                        }
                    fields = {}
                elif not line.startswith(":"):
                    key, _, value = line.partition(": ")
                    fields[key] = value
    finally:
        writer.close()


async def wait_total(
    url: str, token: str, path: str, total: int, *, every: float = 0.05, limit: float = 600
) -> None:
    """Poll a paged door (``path``, e.g. ``/api/runs?status=finished&pageSize=1``) on one
    keep-alive connection until its ``total`` reaches ``total``; give up after ``limit`` seconds."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = await Conn(parts.hostname or "127.0.0.1", parts.port or 80, token).open()
    deadline = asyncio.get_running_loop().time() + limit
    try:
        while True:
            status, raw = await conn.request("GET", path)
            if status == 200 and json.loads(raw)["data"]["total"] >= total:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"{path}: the total never reached {total}")
            await asyncio.sleep(every)
    finally:
        await conn.close()
