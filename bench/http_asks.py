"""Benchmark: HTTP asks through `layby up` (docs/doors/asks.md).

    python bench/http_asks.py [--seconds 10] [--clients 50] [--polls 300] [--url URL --token T]

Without --url it starts `layby up` itself (embedded NATS and PostgreSQL, a temporary data dir).
Two figures:

1. asks/s: ``--clients`` concurrent HTTP clients each POST ``/api/asks`` in a loop for the given
   seconds (each ask: the door's checks, one command to the ask service, one append). Prints the
   rate, the POST's p50/p99 and the CPU time `layby up`'s processes spent per ask.
2. answer → return: for ``--polls`` questions, a long poll (``wait=30``) waits while the question
   is answered at the answer door; the latency is from sending the answer to the poll's return
   (the answer's append, the resume service's wake, the door's read of the log). Ten at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import Conn
from _up import add_system_options, load_level, pct, table_head, up_unless_given

TARGET_ASKS_PER_SECOND = 500


async def asks_per_second(url: str, token: str, clients: int, seconds: float, server_pid: int | None) -> dict:
    """``clients`` keep-alive connections (the lean client: the load generator shares the cores)."""
    where = urlsplit(url)
    conns = [
        await Conn(where.hostname or "127.0.0.1", where.port or 80, token).open() for _ in range(clients)
    ]
    status, body = await conns[0].request("POST", "/api/asks", {"question": "warm-up", "timeout": 600})
    assert status == 201, body
    latencies: list[float] = []
    stop = asyncio.Event()
    asked = 0

    async def client(k: int, conn: Conn) -> None:
        nonlocal asked
        i = 0
        while not stop.is_set():
            started = time.perf_counter()
            status, body = await conn.request(
                "POST", "/api/asks", {"question": f"bench {k}-{i}", "timeout": 600}
            )
            latencies.append(time.perf_counter() - started)
            assert status == 201, body
            asked += 1
            i += 1

    level = await load_level((client(k, conn) for k, conn in enumerate(conns)), stop, seconds, server_pid)
    for conn in conns:
        await conn.close()
    return {"clients": clients, "asked": asked, **level.figures(asked, latencies)}


async def answer_to_return(url: str, token: str, polls: int) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:

        async def one(i: int) -> None:
            created = await http.post("/api/asks", json={"question": f"poll {i}", "timeout": 600})
            ix = created.json()["data"]["interaction_id"]
            polling = asyncio.create_task(http.get(f"/api/interactions/{ix}/outcome", params={"wait": 30}))
            await asyncio.sleep(0.05)  # the poll is waiting at the door
            answered_at = time.perf_counter()
            r = await http.post(f"/api/interactions/{ix}/answer", json={"answer": "ok"})
            assert r.status_code == 200, r.text
            outcome = (await polling).json()["data"]
            latencies.append(time.perf_counter() - answered_at)
            assert outcome["status"] == "answered" and outcome["answer"] == "ok", outcome

        for start in range(0, polls, 10):
            await asyncio.gather(*(one(i) for i in range(start, min(start + 10, polls))))
    return {"polls": len(latencies), "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--polls", type=int, default=300)
    add_system_options(parser, nats=False)
    args = parser.parse_args()

    with up_unless_given(args.url) as up:
        url, token = (up.url, up.token) if up else (args.url, args.token)
        rate = uvloop.run(
            asks_per_second(url, token, args.clients, args.seconds, up.proc.pid if up else None)
        )
        latency = uvloop.run(answer_to_return(url, token, args.polls))
    table_head("| clients | asks | asks/s | POST /api/asks p50 | p99 | server CPU per ask |", first="---:")
    print(
        f"| {rate['clients']} | {rate['asked']} | {rate['rate']:.0f} | {rate['p50']:.1f} ms "
        f"| {rate['p99']:.1f} ms | {rate['cpu_ms']:.2f} ms |"
    )
    verdict = "meets" if rate["rate"] >= TARGET_ASKS_PER_SECOND else "misses"
    print(f"\n{verdict} the target of {TARGET_ASKS_PER_SECOND} asks/s at {rate['clients']} clients")
    print(
        f"\nanswer → long-poll return ({latency['polls']} polls): p50 {latency['p50']:.1f} ms, "
        f"p99 {latency['p99']:.1f} ms"
    )


if __name__ == "__main__":
    main()
