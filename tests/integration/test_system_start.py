"""The test system's own start-up (tests/conftest.py): a start that fails says why and leaves
nothing running."""

from __future__ import annotations

import socket

import msgspec
import pytest

from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import start_system

pytestmark = pytest.mark.integration


async def test_a_door_whose_port_is_taken_fails_the_start_instead_of_exiting_the_process(
    settings: Settings, store: EventStore
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(
            RuntimeError, match=f"door stopped during start-up.*could not start on port {port}"
        ):
            await start_system(msgspec.structs.replace(settings, http_port=port))
