"""PostgreSQL: the pool, and versioned forward-only migrations applied at start-up
(docs/engineering.md#sql-files)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

import asyncpg

from layby.connection import redacted
from layby.settings import SettingsError
from layby_contracts.errors import Permanent
from layby_server.observability.logs import get_logger

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

log = get_logger("layby_server.projection.db")

PROJECTION_TABLES = ("interactions", "projector_checkpoints", "runs", "doors", "parked_entries")
PROJECTION_FILES = (
    "0001_projections.sql",
    "0003_runs.sql",
    "0004_run_operations.sql",
    "0006_done.sql",
    "0007_doors.sql",
    "0009_parked_entries.sql",
    "0011_runs_resumed.sql",
    "0013_routing.sql",
    "0014_flow_versions.sql",
)
"""What ``layby projections rebuild`` re-runs after dropping ``PROJECTION_TABLES``: every file
that creates or alters a projection table, so these files stay idempotent for good."""
_MIGRATION_LOCK = 0x1A7B7_0001
_VERSION_DDL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer     PRIMARY KEY,
    name        text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    checksum    text        NOT NULL
)"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered SQL file: ``NNNN_name.sql`` is version NNNN."""

    version: int
    filename: str
    text: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def sql_files() -> list[tuple[str, str]]:
    """The numbered SQL files shipped with the package, in order."""
    root = resources.files("layby_server") / "sql"
    files = sorted((p for p in root.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name)
    return [(p.name, p.read_text(encoding="utf-8")) for p in files]


def migrations() -> list[Migration]:
    """The shipped files as migrations, in version order; two files of one number are a build error."""
    found: dict[int, Migration] = {}
    for filename, text in sql_files():
        version = int(filename.split("_", 1)[0])
        if version in found:
            raise RuntimeError(f"{filename} and {found[version].filename} share version {version}")
        found[version] = Migration(version, filename, text)
    return [found[v] for v in sorted(found)]


def projection_sql() -> str:
    files = dict(sql_files())
    return "\n".join(files[name] for name in PROJECTION_FILES)


async def recreate_projection_tables(conn: asyncpg.Connection[Any] | PoolConnectionProxy[Any]) -> None:
    """Drop the projection tables and create them again from their files (in the caller's
    transaction). The version table is left alone: the files are not re-applied migrations, and
    running them again changes nothing the other tables hold."""
    for table in PROJECTION_TABLES:
        await conn.execute(f"DROP TABLE IF EXISTS {table}")
    await conn.execute(projection_sql())


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


async def _no_session_state(conn: asyncpg.Connection) -> None:
    """What a connection needs before the pool hands it out again, beyond asyncpg's own rollback
    of a transaction left open: nothing. Layby leaves no session state on a pooled connection —
    no LISTEN, no cursor, no session SET (the search path is a startup parameter), and the
    projector gives back its session lock itself or closes the connection — so the default reset
    (unlock all, close all, unlisten, reset all: one more round trip on every release) is skipped
    (docs/performance.md#postgresql-round-trips)."""


async def create_pool(dsn: str, schema: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """A pool whose connections see ``schema`` first; the schema and tables exist on return."""
    bootstrap = await asyncpg.connect(dsn)
    try:
        await migrate(bootstrap, schema)
    finally:
        await bootstrap.close()

    # A startup parameter, not a SET: a connection keeps it for its whole life.
    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        server_settings={"search_path": schema},
        reset=_no_session_state,
    )
    assert pool is not None
    return pool


async def migrate(conn: asyncpg.Connection, schema: str) -> list[int]:
    """Apply, in order, each shipped migration the schema has not recorded; returns their versions.

    A session advisory lock (not a transaction's) is held throughout, so replicas starting
    together take turns while each migration commits on its own, together with its version row.
    Refuses (``SettingsError``) a schema a newer release migrated, and a shipped file edited
    after it was applied.
    """
    shipped = migrations()
    await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
    try:
        async with conn.transaction():
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote_ident(schema)}")
            await conn.execute(f"SET LOCAL search_path TO {_quote_ident(schema)}")
            # No version table but the tables: a schema from before versioning. Files 0001 to
            # 0011 shipped then, all idempotent, so running them once more and recording them
            # adopts it (docs/engineering.md#sql-files).
            adopting = await conn.fetchval(
                "SELECT to_regclass('schema_migrations') IS NULL AND to_regclass('interactions') IS NOT NULL"
            )
            await conn.execute(_VERSION_DDL)
            recorded = {
                r["version"]: r["checksum"]
                for r in await conn.fetch("SELECT version, checksum FROM schema_migrations")
            }
        _refuse_unknown(recorded, shipped)
        pending = [m for m in shipped if m.version not in recorded]
        if adopting:
            log.info("db.migrations.adopting", schema=schema, files=len(pending))
        for m in pending:
            async with conn.transaction():
                await conn.execute(f"SET LOCAL search_path TO {_quote_ident(schema)}")
                await conn.execute(m.text)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                    m.version,
                    m.filename,
                    m.checksum,
                )
            log.info("db.migration.applied", schema=schema, file=m.filename)
    finally:
        # A broken connection has released the lock already (it is the session's).
        with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
            await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
    return [m.version for m in pending]


def _refuse_unknown(recorded: dict[int, str], shipped: list[Migration]) -> None:
    """A recorded version this build does not ship, or one whose file changed, stops the start."""
    by_version = {m.version: m for m in shipped}
    newest = shipped[-1].version
    if recorded and max(recorded) > newest:
        raise SettingsError(
            f"the database schema is at version {max(recorded)}, newer than this build's {newest}: "
            "run a Layby release at least as new"
        )
    for version, checksum in sorted(recorded.items()):
        m = by_version.get(version)
        if m is None:
            raise SettingsError(
                f"the database schema records migration {version}, which this build does not ship: "
                "run the Layby release that migrated it"
            )
        if checksum != m.checksum:
            raise SettingsError(
                f"migration {m.filename} changed after it was applied (checksum {checksum[:12]} "
                f"recorded, {m.checksum[:12]} shipped): an applied migration is never edited; "
                "put the change in a new numbered file"
            )


async def open_pool(dsn: str, schema: str, *, max_size: int = 10) -> asyncpg.Pool:
    """The PostgreSQL pool, waiting (with backoff, one log line per step) while the database
    cannot be reached; a URL that can never work fails at once, naming the variable."""
    pause = 0.5
    while True:
        try:
            return await create_pool(dsn, schema, max_size=max_size)
        except SettingsError:
            raise  # the schema refused this build (docs/engineering.md#sql-files): not a URL problem
        except (ValueError, asyncpg.exceptions.ClientConfigurationError) as exc:
            raise Permanent(
                f"LAYBY_DATABASE_URL is not a usable PostgreSQL URL ({redacted(dsn)}): {exc}"
            ) from None
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            if isinstance(exc, asyncpg.InvalidPasswordError | asyncpg.InvalidAuthorizationSpecificationError):
                raise Permanent(
                    f"PostgreSQL at {redacted(dsn)} (LAYBY_DATABASE_URL) refused the login: {exc}"
                ) from None
            log.warning(
                "postgres.unreachable",
                variable="LAYBY_DATABASE_URL",
                address=redacted(dsn),
                error=f"{type(exc).__name__}: {exc}",
                retry_in=pause,
            )
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)
