"""The flow the fault suite parks, served by ``layby worker tests.faults.flows:worker``.

It parks on one question; once resumed it commits its effect keyed by the resume id (idempotent)
and logs every execution, in the suite's PostgreSQL schema (``PARKS_DSN``, ``PARKS_SCHEMA``), as
tests/e2e/park_flows.py does. The effect retries while PostgreSQL is restarting: a fault of the
suite's own database must not turn into a failed run the checker would blame on Layby.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

import layby

worker = layby.Worker()
EFFECT_BUDGET_SECONDS = 60.0
"""How long the effect keeps trying to reach PostgreSQL before the execution gives up."""

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS executions (id bigserial PRIMARY KEY, resume_id text NOT NULL,
    run_id text NOT NULL, pid int NOT NULL, at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS effects (resume_id text PRIMARY KEY, run_id text NOT NULL, value text);
"""


async def _commit(run: layby.RunInfo, value: Any) -> None:
    conn = await asyncpg.connect(
        os.environ["PARKS_DSN"], server_settings={"search_path": os.environ["PARKS_SCHEMA"]}, timeout=5
    )
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO executions (resume_id, run_id, pid) VALUES ($1, $2, $3)",
                run.resume_id,
                run.run_id,
                os.getpid(),
            )
            await conn.execute(
                "INSERT INTO effects (resume_id, run_id, value) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                run.resume_id,
                run.run_id,
                str(value),
            )
    finally:
        await conn.close()


async def _commit_retrying(run: layby.RunInfo, value: Any) -> None:
    deadline = time.monotonic() + EFFECT_BUDGET_SECONDS
    while True:
        try:
            await _commit(run, value)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
        else:
            return


@worker.flow("faulty")
async def faulty(tag: str) -> Any:
    value = await layby.ask_user(tag, mode="async", expiry_at=datetime.now(UTC) + timedelta(hours=1))
    run = layby.current_run()
    assert run is not None
    await _commit_retrying(run, value)
    return {"tag": tag, "value": value}
