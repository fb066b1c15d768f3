"""Flows of bench/parks.py, served by a separate worker process (`layby worker park_flows:worker`).

Each flow reports, on core NATS subject ``bench.report``, the wall-clock moment its code after
the park starts executing, so the benchmark can measure answer→continuation and expiry lateness.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import datetime
from typing import Any

import msgspec
import nats

import layby

worker = layby.Worker(concurrency=int(os.environ.get("BENCH_WORKER_CONCURRENCY", "256")))
_nc: Any = None
_lock = asyncio.Lock()


async def report(key: str, value: Any) -> None:
    global _nc  # noqa: PLW0603 - one lazily opened connection per worker process
    t = time.time()
    async with _lock:
        if _nc is None:
            _nc = await nats.connect(os.environ["BENCH_NATS_URL"])
    expired = isinstance(value, dict) and value.get("layby:interaction_expired") is True
    await _nc.publish("bench.report", msgspec.json.encode({"key": key, "t": t, "expired": expired}))


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
