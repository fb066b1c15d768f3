"""Flows of bench/parks.py, served by a separate worker process (`layby worker park_flows:worker`).

Each flow reports, over a local TCP connection to the benchmark (one JSON line per report), the
wall-clock moment its code after the park starts executing, so the benchmark can measure
answer→continuation and expiry lateness.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from typing import Any

import msgspec

import layby

worker = layby.Worker(concurrency=int(os.environ.get("BENCH_WORKER_CONCURRENCY", "256")))
_writer: asyncio.StreamWriter | None = None
_lock = asyncio.Lock()


async def report(key: str, value: Any) -> None:
    global _writer
    t = time.time()
    async with _lock:
        if _writer is None:
            _, _writer = await asyncio.open_connection("127.0.0.1", int(os.environ["BENCH_REPORT_PORT"]))
        expired = isinstance(value, dict) and value.get("layby:interaction_expired") is True
        _writer.write(msgspec.json.encode({"key": key, "t": t, "expired": expired}) + b"\n")
        await _writer.drain()


@worker.flow("bench_one")
async def one(arg: dict[str, Any]) -> None:
    value = await layby.ask_user(
        f"bench {arg['key']}", mode="async", expiry_at=datetime.fromisoformat(arg["expiry_at"])
    )
    await report(arg["key"], value)


@worker.flow("bench_fan")
async def fan(arg: dict[str, Any]) -> None:
    expiry = datetime.fromisoformat(arg["expiry_at"])
    values = await asyncio.gather(
        *(layby.ask_user(f"bench {arg['key']}/{i}", mode="async", expiry_at=expiry) for i in range(3))
    )
    await report(arg["key"], values[0])
