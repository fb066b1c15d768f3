"""Benchmark: durable steps and fair workers through `layby up` ("How fast").

    python bench/steps.py [--runs 1000] [--steps 10] [--concurrency 64] [--passes 3]

Starts `layby up` (embedded NATS and PostgreSQL, a temporary data dir) and a worker in this
process, then:

1. ``--runs`` runs that each record ``--steps`` steps and finish, ``--passes`` times (each pass's
   runs started and settled before the clock starts): recorded steps/s, median and range;
2. ``--runs`` runs that each record ``--steps`` steps, park on one async question (answered the
   moment it shows on the stream) and finish: runs/s, and the cost of a step next to a park;
3. fairness: one worker hosting 8 flows with runs/8 runs each, against one hosting 1 flow with
   all the runs; both times.

Prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _http import Conn, sse, wait_total
from _up import Up, layby_up, table_head

import layby
from layby.sdk import connect
from layby_server.settings import load_settings


FINISHED = "/api/runs?status=finished&pageSize=1"
RUNNING = "/api/runs?status=running&pageSize=1"


@layby.step(name="bench-step", retries=0)
async def tiny(i: int) -> int:
    return i


def build_worker(client: Any, settings: Any, steps: int, concurrency: int, flows: list[str]) -> layby.Worker:
    worker = layby.Worker(client, settings=settings, concurrency=concurrency)

    @worker.flow("steps")
    async def steps_only(_: Any) -> int:
        total = 0
        for i in range(steps):
            total += await tiny(i)
        return total

    @worker.flow("steps-park")
    async def steps_park(n: int) -> Any:
        for i in range(steps):
            await tiny(i)
        deadline = datetime.now(UTC) + timedelta(hours=1)
        return await layby.ask_user(f"bench-step {n}", mode="async", expiry_at=deadline)

    for name in flows:

        async def one_step(_: Any) -> int:
            return await tiny(1)

        worker.flow(name)(one_step)
    return worker


async def serve_while(worker: layby.Worker, work: Any) -> float:
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    await worker.ready.wait()
    started = time.perf_counter()
    try:
        await work
    finally:
        elapsed = time.perf_counter() - started
        stop.set()
        await serving
    return elapsed


async def bench(args: argparse.Namespace, up: Up) -> dict[str, Any]:
    settings = load_settings({}, max_concurrent=None)
    client = await connect(nats_url=up.nats_url, token=up.token, settings=settings)
    host, port = urlsplit(up.url).hostname or "127.0.0.1", urlsplit(up.url).port or 80
    out: dict[str, Any] = {}
    try:
        # 1. steps only, --passes times; each pass's runs are started (and settled: projected,
        # their continuations waiting) before the worker starts and the clock with it.
        done = 0
        out["passes"] = []
        for _ in range(args.passes):
            for _ in range(args.runs):
                await client.start_run("steps")
            await wait_total(up.url, up.token, RUNNING, args.runs)
            await asyncio.sleep(1.0)
            done += args.runs
            worker = build_worker(client, settings, args.steps, args.concurrency, [])
            out["passes"].append(await serve_while(worker, wait_total(up.url, up.token, FINISHED, done)))
        out["steps_s"] = statistics.median(out["passes"])

        # 2. steps and one park, answered as soon as it shows
        answering = asyncio.Event()

        async def answerer() -> None:
            conn = await Conn(host, port, up.token).open()
            try:
                async for frame in sse(host, port, up.token):
                    if frame["event"] == "interaction.add" and frame["data"]["question"].startswith(
                        "bench-step"
                    ):
                        await conn.request(
                            "POST",
                            f"/api/interactions/{frame['data']['interaction_id']}/answer",
                            {"answer": "ok"},
                        )
                    answering.set()
            finally:
                await conn.close()

        reader = asyncio.create_task(answerer())
        await asyncio.sleep(0.5)
        for n in range(args.runs):
            await client.start_run("steps-park", n)
        done += args.runs
        worker = build_worker(client, settings, args.steps, args.concurrency, [])
        out["park_s"] = await serve_while(worker, wait_total(up.url, up.token, FINISHED, done))
        reader.cancel()

        # 3. fairness: 8 flows x runs/8 against 1 flow x runs
        per = max(args.runs // 8, 1)
        flows = [f"fair{i}" for i in range(8)]
        for f in flows:
            for _ in range(per):
                await client.start_run(f)
        done += per * 8
        worker = build_worker(client, settings, args.steps, args.concurrency, flows)
        out["eight_s"] = await serve_while(worker, wait_total(up.url, up.token, FINISHED, done))
        for _ in range(per * 8):
            await client.start_run("solo")
        done += per * 8
        worker = build_worker(client, settings, args.steps, args.concurrency, ["solo"])
        out["one_s"] = await serve_while(worker, wait_total(up.url, up.token, FINISHED, done))
        out["fair_runs"] = per * 8
    finally:
        await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--passes", type=int, default=3, help="passes of the steps-only phase")
    args = parser.parse_args()
    with layby_up() as up:
        r = uvloop.run(bench(args, up))
    steps = args.runs * args.steps
    step_ms = r["steps_s"] / steps * 1000
    park_ms = max(r["park_s"] - r["steps_s"], 0.0) / args.runs * 1000
    table_head(
        f"| measure ({args.runs} runs, {args.steps} steps each, "
        f"worker concurrency {args.concurrency}) | value |"
    )
    rates = sorted(steps / s for s in r["passes"])
    print(f"| steps only: wall time (median of {len(rates)} passes) | {r['steps_s']:.1f} s |")
    median = steps / r["steps_s"]
    print(f"| recorded steps/s: median (range) | {median:.0f} ({rates[0]:.0f} to {rates[-1]:.0f}) |")
    print(f"| steps + one park (answered at once): wall time | {r['park_s']:.1f} s |")
    print(f"| runs/s with steps and a park | {args.runs / r['park_s']:.0f} |")
    print(f"| time per step (wall / steps) | {step_ms:.2f} ms |")
    print(f"| added time per park and resume (wall / runs) | {park_ms:.2f} ms |")
    print(f"| a step costs, next to a park | {step_ms / park_ms if park_ms else float('nan'):.2f} parks |")
    print(f"| 8 flows x {r['fair_runs'] // 8} runs on one worker | {r['eight_s']:.1f} s |")
    print(f"| 1 flow x {r['fair_runs']} runs on one worker | {r['one_s']:.1f} s |")


if __name__ == "__main__":
    main()
