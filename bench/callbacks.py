"""Benchmark: the public callback door ("How fast").

    python bench/callbacks.py [--questions 2000] [--callers 50] [--json PATH]

Starts `layby up` with a public base URL and a webhook secret, asks ``--questions`` external
questions without a verifier and as many bound to the `stripe` verifier (the SDK's `ask_user`,
blocking until answered), then delivers the callbacks from ``--callers`` concurrent keep-alive
connections — half at full speed, half at a steady ``--rate`` — and reports answers/s and
callback latency p50/p99 for each kind.
"""

from __future__ import annotations

import argparse
import asyncio
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
from _result import Result, add_json_option
from _up import free_port, layby_up, pct, table_head

from layby.sdk import connect
from layby_server.settings import load_settings

SECRET = "whsec_bench_0123456789"


def stripe_header(body: bytes) -> str:
    stamp = int(time.time())
    return (
        f"t={stamp},v1={hmac.new(SECRET.encode(), f'{stamp}.'.encode() + body, hashlib.sha256).hexdigest()}"
    )


async def deliver(
    host: str, port: int, paths: list[str], callers: int, signed: bool, rate: float | None = None
) -> tuple[float, list[float]]:
    """Deliver every callback from ``callers`` connections, at full speed or ``rate`` per second."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for p in paths:
        queue.put_nowait(p)
    lat: list[float] = []
    start = time.perf_counter()
    issued = 0

    async def caller() -> None:
        nonlocal issued
        conn = await Conn(host, port, "").open()
        try:
            while not queue.empty():
                path = queue.get_nowait()
                if rate:
                    issued += 1
                    delay = start + issued / rate - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                body = json.dumps({"type": "checkout.session.completed", "ref": path[-8:]}).encode()
                extra = {"Stripe-Signature": stripe_header(body)} if signed else {}
                t = time.perf_counter()
                status, _ = await conn.request("POST", path, body, raw=True, headers=extra)
                lat.append(time.perf_counter() - t)
                assert status == 200, status
        finally:
            await conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    return len(paths) / (time.perf_counter() - t0), lat


async def run(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out: dict[str, Any] = {}
    with layby_up(
        LAYBY_HTTP_PORT=str(port),
        INTERACTIONS_PUBLIC_BASE_URL=base,
        LAYBY_WEBHOOK_SECRETS=f"payments:{SECRET}",
    ) as up:
        settings = load_settings({}, max_concurrent=None, public_base_url=base)
        client = await connect(nats_url=up.nats_url, token=up.token, settings=settings)
        callbacks: dict[str, list[str]] = {"plain": [], "stripe": []}

        def link_for(kind: str) -> Any:
            def link(callback_url: str) -> str:
                callbacks[kind].append(urlsplit(callback_url).path)
                return f"https://pay.example/{kind}"

            return link

        verifier = {"name": "stripe", "config": {"secret": "payments"}}
        waiting = [
            asyncio.create_task(
                client.ask_user(f"Pay {i}", answer_format="external", link=link_for("plain"), timeout=3600)
            )
            for i in range(args.questions)
        ] + [
            asyncio.create_task(
                client.ask_user(
                    f"Pay signed {i}",
                    answer_format="external",
                    link=link_for("stripe"),
                    verifier=verifier,
                    timeout=3600,
                )
            )
            for i in range(args.questions)
        ]
        while len(callbacks["plain"]) + len(callbacks["stripe"]) < 2 * args.questions:  # noqa: ASYNC110 - polling a counter filled by callbacks
            await asyncio.sleep(0.1)
        host = urlsplit(base).hostname or "127.0.0.1"
        conn = await Conn(host, port, up.token).open()
        try:  # every ask recorded and projected, so the callbacks meet a quiet system
            while True:
                _, body = await conn.request("GET", "/api/interactions?pageSize=1")
                if json.loads(body)["data"]["total"] >= 2 * args.questions:
                    break
                await asyncio.sleep(0.2)
        finally:
            await conn.close()
        await asyncio.sleep(2)
        half = args.questions // 2
        for kind in ("plain", "stripe"):
            paths = callbacks[kind]
            rate, lat = await deliver(host, port, paths[:half], args.callers, kind == "stripe")
            out[kind] = (rate, pct(lat, 0.5), pct(lat, 0.99))
            rate, lat = await deliver(
                host, port, paths[half:], args.callers, kind == "stripe", rate=args.rate
            )
            out[kind + "@rate"] = (rate, pct(lat, 0.5), pct(lat, 0.99))
        await asyncio.wait_for(asyncio.gather(*waiting), 120)
        await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--rate", type=float, default=500.0, help="callbacks/s of the paced half")
    add_json_option(parser)
    args = parser.parse_args()
    r = asyncio.run(run(args))
    table_head(
        f"| callbacks ({args.questions} each, {args.callers} concurrent callers) | answers/s | p50 | p99 |"
    )
    out = Result("callbacks")
    for kind, label in (("plain", "unsigned"), ("stripe", "Stripe-signed (verified)")):
        for key, how in ((kind, "full speed"), (kind + "@rate", f"at {args.rate:.0f}/s")):
            rate, p50, p99 = r[key]
            print(f"| {label}, {how} | {rate:.0f} | {p50:.1f} ms | {p99:.1f} ms |")
            out.higher(f"{label}, {how}: answers/s", rate)
            out.lower(f"{label}, {how}: p50, ms", p50)
            out.lower(f"{label}, {how}: p99, ms", p99)
    out.write(args.json)


if __name__ == "__main__":
    main()
