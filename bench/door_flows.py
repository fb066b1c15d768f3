"""Flows of bench/doors.py, served by a separate worker process (`layby worker door_flows:worker`).

``bench_steps`` asks its caller ``steps`` times in a row (each answer resumes it and it parks on
the next question), then finishes: each hook visit that resumes it gets its next outcome back.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import layby

worker = layby.Worker(concurrency=int(os.environ.get("BENCH_WORKER_CONCURRENCY", "256")))
FAR = datetime.now(UTC) + timedelta(days=1)


@worker.flow("bench_steps")
async def steps(arg: dict[str, Any]) -> dict[str, Any]:
    total = 0
    for step in range(int(arg.get("steps", 5))):
        answer = await layby.ask_user(f"step {step}?", to="caller", expiry_at=FAR, payload={"step": step})
        total += int(answer) if isinstance(answer, int) else 0
    return {"total": total}
