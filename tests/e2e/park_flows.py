"""Flows for the crash tests, served by ``layby worker tests.e2e.park_flows:worker``.

The flow parks on one question; once resumed it commits its effect keyed by the resume id
(idempotent) and logs every execution, in the test's PostgreSQL schema (``PARKS_DSN``,
``PARKS_SCHEMA``). The tests count both: effects exactly once per resume, executions at least once.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

import layby

worker = layby.Worker()


async def _record(run: layby.RunInfo, value: Any) -> None:
    conn = await asyncpg.connect(
        os.environ["PARKS_DSN"], server_settings={"search_path": os.environ["PARKS_SCHEMA"]}
    )
    try:
        async with conn.transaction():
            await conn.execute(
                "INSERT INTO executions (resume_id, pid) VALUES ($1, $2)", run.resume_id, os.getpid()
            )
            await conn.execute(
                "INSERT INTO effects (resume_id, run_id, value) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                run.resume_id,
                run.run_id,
                str(value),
            )
    finally:
        await conn.close()


@worker.flow("crashy")
async def crashy(n: int) -> Any:
    value = await layby.ask_user(
        f"Approve {n}?", mode="async", expiry_at=datetime.now(UTC) + timedelta(hours=1)
    )
    run = layby.current_run()
    assert run is not None
    await _record(run, value)
    return {"n": n, "value": value}


@layby.step(name="charge", retries=0)
async def charge(what: str) -> str:
    """An outside effect with no idempotency of its own: every execution adds a row."""
    info = layby.current_step()
    assert info is not None
    receipt = f"{what}-{os.urandom(4).hex()}"
    conn = await asyncpg.connect(
        os.environ["PARKS_DSN"], server_settings={"search_path": os.environ["PARKS_SCHEMA"]}
    )
    try:
        await conn.execute(
            "INSERT INTO charges (step_key, what, receipt, pid) VALUES ($1, $2, $3, $4)",
            info.key,
            what,
            receipt,
            os.getpid(),
        )
    finally:
        await conn.close()
    return receipt


@worker.flow("charger")
async def charger(n: int) -> Any:
    before = await charge(f"before-{n}")
    value = await layby.ask_user(
        f"Charge {n} again?", mode="async", expiry_at=datetime.now(UTC) + timedelta(hours=1)
    )
    after = await charge(f"after-{n}")
    return {"n": n, "before": before, "after": after, "value": value}


SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS executions (id bigserial PRIMARY KEY, resume_id text NOT NULL, pid int NOT NULL);
CREATE TABLE IF NOT EXISTS effects (resume_id text PRIMARY KEY, run_id text NOT NULL, value text);
CREATE TABLE IF NOT EXISTS charges (id bigserial PRIMARY KEY, step_key text NOT NULL, what text NOT NULL,
    receipt text NOT NULL, pid int NOT NULL);
"""
