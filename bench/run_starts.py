"""Benchmark: run starts through `layby up` (docs/performance.md#run-starts-benchrun_startspy).

    python bench/run_starts.py [--seconds 10] [--concurrency 1 10 100] [--json PATH]

Starts `layby up`, then for each N runs N concurrent starters, each calling the SDK's
``start_run`` in a loop for ``--seconds``: one ``cmd.run.start.v1`` request to the ask service,
which appends the run's start and checks whether a live worker serves the flow (none does here,
so every start carries the warning: the check runs on every start). Prints starts/s, start
latency p50/p99 and the CPU `layby up`'s processes spent per start.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _result import Result, add_json_option
from _up import add_level_options, layby_up, load_level, table_head

from layby.sdk import connect
from layby_server.settings import load_settings


async def run_level(nats_url: str, token: str, n: int, seconds: float, server_pid: int) -> dict[str, Any]:
    client = await connect(nats_url=nats_url, token=token, settings=load_settings({}, max_concurrent=None))
    latencies: list[float] = []
    stop = asyncio.Event()

    async def starter(k: int) -> None:
        i = 0
        while not stop.is_set():
            t = time.perf_counter()
            await client.start_run("bench-unserved", {"k": k, "i": i})
            latencies.append(time.perf_counter() - t)
            i += 1

    await client.start_run("bench-unserved", {"warmup": True})
    level = await load_level((starter(k) for k in range(n)), stop, seconds, server_pid, by_part=True)
    await client.close()
    starts = len(latencies)
    return {"n": n, "starts": starts, **level.figures(starts, latencies), "split": level.split_ms(starts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_level_options(parser)
    add_json_option(parser)
    args = parser.parse_args()
    with layby_up() as up:
        results = [
            uvloop.run(run_level(up.nats_url, up.token, n, args.seconds, up.proc.pid))
            for n in args.concurrency
        ]
    table_head(
        "| starters N | starts | starts/s | start p50 | start p99 | server CPU per start |", first="---:"
    )
    out = Result("run_starts")
    for r in results:
        print(
            f"| {r['n']} | {r['starts']:.0f} | {r['rate']:.0f} | {r['p50']:.1f} ms | {r['p99']:.1f} ms "
            f"| {r['cpu_ms']:.2f} ms |"
        )
        out.higher(f"N={r['n']} starts/s", r["rate"])
        out.lower(f"N={r['n']} start p50, ms", r["p50"])
        out.lower(f"N={r['n']} start p99, ms", r["p99"])
        out.lower(f"N={r['n']} server CPU per start, ms", r["cpu_ms"])
        for part in ("ask", "nats", "resume", "door", "postgres", "delivery"):
            if part in r["split"]:
                out.lower(f"N={r['n']} CPU per start: {part}, ms", r["split"][part])
    out.write(args.json)


if __name__ == "__main__":
    main()
