"""The door's asked-event cache (services/door/cache.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from layby_contracts.events import InteractionAnswered
from layby_server.store.eventstore import Stored
from layby_services.door.cache import AskedCache
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def asked(iid: str, seq: int) -> Stored:
    ev = interaction_asked(iid, NOW)
    return Stored(seq=seq, event=ev)


def test_asked_events_are_kept_and_resolutions_drop_them() -> None:
    """An asked event is cached with its sequence; its answer removes it."""
    cache = AskedCache()
    cache.observe([asked("a", 1), asked("b", 2)])
    hit = cache.get("a")
    assert hit is not None
    assert hit.seq == 1
    done = InteractionAnswered(
        interaction_id="a", group_id="g", answered_by="ops", answered_at=NOW, answer="x"
    )
    cache.observe([Stored(seq=3, event=done)])
    assert cache.get("a") is None
    assert cache.get("b") is not None


def test_the_cache_is_bounded_and_forgets_the_oldest() -> None:
    """The cache never grows past its bound; the oldest entries go first."""
    cache = AskedCache(max_entries=3)
    cache.observe([asked(str(i), i) for i in range(5)])
    assert len(cache) == 3
    assert cache.get("0") is None
    assert cache.get("4") is not None
