"""PostgreSQL: the pool, and migrations applied at start-up (docs/engineering.md#sql-files)."""

from __future__ import annotations

from importlib import resources

import asyncpg

PROJECTION_TABLES = ("interactions", "projector_checkpoints", "runs", "doors", "parked_entries")
PROJECTION_FILES = (
    "0001_projections.sql",
    "0003_runs.sql",
    "0004_run_operations.sql",
    "0006_done.sql",
    "0007_doors.sql",
    "0009_parked_entries.sql",
    "0011_runs_resumed.sql",
)
_MIGRATION_LOCK = 0x1A7B7_0001


def sql_files() -> list[tuple[str, str]]:
    """The numbered SQL files shipped with the package, in order."""
    root = resources.files("layby_server") / "sql"
    files = sorted((p for p in root.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name, p.read_text(encoding="utf-8")) for p in files]


def projection_sql() -> str:
    files = dict(sql_files())
    return "\n".join(files[name] for name in PROJECTION_FILES)


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def create_pool(dsn: str, schema: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """A pool whose connections see ``schema`` first; the schema and tables exist on return."""
    bootstrap = await asyncpg.connect(dsn)
    try:
        await migrate(bootstrap, schema)
    finally:
        await bootstrap.close()

    # A startup parameter, not a SET: the pool's RESET ALL on release keeps it.
    pool = await asyncpg.create_pool(
        dsn, min_size=min_size, max_size=max_size, server_settings={"search_path": schema}
    )
    assert pool is not None
    return pool


async def migrate(conn: asyncpg.Connection, schema: str) -> None:
    """Apply every SQL file (each is idempotent) under an advisory lock, so replicas may race."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote_ident(schema)}")
        await conn.execute(f"SET LOCAL search_path TO {_quote_ident(schema)}")
        for _name, text in sql_files():
            await conn.execute(text)
