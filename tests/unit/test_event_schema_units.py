"""Which NATS servers keep stream metadata (docs/engineering.md#evolving-event-schemas)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from nats.aio.client import ServerVersion

from layby_contracts.events import EVENT_SCHEMA
from layby_server.store.eventschema import METADATA_KEY, keeps_metadata, stream_metadata


def _connected_to(version: str) -> Any:
    return SimpleNamespace(connected_server_version=ServerVersion(version))


@pytest.mark.parametrize(
    ("version", "kept"),
    [("2.9.10", False), ("2.9.25", False), ("2.10.0", True), ("2.15.1", True), ("3.0.0", True)],
)
def test_stream_metadata_is_written_only_where_the_server_keeps_it(version: str, kept: bool) -> None:
    """NATS 2.9 accepts stream metadata and silently drops it, so it is written only to 2.10 and later (docs/engineering.md#evolving-event-schemas)."""
    assert keeps_metadata(_connected_to(version)) is kept
    assert stream_metadata(_connected_to(version)) == ({METADATA_KEY: str(EVENT_SCHEMA)} if kept else None)
