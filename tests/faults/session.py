"""One fault session: load on a running ``Shape``, faults injected in turn, the checker's report.

The CI test (test_cluster_faults.py) and the soak (soak.py) both drive the shape through here.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import asyncpg

from layby.connection import connect_nats
from tests.faults.harness import Crash, FaultRecord, Faults, Shape
from tests.faults.history import Report, check, read_log
from tests.faults.load import History, Load

SETTLE_SECONDS = 10.0
"""Load goes on this long after each fault ends: its recovery is measured in that window."""
WARMUP_SECONDS = 10.0


@dataclass
class Session:
    shape: Shape
    history: History
    faults: list[FaultRecord]
    report: Report
    crashed: list[Crash]
    """Processes that exited on their own during the session (restarted by the harness)."""


async def finished_runs(shape: Shape) -> set[str]:
    """Run ids the runs projection shows finished."""
    conn = await asyncpg.connect(shape.postgres.url, timeout=5)
    try:
        rows = await conn.fetch(
            f'SELECT run_id FROM "{shape.config.db_schema}".runs WHERE status = $1', "finished"
        )
    finally:
        await conn.close()
    return {r["run_id"] for r in rows}


async def observe(shape: Shape, history: History, faults: list[FaultRecord], stopped_at: float) -> Report:
    """Read the log and the flow's effects, and run the checker."""
    nc = await connect_nats(shape.nats.url, name="faults-check")
    try:
        names = shape.config.names
        log = await read_log(nc.jetstream(), names.events_stream, names.events_all)
    finally:
        await nc.close()
    conn = await asyncpg.connect(shape.postgres.url, timeout=5)
    try:
        schema = shape.config.db_schema
        effects = [
            (r[0], r[1]) for r in await conn.fetch(f'SELECT resume_id, run_id FROM "{schema}".effects')
        ]
        executions = [
            (r[0], r[1]) for r in await conn.fetch(f'SELECT resume_id, run_id FROM "{schema}".executions')
        ]
    finally:
        await conn.close()
    return check(
        history,
        log,
        effects=effects,
        executions=executions,
        faults=faults,
        cap=shape.config.max_concurrent,
        stopped_at=stopped_at,
    )


async def run_session(
    shape: Shape,
    kinds: list[str],
    *,
    warmup: float = WARMUP_SECONDS,
    settle: float = SETTLE_SECONDS,
    on_fault: object = None,
    **load_options: float,
) -> Session:
    """Load for ``warmup`` seconds, then each fault of ``kinds`` in turn with ``settle`` seconds of
    load after it, then the checker."""
    history = History()
    load = Load(shape, history, **load_options)  # type: ignore[arg-type]
    injector = Faults(shape)
    await load.start()
    try:
        await asyncio.sleep(warmup)
        for kind in kinds:
            record = await injector.inject(kind)
            if callable(on_fault):
                on_fault(record)
            await asyncio.sleep(settle)
        stopped_at = time.time()
    finally:
        await load.stop(lambda: finished_runs(shape))
    crashed = [c for c in shape.crashes if c.at >= history.ops[0].start] if history.ops else []
    report = await observe(shape, history, injector.records, stopped_at)
    return Session(shape=shape, history=history, faults=injector.records, report=report, crashed=crashed)


async def sync_rate(shape: Shape, seconds: float, askers: int = 3) -> float:
    """Completed sync cycles per second: ``askers`` blocking askers and the answerer, nothing else."""
    history = History()
    load = Load(shape, history, askers=askers, external_askers=0, runs_per_second=0, sse_clients=0)
    await load.start()
    await asyncio.sleep(2.0)  # connections and the first asks warm up
    begin = time.time()
    await asyncio.sleep(seconds)
    end = time.time()
    await load.stop()
    done = [op for op in history.ops if op.kind == "ask" and op.result == "ok" and begin <= op.end < end]
    return len(done) / (end - begin)
