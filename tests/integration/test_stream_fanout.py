"""Many clients on one door's stream doors, over real sockets (docs/doors/stream.md#one-shared-tail,
docs/doors/stream.md#capacity). Clients are raw asyncio connections: an HTTP client object per
subscriber would measure the client, not the door."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, OPERATOR, System

pytestmark = pytest.mark.integration
Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _open(system: System, path: str, token: str = OPERATOR) -> Conn:
    """A stream request whose response headers have arrived (200)."""
    parts = urlsplit(system.url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head[:200]
    return reader, writer


@contextlib.asynccontextmanager
async def _many(system: System, n: int, path: str, token: str = OPERATOR) -> AsyncIterator[list[Conn]]:
    conns: list[Conn] = []
    try:
        for start in range(0, n, 200):  # in waves: the listen backlog is finite
            conns += await asyncio.gather(
                *(_open(system, path, token) for _ in range(start, min(n, start + 200)))
            )
        yield conns
    finally:
        for _, writer in conns:
            writer.close()


async def _ephemeral_consumers(store: EventStore, stream: str) -> int:
    """Consumers of ``stream`` that no service owns by name: the door's tails."""
    return sum(1 for c in await store.js.consumers_info(stream) if not c.config.durable_name)


@pytest.mark.settings(sse_keepalive_seconds=60)
async def test_two_thousand_subscribers_on_one_door_each_receive_the_event(
    system: System, store: EventStore
) -> None:
    """One door process serves 2,000 concurrent stream clients from one shared tail, and a
    question asked then reaches every one of them (docs/doors/stream.md#capacity)."""
    client = await system.sdk()
    async with _many(system, 2000, "/api/interactions/stream") as conns:
        assert await _ephemeral_consumers(store, store.names.events_stream) == 1
        task = asyncio.create_task(client.ask_user("to all of you", timeout=60))
        got = await asyncio.wait_for(
            asyncio.gather(*(reader.readuntil(b'"question":"to all of you"') for reader, _ in conns)), 60
        )
        assert len(got) == 2000
        assert all(b"event: interaction.add\n" in frame for frame in got)
    task.cancel()


async def test_no_stream_client_has_a_jetstream_consumer_of_its_own(
    system: System, store: EventStore
) -> None:
    """However many clients follow the stream doors — operators and restricted identities, every
    channel or one — each door process reads each stream through one consumer
    (docs/doors/stream.md#one-shared-tail)."""
    names = store.names
    before = await _ephemeral_consumers(store, names.events_stream)
    async with (
        _many(system, 20, "/api/interactions/stream"),
        _many(system, 20, "/api/interactions/stream", ALICE),
        _many(system, 10, "/api/messages/stream"),
        _many(system, 10, "/api/messages/stream?channel=bridge", ALICE),
    ):
        assert await _ephemeral_consumers(store, names.events_stream) == before + 1
        assert await _ephemeral_consumers(store, names.messages_stream) == 1
