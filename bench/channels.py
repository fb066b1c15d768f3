"""Benchmark: channel delivery through the built-in `webhook` channel (docs/channels.md).

    python bench/channels.py [--questions 2000] [--askers 200]

Starts `layby up` with a `webhook` channel pointing at a bridge this script runs (a keep-alive
HTTP server that checks each delivery's signature). ``--askers`` concurrent askers ask
``--questions`` questions over the channel with the SDK's blocking `ask_user`; the bridge relays
each reply to its callback URL at once, as a chat bridge would. Reports deliveries/s, ask →
delivered latency, and the full cycle (ask → delivered → reply → the asker returns) per second
and p50/p99.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _http import Conn
from _up import free_port, pct, start_up, table_head

from layby.sdk import connect
from layby_server.settings import load_settings

SECRET = "bridge-bench-secret"


class Bridge:
    """Receives deliveries (keep-alive), then relays a reply to each callback URL."""

    def __init__(self, callers: int) -> None:
        self.arrived: dict[str, float] = {}
        self.replies: asyncio.Queue[str] = asyncio.Queue()
        self.callers = callers

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (ln.decode().partition(":") for ln in head.split(b"\r\n")[1:] if ln)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
                assert headers.get("x-layby-signature-256") == f"sha256={digest}"
                delivery = json.loads(body)
                self.arrived[delivery["question"]] = time.perf_counter()
                self.replies.put_nowait(urlsplit(delivery["callback_url"]).path)
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def relay(self, host: str, port: int) -> None:
        async def caller() -> None:
            conn = await Conn(host, port, "").open()
            try:
                while True:
                    path = await self.replies.get()
                    status, _ = await conn.request("POST", path, {"answer": "ok"})
                    assert status == 200, status
            finally:
                await conn.close()

        await asyncio.gather(*(caller() for _ in range(self.callers)))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    bridge = Bridge(callers=args.callers)
    server = await asyncio.start_server(bridge.handle, "127.0.0.1", 0)
    bridge_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/layby"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    up = start_up(
        LAYBY_HTTP_PORT=str(port),
        INTERACTIONS_PUBLIC_BASE_URL=base,
        LAYBY_WEBHOOK_SECRETS=f"bridge:{SECRET}",
        LAYBY_CHANNELS=json.dumps({"ops": {"plugin": "webhook", "url": bridge_url, "secret": "bridge"}}),
    )
    relay = asyncio.create_task(bridge.relay("127.0.0.1", port))
    try:
        settings = load_settings({}, max_concurrent=None, public_base_url=base)
        client = await connect(nats_url=up.nats_url, token=up.token, settings=settings)
        for i in range(20):  # warm-up
            await client.ask_user(f"warm {i}", channel="ops", timeout=60)
        asked: dict[str, float] = {}
        cycle: list[float] = []
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(args.questions):
            queue.put_nowait(i)

        async def asker() -> None:
            while not queue.empty():
                q = f"Question {queue.get_nowait()}"
                t = time.perf_counter()
                asked[q] = t
                assert await client.ask_user(q, channel="ops", timeout=600) == "ok"
                cycle.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        await asyncio.gather(*(asker() for _ in range(args.askers)))
        elapsed = time.perf_counter() - t0
        delivered = [bridge.arrived[q] - asked[q] for q in asked]
        last_delivery = max(bridge.arrived[q] for q in asked)
        await client.close()
        return {
            "deliveries/s": args.questions / (last_delivery - t0),
            "deliver": (pct(delivered, 0.5), pct(delivered, 0.99)),
            "cycles/s": args.questions / elapsed,
            "cycle": (pct(cycle, 0.5), pct(cycle, 0.99)),
        }
    finally:
        relay.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await relay
        up.stop()
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--askers", type=int, default=200, help="concurrent blocked askers")
    parser.add_argument("--callers", type=int, default=20, help="bridge connections relaying replies")
    args = parser.parse_args()
    r = asyncio.run(run(args))
    table_head(f"| webhook channel ({args.questions} questions, {args.askers} askers) | value |")
    print(f"| deliveries/s | {r['deliveries/s']:.0f} |")
    print(f"| ask → delivered p50 / p99 | {r['deliver'][0]:.1f} / {r['deliver'][1]:.1f} ms |")
    print(f"| ask → delivered → reply → asker returns: cycles/s | {r['cycles/s']:.0f} |")
    print(f"| full cycle p50 / p99 | {r['cycle'][0]:.1f} / {r['cycle'][1]:.1f} ms |")


if __name__ == "__main__":
    main()
