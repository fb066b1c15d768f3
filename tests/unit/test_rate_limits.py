"""Rate limits: fixed windows per client address per door family (docs/doors/common.md#rate-limits)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from layby_domain.clock import ManualClock
from layby_services.door.ratelimit import RateLimiter, family_of

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)  # on a minute boundary


def test_the_callback_family_allows_ten_per_ten_seconds_then_says_when() -> None:
    """The 11th callback request in a 10 s window is refused until that window ends."""
    clock = ManualClock(T0)
    limiter = RateLimiter(clock)
    assert [limiter.hit("callback", "10.0.0.1") for _ in range(10)] == [None] * 10
    clock.advance(3)
    assert limiter.hit("callback", "10.0.0.1") == pytest.approx(7)
    assert limiter.hit("callback", "10.0.0.2") is None  # per client address
    assert limiter.hit("media", "10.0.0.1") is None  # per family
    clock.advance(7)
    assert limiter.hit("callback", "10.0.0.1") is None


def test_other_families_allow_600_a_minute_even_within_the_ten_second_limit() -> None:
    """120 in each of five 10 s windows uses the minute's 600: the sixth window is refused until
    the minute ends, although its own 10 s window is empty."""
    clock = ManualClock(T0)
    limiter = RateLimiter(clock)
    for _ in range(5):
        assert all(limiter.hit("runs", "c") is None for _ in range(120))
        clock.advance(10)
    assert limiter.hit("runs", "c") == pytest.approx(10)
    clock.advance(10)
    assert limiter.hit("runs", "c") is None


def test_other_families_allow_120_per_ten_seconds() -> None:
    """The default limits: 120 per 10 s (and 600 a minute)."""
    clock = ManualClock(T0)
    limiter = RateLimiter(clock)
    assert all(limiter.hit("interactions", "c") is None for _ in range(120))
    assert limiter.hit("interactions", "c") == pytest.approx(10)


def test_health_probes_are_never_limited_and_paths_map_to_their_door() -> None:
    """/healthz and /readyz are no family; each door's paths are its own family."""
    assert family_of("/healthz") is None and family_of("/readyz") is None
    assert family_of("/api/interactions/callback/abc") == "callback"
    assert family_of("/api/interactions/media/abc") == "media"
    assert family_of("/api/interactions/stream") == "stream"
    assert family_of("/api/interactions/x/answer") == "interactions"
    assert family_of("/api/runs/x") == "runs"
    assert family_of("/api/doors/x") == "doors"
    assert family_of("/") == "page"


def test_chat_providers_inbound_webhooks_are_never_limited_and_the_messages_stream_is_a_stream() -> None:
    """A provider posts from a few addresses at its users' pace: its signed webhook is not
    limited by address; the messages door counts with the streams."""
    assert family_of("/api/channels/slack/events") is None
    assert family_of("/api/messages/stream") == "stream"
