"""Benchmark: ``notify_user`` to the feed through `layby up` (docs/notifications.md, docs/performance.md).

    python bench/notify.py [--seconds 10] [--concurrency 1 10 100] [--url URL --token T --nats URL]

Without --url it starts `layby up` itself (embedded NATS and PostgreSQL, a temporary data dir),
then for each N runs N concurrent senders of ``notify_user`` with no channel (each one recorded
to the shared feed: one command to the ask service, one append to the feed stream) for the given
seconds. Prints a table: notifications/s, the call's p50/p99 and the CPU time `layby up`'s
processes spent per notification; then reads the feed once (``GET /api/notifications``) and
prints how long a full feed takes to list.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _up import add_level_options, add_system_options, load_level, table_head, up_unless_given

from layby.sdk import connect
from layby_server.settings import load_settings


async def run_level(nats_url: str, token: str, n: int, seconds: float, server_pid: int | None) -> dict:
    client = await connect(nats_url=nats_url, token=token, settings=load_settings({}))
    await client.notify_user("bench warm-up")
    latencies: list[float] = []
    stop = asyncio.Event()
    sent = 0

    async def sender(k: int) -> None:
        nonlocal sent
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            reply = await client.notify_user(f"bench {n}-{k}-{i}")
            latencies.append(time.perf_counter() - started)
            assert reply.outcome == "recorded"
            sent += 1
            i += 1

    level = await load_level((sender(k) for k in range(n)), stop, seconds, server_pid)
    await client.close()
    return {"n": n, "sent": sent, **level.figures(sent, latencies)}


def read_feed(url: str, token: str) -> tuple[int, float]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        started = time.perf_counter()
        response = http.get("/api/notifications")
        elapsed = time.perf_counter() - started
    response.raise_for_status()
    return len(response.json()["data"]["notifications"]), elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_level_options(parser)
    add_system_options(parser)
    args = parser.parse_args()

    with up_unless_given(args.url) as up:
        url, token, nats_url = (up.url, up.token, up.nats_url) if up else (args.url, args.token, args.nats)
        # uvloop, like the services: the client shares the two cores and should cost little.
        results = [
            uvloop.run(run_level(nats_url, token, n, args.seconds, up.proc.pid if up else None))
            for n in args.concurrency
        ]
        listed, list_ms = read_feed(url, token)
    table_head(
        "| senders N | notifications | notifications/s | notify_user p50 | notify_user p99 "
        "| server CPU per notification |",
        first="---:",
    )
    for r in results:
        print(
            f"| {r['n']} | {r['sent']} | {r['rate']:.0f} | {r['p50']:.1f} ms | {r['p99']:.1f} ms "
            f"| {r['cpu_ms']:.2f} ms |"
        )
    print()
    print(f"GET /api/notifications, a full feed ({listed} entries): {list_ms:.0f} ms")


if __name__ == "__main__":
    main()
