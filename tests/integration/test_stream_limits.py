"""Who owns a stream's limits (docs/operations.md#who-owns-a-limit), against the real NATS.

Every service start provisions the streams through ``open_resources``; these tests change a
limit by hand between two starts, as an operator with ``nats stream edit`` would.
"""

from __future__ import annotations

import dataclasses

import pytest

from layby_server.service import open_resources
from layby_server.settings import Settings, load_settings
from layby_server.store.eventstore import EventStore

pytestmark = pytest.mark.integration

DAY = 86400.0


async def _edit(store: EventStore, stream: str, **limits: float) -> None:
    """Change a stream's limits by hand, as ``nats stream edit`` does."""
    info = await store.js.stream_info(stream)
    await store.js.update_stream(dataclasses.replace(info.config, **limits))


async def _limits(store: EventStore, stream: str) -> tuple[float, int]:
    config = (await store.js.stream_info(stream)).config
    return float(config.max_age or 0), int(config.max_bytes or -1)


def _with(settings: Settings, env: dict[str, str]) -> Settings:
    """The test's settings as a service started with ``env`` set would read them."""
    base = {
        "LAYBY_NATS_URL": settings.nats_url or "",
        "LAYBY_NAMESPACE": settings.namespace,
        "LAYBY_SECRETS_KEY": settings.secrets_key or "",
    }
    return load_settings({**base, **env})


async def test_a_new_stream_gets_the_defaults_and_a_hand_made_change_survives_a_restart(
    settings: Settings, store: EventStore
) -> None:
    """A stream Layby creates gets its limits from code; a limit an operator changes by hand is
    kept by the next start when its variable is not set."""
    names = settings.names
    assert await _limits(store, names.events_stream) == (0.0, -1)  # the log keeps everything
    assert (await _limits(store, names.secrets_stream))[0] == pytest.approx(DAY)
    await _edit(store, names.events_stream, max_age=400 * DAY, max_bytes=10**9)
    await _edit(store, names.secrets_stream, max_age=2 * DAY)
    async with open_resources(_with(settings, {}), name="sweeper", database=False):
        pass
    assert await _limits(store, names.events_stream) == (pytest.approx(400 * DAY), 10**9)
    assert (await _limits(store, names.secrets_stream))[0] == pytest.approx(2 * DAY)


async def test_a_limit_whose_variable_is_set_is_written_at_every_start(
    settings: Settings, store: EventStore
) -> None:
    """When its variable is set, Layby owns the limit: a hand-made change is put back at the next
    start, and ``forever`` removes a hand-set bound."""
    names = settings.names
    bounded = {"LAYBY_EVENTS_MAX_AGE": "400d", "LAYBY_CHECKPOINT_RETENTION": "365d"}
    async with open_resources(_with(settings, bounded), name="sweeper", database=False):
        pass
    assert await _limits(store, names.events_stream) == (pytest.approx(400 * DAY), -1)
    await _edit(store, names.events_stream, max_age=3 * DAY)
    await _edit(store, names.tickets_stream, max_age=3 * DAY)
    async with open_resources(_with(settings, bounded), name="sweeper", database=False):
        pass
    assert await _limits(store, names.events_stream) == (pytest.approx(400 * DAY), -1)
    assert (await _limits(store, names.tickets_stream))[0] == pytest.approx(3 * DAY)  # not owned
    await _edit(store, names.events_stream, max_bytes=10**9)
    env = {
        "LAYBY_EVENTS_MAX_AGE": "forever",
        "LAYBY_EVENTS_MAX_BYTES": "forever",
        "LAYBY_TICKETS_MAX_AGE": "",
    }
    async with open_resources(_with(settings, env), name="sweeper", database=False):
        pass
    assert await _limits(store, names.events_stream) == (0.0, -1)
    assert (await _limits(store, names.tickets_stream))[0] == pytest.approx(3 * DAY)  # empty = unset
