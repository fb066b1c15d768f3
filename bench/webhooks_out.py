"""Benchmark: signed webhooks out to a loopback receiver through `layby up` (docs/webhooks.md,
docs/performance.md).

    python bench/webhooks_out.py [--backlog 3000] [--askers 100] [--seconds 10]

Starts `layby up` (embedded NATS and PostgreSQL) with loopback http receivers allowed, a signing
secret for its operator, and one retry second. A receiver in this process verifies every request
with the reference Standard Webhooks verifier and de-duplicates by ``webhook-id``.

1. Throughput: the receiver answers 503 while ``--backlog`` questions expire (sync asks with a
   short timeout, each one outcome); then it answers 204, and the rate at which the retried
   outcomes arrive is the delivery service's webhook throughput (sign, re-check the host, POST,
   record the attempt, ack).
2. Latency: with the receiver answering 204, ``--askers`` concurrent askers let questions expire
   for ``--seconds``; resolution -> received is the receive time minus the outcome's
   ``resolved_at`` (one machine, one clock): p50 and p99.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import uvloop
from aiohttp import web
from standardwebhooks import Webhook

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _up import free_port, layby_up, pct, table_head

from layby.sdk import connect
from layby_contracts.errors import InteractionTimeoutError
from layby_server.settings import load_settings

KEY = b"layby-bench-webhook-key-0123456789"
SECRET = "whsec_" + base64.b64encode(KEY).decode()


class Receiver:
    def __init__(self) -> None:
        self.accepting = False
        self.seen: dict[str, float] = {}
        self.lags: list[float] = []
        self.requests = 0
        self.verifier = Webhook(SECRET)
        self.target = 0
        self.reached = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        payload = self.verifier.verify(body, dict(request.headers))
        self.requests += 1
        if not self.accepting:
            return web.Response(status=503)
        msg_id = request.headers["webhook-id"]
        if msg_id not in self.seen:
            now = time.time()
            self.seen[msg_id] = now
            resolved = datetime.fromisoformat(payload["data"]["resolved_at"]).timestamp()
            self.lags.append(now - resolved)
            if len(self.seen) >= self.target:
                self.reached.set()
        return web.Response(status=204)


async def _expire(nats_url: str, token: str, url: str, askers: int, another: Callable[[], bool]) -> int:
    """Questions asked and left to expire, ``askers`` at a time, while ``another()`` says to ask
    one more; how many expired."""
    client = await connect(nats_url=nats_url, token=token, settings=load_settings({}))
    done = 0

    async def asker() -> None:
        nonlocal done
        while another():
            try:
                await client.ask_user("bench", timeout=0.2, notify_url=url)
            except InteractionTimeoutError:
                done += 1

    await asyncio.gather(*(asker() for _ in range(askers)))
    await client.close()
    return done


async def expire_many(nats_url: str, token: str, url: str, count: int, askers: int) -> int:
    """``count`` questions asked and left to expire, ``askers`` at a time."""
    tickets = iter(range(count))
    return await _expire(nats_url, token, url, askers, lambda: next(tickets, None) is not None)


async def expire_for(nats_url: str, token: str, url: str, seconds: float, askers: int) -> int:
    """Questions asked and left to expire for ``seconds``, ``askers`` at a time."""
    stop = time.monotonic() + seconds
    return await _expire(nats_url, token, url, askers, lambda: time.monotonic() < stop)


async def _until(recv: Receiver, count: int, timeout: float) -> None:
    """Until the receiver has seen ``count`` distinct outcomes (or ``timeout`` passes)."""
    recv.target = count
    recv.reached.clear()
    if len(recv.seen) >= count:
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(recv.reached.wait(), timeout)


async def bench(up_nats: str, token: str, port: int, recv: Receiver, args: argparse.Namespace) -> dict:
    app = web.Application()
    app.router.add_post("/hook", recv.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    url = f"http://127.0.0.1:{port}/hook"
    try:
        made = await expire_many(up_nats, token, url, args.backlog, args.askers)
        await asyncio.sleep(2)  # every outcome has had its first (refused) attempt
        recv.accepting = True
        opened = time.time()
        await _until(recv, made, 120)
        times = sorted(recv.seen.values())
        drained = len(times)
        rate = (drained - 1) / (times[-1] - times[0]) if drained > 1 else float("nan")
        first_lag = times[0] - opened if times else float("nan")
        recv.seen.clear()
        recv.lags.clear()
        done = await expire_for(up_nats, token, url, args.seconds, args.askers)
        await _until(recv, done, 30)
        return {
            "backlog": made,
            "drained": drained,
            "rate": rate,
            "first_after_open": first_lag,
            "live": done,
            "live_received": len(recv.seen),
            "p50": pct(recv.lags, 0.5) if recv.lags else float("nan"),
            "p99": pct(recv.lags, 0.99) if recv.lags else float("nan"),
        }
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", type=int, default=3000)
    parser.add_argument("--askers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10)
    args = parser.parse_args()
    with layby_up(
        LAYBY_WEBHOOKS_ALLOW_HTTP="on",
        LAYBY_WEBHOOKS_ALLOW_PRIVATE="on",
        LAYBY_WEBHOOKS_OUT_SECRETS=json.dumps({"operator": SECRET}),
        LAYBY_WEBHOOKS_BACKOFF_SECONDS="1",
        LAYBY_WEBHOOKS_BACKOFF_MAX_SECONDS="1",
    ) as up:
        result = uvloop.run(bench(up.nats_url, up.token, free_port(), Receiver(), args))
    table_head(
        "| backlog | delivered | webhooks/s (drain) | live outcomes | received "
        "| resolution -> received p50 | p99 |",
        first="---:",
    )
    print(
        f"| {result['backlog']} | {result['drained']} | {result['rate']:.0f} | {result['live']} "
        f"| {result['live_received']} | {result['p50']:.1f} ms | {result['p99']:.1f} ms |"
    )


if __name__ == "__main__":
    main()
