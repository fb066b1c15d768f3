"""The event-schema version recorded with the log and checked at start (docs/engineering.md#evolving-event-schemas)."""

from __future__ import annotations

import pytest

from layby.connection import connect_nats
from layby.settings import SettingsError
from layby_contracts.events import EVENT_SCHEMA
from layby_server.settings import Settings
from layby_server.store import eventschema
from layby_server.store.eventstore import EventStore

pytestmark = pytest.mark.integration


async def _recorded(store: EventStore) -> int:
    raw = await store.js.get_last_msg(store.names.meta_stream, store.names.event_schema)
    assert raw.data is not None
    return int(raw.data)


async def _fresh_store(settings: Settings) -> EventStore:
    assert settings.nats_url
    return EventStore(await connect_nats(settings.nats_url, name="test-start"), settings.names)


async def test_a_start_records_this_builds_event_schema(store: EventStore) -> None:
    """Provisioning records the build's event-schema version, and, where the server keeps stream metadata, on the event stream too (docs/engineering.md#evolving-event-schemas)."""
    assert await _recorded(store) == EVENT_SCHEMA
    info = await store.js.stream_info(store.names.events_stream)
    if eventschema.keeps_metadata(store.nc):
        assert (info.config.metadata or {})[eventschema.METADATA_KEY] == str(EVENT_SCHEMA)
    else:
        assert eventschema.METADATA_KEY not in (info.config.metadata or {})


async def test_a_second_start_writes_nothing(store: EventStore, settings: Settings) -> None:
    """A start that finds its own version recorded leaves the record as it is (docs/engineering.md#evolving-event-schemas)."""
    before = await store.js.get_last_msg(store.names.meta_stream, store.names.event_schema)
    again = await _fresh_store(settings)
    try:
        await again.provision()
    finally:
        await again.nc.close()
    after = await store.js.get_last_msg(store.names.meta_stream, store.names.event_schema)
    assert after.seq == before.seq


@pytest.mark.parametrize("metadata", [False, True], ids=["record-as-on-nats-2.9", "stream-metadata"])
async def test_a_log_written_by_a_newer_event_schema_refuses_to_start(
    store: EventStore, settings: Settings, metadata: bool
) -> None:
    """A build whose event schema is older than the one the log records refuses to start, naming both versions (docs/engineering.md#evolving-event-schemas)."""
    newer = EVENT_SCHEMA + 1
    if metadata:
        if not eventschema.keeps_metadata(store.nc):
            pytest.skip("this NATS server keeps no stream metadata (2.9): the record case covers it")
        # A newer build on NATS 2.10+: only the stream's metadata says so yet.
        info = await store.js.stream_info(store.names.events_stream)
        config = info.config
        config.metadata = {**(config.metadata or {}), eventschema.METADATA_KEY: str(newer)}
        await store.js.update_stream(config)
    else:
        # What a newer build writes on every server, and all it can write on NATS 2.9.
        await store.js.publish(store.names.event_schema, str(newer).encode())

    older = await _fresh_store(settings)
    try:
        with pytest.raises(SettingsError) as refused:
            await older.provision()
    finally:
        await older.nc.close()
    assert str(refused.value) == (
        f"the event log {store.names.events_stream} was written with event schema {newer}, newer than "
        f"this build's {EVENT_SCHEMA}: run a Layby release at least as new"
    )
    info = await store.js.stream_info(store.names.events_stream)
    if metadata:  # the refusing start changed nothing: the newer build's mark stays
        assert (info.config.metadata or {})[eventschema.METADATA_KEY] == str(newer)


async def test_an_older_record_is_raised_to_this_build(store: EventStore, settings: Settings) -> None:
    """A log recorded by an older event schema is marked with this build's version at start (docs/engineering.md#evolving-event-schemas)."""
    await store.js.publish(store.names.event_schema, str(EVENT_SCHEMA - 1).encode())
    again = await _fresh_store(settings)
    try:
        await again.provision()
    finally:
        await again.nc.close()
    assert await _recorded(store) == EVENT_SCHEMA
