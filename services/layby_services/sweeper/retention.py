"""Trimming the read models (docs/operations.md#read-models).

Rows that ended longer ago than their retention are deleted, a batch at a time so no
statement holds many locks or runs long:

- ``interactions``: answered or removed questions (the done list), except those of a run that
  has not ended, whose page still shows its asks;
- ``runs``: finished and cancelled runs; a failed run stays, since it may be retried;
- ``parked_entries``: caller asks that are gone (taken, removed, settled as parked).

A pending question, a parked or running run and a live caller ask are never touched. The
event log keeps every event (unless bounded), so ``layby projections rebuild`` brings trimmed
rows back, and the next pass trims them again. Only the tables are trimmed here: they are
read models, never the truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import asyncpg

from layby_domain.clock import Clock
from layby_server.observability.logs import get_logger

log = get_logger("layby.sweeper")
BATCH = 1000

_INTERACTIONS = """
DELETE FROM interactions WHERE interaction_id IN (
    SELECT i.interaction_id FROM interactions i
    WHERE i.status <> 'pending' AND coalesce(i.answered_at, i.removed_at) <= $1
      AND (i.run_id IS NULL OR NOT EXISTS (
          SELECT 1 FROM runs r WHERE r.run_id = i.run_id
          AND r.status NOT IN ('finished', 'cancelled')))
    ORDER BY coalesce(i.answered_at, i.removed_at) LIMIT $2)
"""
_RUNS = """
DELETE FROM runs WHERE run_id IN (
    SELECT run_id FROM runs WHERE status IN ('finished', 'cancelled') AND updated_at <= $1
    ORDER BY updated_at LIMIT $2)
"""
_ENTRIES = """
DELETE FROM parked_entries WHERE interaction_id IN (
    SELECT interaction_id FROM parked_entries
    WHERE status = 'gone' AND coalesce(settled_at, created_at) <= $1
    ORDER BY coalesce(settled_at, created_at) LIMIT $2)
"""


@dataclass(frozen=True, slots=True)
class Retention:
    """How long each read model keeps an ended row (seconds; None keeps it)."""

    resolved_seconds: float | None
    runs_seconds: float | None
    gone_entries_seconds: float | None


async def _trim(pool: asyncpg.Pool, sql: str, cutoff: object, batch: int) -> int:
    """Delete batch after batch until a batch comes back short."""
    total = 0
    while True:
        status = await pool.execute(sql, cutoff, batch)
        deleted = int(status.rsplit(" ", 1)[-1])
        total += deleted
        if deleted < batch:
            return total


async def trim_read_models(
    pool: asyncpg.Pool, clock: Clock, retention: Retention, *, batch: int = BATCH
) -> int:
    """One pass over the three tables; returns how many rows it deleted."""
    now = clock.now()
    counts: dict[str, int] = {}
    for table, sql, seconds in (
        ("interactions", _INTERACTIONS, retention.resolved_seconds),
        ("runs", _RUNS, retention.runs_seconds),
        ("parked_entries", _ENTRIES, retention.gone_entries_seconds),
    ):
        if seconds is not None:
            counts[table] = await _trim(pool, sql, now - timedelta(seconds=seconds), batch)
    total = sum(counts.values())
    if total:
        log.info("sweeper.trimmed", **counts)
    return total
