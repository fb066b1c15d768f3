"""Versioned, forward-only migrations of the PostgreSQL schema (docs/engineering.md#sql-files)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from layby.settings import SettingsError
from layby_server.projection import db
from layby_server.projection.db import migrate, migrations, recreate_projection_tables, sql_files

pytestmark = pytest.mark.integration

PRE_VERSIONING = 11
"""The last file shipped before the version table: the previous release's schema ends here."""


@dataclass(frozen=True)
class Pg:
    conn: asyncpg.Connection
    schema: str
    """A fresh schema's name; it does not exist until a test creates or migrates it."""


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[Pg]:
    """A connection and a schema of the test's own (dropped after)."""
    conn = await asyncpg.connect(pg_url)
    target = Pg(conn, "m" + uuid.uuid4().hex[:10])
    yield target
    await conn.execute(f'DROP SCHEMA IF EXISTS "{target.schema}" CASCADE')
    await conn.close()


async def _recorded(pg: Pg) -> list[tuple[int, str]]:
    rows = await pg.conn.fetch(f'SELECT version, name FROM "{pg.schema}".schema_migrations ORDER BY version')
    return [(r["version"], r["name"]) for r in rows]


def _shipped() -> list[tuple[int, str]]:
    return [(m.version, m.filename) for m in migrations()]


async def test_a_schema_from_before_versioning_is_adopted_and_keeps_its_data(pg: Pg) -> None:
    """A schema the previous release made (every file run, no version table) is adopted: each file recorded, no row lost (docs/engineering.md#sql-files)."""
    await pg.conn.execute(f'CREATE SCHEMA "{pg.schema}"; SET search_path TO "{pg.schema}"')
    for name, text in sql_files():  # what the previous release's start did
        if int(name[:4]) <= PRE_VERSIONING:
            await pg.conn.execute(text)
    await pg.conn.execute(
        "INSERT INTO interactions (interaction_id, group_id, status, last_seq) VALUES ('i1', 'g', 'pending', 7)"
    )
    await pg.conn.execute("INSERT INTO workers (worker_id, identity, flows) VALUES ('w1', 'ops', '{f}')")
    await pg.conn.execute("RESET search_path")

    applied = await migrate(pg.conn, pg.schema)

    assert applied == [v for v, _ in _shipped()]
    assert await _recorded(pg) == _shipped()
    assert (
        await pg.conn.fetchval(
            f'SELECT last_seq FROM "{pg.schema}".interactions WHERE interaction_id = $1', "i1"
        )
        == 7
    )
    assert await pg.conn.fetchval(f'SELECT flows FROM "{pg.schema}".workers') == ["f"]


async def test_a_fresh_schema_gets_every_version(pg: Pg) -> None:
    """An empty database is created by applying every shipped file, each recorded with its checksum (docs/engineering.md#sql-files)."""
    applied = await migrate(pg.conn, pg.schema)
    assert applied == [v for v, _ in _shipped()]
    assert await _recorded(pg) == _shipped()
    checksums = await pg.conn.fetch(f'SELECT checksum FROM "{pg.schema}".schema_migrations ORDER BY version')
    assert [r["checksum"] for r in checksums] == [m.checksum for m in migrations()]


async def test_a_second_start_applies_nothing(pg: Pg) -> None:
    """An applied migration is never run again: the next start finds nothing to do (docs/engineering.md#sql-files)."""
    await migrate(pg.conn, pg.schema)
    assert await migrate(pg.conn, pg.schema) == []
    assert await _recorded(pg) == _shipped()


async def test_a_new_file_is_applied_once(pg: Pg, monkeypatch: pytest.MonkeyPatch) -> None:
    """A release's new numbered file runs at the next start, once, and is recorded (docs/engineering.md#sql-files)."""
    await migrate(pg.conn, pg.schema)
    base = sql_files()
    newer = len(base) + 1
    # Not idempotent on purpose: a second run would fail, so it proves the file runs only once.
    added = (f"{newer:04d}_counter.sql", "CREATE TABLE counter (n integer); INSERT INTO counter VALUES (1);")
    monkeypatch.setattr(db, "sql_files", lambda: [*base, added])

    assert await migrate(pg.conn, pg.schema) == [newer]
    assert await migrate(pg.conn, pg.schema) == []
    assert await pg.conn.fetchval(f'SELECT count(*) FROM "{pg.schema}".counter') == 1
    assert (await _recorded(pg))[-1] == (newer, added[0])


async def test_a_failing_migration_records_nothing_and_changes_nothing(
    pg: Pg, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration commits together with its version row, so one that fails leaves neither (docs/engineering.md#sql-files)."""
    await migrate(pg.conn, pg.schema)
    base = sql_files()
    broken = (f"{len(base) + 1:04d}_broken.sql", "CREATE TABLE half (n integer); SELECT 1/0;")
    monkeypatch.setattr(db, "sql_files", lambda: [*base, broken])

    with pytest.raises(asyncpg.DivisionByZeroError):
        await migrate(pg.conn, pg.schema)
    assert await _recorded(pg) == _shipped()[: len(base)]
    assert await pg.conn.fetchval("SELECT to_regclass($1)", f"{pg.schema}.half") is None


async def test_an_edited_applied_file_refuses_to_start(pg: Pg, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shipped migration edited after it was applied stops the start, naming the file (docs/engineering.md#sql-files)."""
    await migrate(pg.conn, pg.schema)
    files = sql_files()
    name, text = files[4]
    files[4] = (name, text + "\n-- a later edit\n")
    monkeypatch.setattr(db, "sql_files", lambda: files)

    with pytest.raises(SettingsError) as refused:
        await migrate(pg.conn, pg.schema)
    assert str(refused.value).startswith(f"migration {name} changed after it was applied (checksum ")
    assert str(refused.value).endswith(
        "an applied migration is never edited; put the change in a new numbered file"
    )


async def test_a_schema_a_newer_release_migrated_refuses_to_start(pg: Pg) -> None:
    """A database recording a version this build does not ship is left alone and the start refused (docs/engineering.md#sql-files)."""
    await migrate(pg.conn, pg.schema)
    newest = migrations()[-1].version
    await pg.conn.execute(
        f'INSERT INTO "{pg.schema}".schema_migrations (version, name, checksum) VALUES ($1, $2, $3)',
        newest + 3,
        f"{newest + 3:04d}_future.sql",
        "0" * 64,
    )

    with pytest.raises(SettingsError) as refused:
        await migrate(pg.conn, pg.schema)
    assert str(refused.value) == (
        f"the database schema is at version {newest + 3}, newer than this build's {newest}: "
        "run a Layby release at least as new"
    )


async def test_rebuilding_the_projections_leaves_the_versions_alone(pg: Pg) -> None:
    """``layby projections rebuild`` drops and recreates the read models without touching the version table (docs/engineering.md#sql-files)."""
    await migrate(pg.conn, pg.schema)
    await pg.conn.execute(
        f'INSERT INTO "{pg.schema}".workers (worker_id, identity, flows) VALUES ($1, $2, $3)', "w", "o", []
    )
    async with pg.conn.transaction():
        await pg.conn.execute(f'SET LOCAL search_path TO "{pg.schema}"')
        await recreate_projection_tables(pg.conn)

    assert await migrate(pg.conn, pg.schema) == []
    assert await _recorded(pg) == _shipped()
    assert await pg.conn.fetchval(f'SELECT count(*) FROM "{pg.schema}".workers') == 1
    assert (
        await pg.conn.fetchval(f'SELECT count(*) FROM "{pg.schema}".runs WHERE resumed_interactions IS NULL')
        == 0
    )
