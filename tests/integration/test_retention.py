"""The sweeper trims the read models, never a live row (docs/operations.md#read-models).

Rows are written as the projector would leave them, and time moves on a manual clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from layby_domain.clock import ManualClock
from layby_services.sweeper.retention import Retention, trim_read_models

pytestmark = pytest.mark.integration

T0 = datetime(2030, 1, 1, tzinfo=UTC)
DAY = 86400.0
RETENTION = Retention(resolved_seconds=30 * DAY, runs_seconds=30 * DAY, gone_entries_seconds=7 * DAY)


async def _interaction(
    db: asyncpg.Pool, ix: str, status: str, at: datetime, run_id: str | None = None
) -> None:
    answered_at = at if status == "answered" else None
    removed_at = at if status == "removed" else None
    await db.execute(
        "INSERT INTO interactions (interaction_id, group_id, status, created_at, timeout_at, answered_at, "
        "removed_at, run_id, asked_seq, last_seq) VALUES ($1, $1, $2, $3, $3, $4, $5, $6, 1, 2)",
        ix,
        status,
        at,
        answered_at,
        removed_at,
        run_id,
    )


async def _run(db: asyncpg.Pool, run_id: str, status: str, at: datetime) -> None:
    await db.execute(
        "INSERT INTO runs (run_id, status, created_at, updated_at, last_seq) VALUES ($1, $2, $3, $3, 1)",
        run_id,
        status,
        at,
    )


async def _entry(db: asyncpg.Pool, ix: str, status: str, at: datetime, *, settled: bool) -> None:
    await db.execute(
        "INSERT INTO parked_entries (interaction_id, subject, status, expiry_at, settled_at, created_at, "
        "last_seq) VALUES ($1, 's', $2, $3, $4, $3, 1)",
        ix,
        status,
        at,
        at if settled else None,
    )


async def _ids(db: asyncpg.Pool, table: str, key: str) -> set[str]:
    return {r[0] for r in await db.fetch(f"SELECT {key} FROM {table}")}


async def test_ended_rows_leave_after_their_retention_and_live_rows_stay(db: asyncpg.Pool) -> None:
    """Answered and removed questions, finished and cancelled runs and gone caller asks are
    deleted once older than their retention; pending questions, parked, running and failed runs,
    the asks of a run still parked and live caller asks stay however old they are."""
    old = T0 - timedelta(days=31)
    for ix, status in (("answered", "answered"), ("removed", "removed"), ("pending", "pending")):
        await _interaction(db, ix, status, old)
    await _interaction(db, "recent", "answered", T0 - timedelta(days=29))
    await _interaction(db, "of-parked-run", "answered", old, run_id="parked")
    await _interaction(db, "of-finished-run", "answered", old, run_id="finished")
    for run_id in ("finished", "cancelled", "failed", "parked", "running", "resumed"):
        await _run(db, run_id, run_id, old)
    await _run(db, "finished-lately", "finished", T0 - timedelta(days=1))
    await _entry(db, "gone-settled", "gone", T0 - timedelta(days=8), settled=True)
    await _entry(db, "gone-taken", "gone", T0 - timedelta(days=8), settled=False)
    await _entry(db, "gone-lately", "gone", T0 - timedelta(days=6), settled=True)
    for status in ("asking", "running", "finished", "failed"):
        await _entry(db, status, status, T0 - timedelta(days=300), settled=status in ("finished", "failed"))

    assert await trim_read_models(db, ManualClock(T0), RETENTION) == 3 + 2 + 2

    assert await _ids(db, "interactions", "interaction_id") == {"pending", "recent", "of-parked-run"}
    assert await _ids(db, "runs", "run_id") == {"failed", "parked", "running", "resumed", "finished-lately"}
    assert await _ids(db, "parked_entries", "interaction_id") == {
        "gone-lately",
        "asking",
        "running",
        "finished",
        "failed",
    }


async def test_trimming_goes_in_batches_and_forever_keeps_a_table(db: asyncpg.Pool) -> None:
    """A pass deletes batch after batch until none is left; a table whose retention is ``forever``
    is never trimmed."""
    old = T0 - timedelta(days=60)
    for n in range(7):
        await _interaction(db, f"ix{n}", "answered", old)
        await _run(db, f"run{n}", "finished", old)
    clock = ManualClock(T0 - timedelta(days=45))  # nothing has aged past 30 days yet
    keep_runs = Retention(resolved_seconds=30 * DAY, runs_seconds=None, gone_entries_seconds=None)
    assert await trim_read_models(db, clock, keep_runs, batch=3) == 0
    clock.advance(15 * DAY)
    assert await trim_read_models(db, clock, keep_runs, batch=3) == 7
    assert await _ids(db, "interactions", "interaction_id") == set()
    assert len(await _ids(db, "runs", "run_id")) == 7
