"""What only the in-memory event store can show: time moved by hand and its own limits.

The rules it shares with JetStream are in tests/integration/test_eventstore_behaviour.py; these
tests move a ``ManualClock`` past the duplicate window and the streams' max ages, which a test
against NATS could only wait for.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from layby_contracts.errors import Conflict, Transient
from layby_contracts.events import InteractionAnswered, RunStarted
from layby_contracts.subjects import Names
from layby_domain.clock import ManualClock
from layby_server.store.eventstore import DUPLICATE_WINDOW
from layby_server.store.memstore import MemoryEventStore
from layby_server.store.streams import CONTINUATION_MAX_AGE

pytestmark = pytest.mark.unit

START = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def started(run_id: str = "a") -> RunStarted:
    return RunStarted(run_id=run_id, flow="f", identity="alice", started_at=START)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def log(clock: ManualClock) -> MemoryEventStore:
    return MemoryEventStore(Names("mem"), clock=clock, idle_ttl_seconds=60, media_retention_seconds=600)


async def test_a_msg_id_is_stored_again_once_the_duplicate_window_passed(
    log: MemoryEventStore, clock: ManualClock
) -> None:
    """De-duplication lasts the events stream's duplicate window, counted from the first store."""
    subject = log.names.run("a")
    assert await log.append(subject, started(), msg_id="m1", expected_seq=None) == 1
    clock.advance(DUPLICATE_WINDOW.total_seconds() - 1)
    assert await log.append(subject, started(), msg_id="m1", expected_seq=None) == 1
    clock.advance(1)  # the duplicate above did not restart the window
    assert await log.append(subject, started(), msg_id="m1", expected_seq=None) == 2


async def test_dedupe_first_follows_nats_2_9(clock: ManualClock) -> None:
    """With dedupe_first the msg_id is checked before the expected sequence, as NATS 2.9 does."""
    log = MemoryEventStore(Names("old"), clock=clock, dedupe_first=True)
    subject = log.names.run("a")
    first = await log.append(subject, started(), msg_id="m1", expected_seq=0)
    assert await log.append(subject, started(), msg_id="m1", expected_seq=0) == first
    with pytest.raises(Conflict, match="duplicate of an earlier append"):
        await log.append(subject, started(), msg_id="m1", expected_seq=5)
    assert await log.bounds() == (1, 1)


async def test_secrets_expire_after_the_idle_ttl(log: MemoryEventStore, clock: ManualClock) -> None:
    """The secrets stream's max age is the idle TTL."""
    await log.put_secret("i", "r", b'"x"')
    clock.advance(59)
    assert await log.get_secret("i", "r") == b'"x"'
    clock.advance(1)
    assert await log.get_secret("i", "r") is None


async def test_media_expires_after_its_retention(log: MemoryEventStore, clock: ManualClock) -> None:
    """The media stream keeps an image for the retention and reports when it was stored."""
    await log.put_media("m", "image/png", b"png")
    clock.advance(599)
    assert await log.get_media("m") == ("image/png", b"png", START)
    clock.advance(1)
    assert await log.get_media("m") is None
    await log.put_media("m", "image/gif", b"gif")  # the duplicate window passed long ago
    assert await log.get_media("m") == ("image/gif", b"gif", START + timedelta(seconds=600))


async def test_an_expired_continuation_frees_its_subject(log: MemoryEventStore, clock: ManualClock) -> None:
    """After 30 days a continuation is gone, and its subject is empty again."""
    subject = log.names.continuation("f", "r", 1)
    assert await log.publish_once(subject, b"{}", msg_id="c1")
    clock.advance(CONTINUATION_MAX_AGE.total_seconds() - 1)
    assert not await log.publish_once(subject, b"{}", msg_id="c2")
    clock.advance(1)
    assert await log.publish_once(subject, b"{}", msg_id="c3")


async def test_tickets_outlive_their_expiry_in_the_stream(log: MemoryEventStore, clock: ManualClock) -> None:
    """The tickets stream has no max age: an expired ticket is still read (with its expiry) and still taken."""
    expires = START + timedelta(minutes=1)
    assert await log.put_ticket("h", "ix", expires, new=True)
    clock.advance(365 * 86400)
    assert await log.get_ticket("h") == ("ix", expires)
    assert not await log.put_ticket("h", "other", clock.now(), new=True)


async def test_a_bounded_log_and_ticket_stream_forget_after_their_max_age(clock: ManualClock) -> None:
    """LAYBY_EVENTS_MAX_AGE and LAYBY_TICKETS_MAX_AGE bound the event log and the tickets
    (docs/operations.md#retention); unset, both keep everything."""
    log = MemoryEventStore(
        Names("mem"), clock=clock, events_max_age_seconds=3600, tickets_max_age_seconds=600
    )
    subject = log.names.run("a")
    await log.append(subject, started(), msg_id="m1", expected_seq=0)
    assert await log.put_ticket("h", "ix", START, new=True)
    clock.advance(599)
    assert await log.get_ticket("h") == ("ix", START)
    clock.advance(1)
    assert await log.get_ticket("h") is None
    clock.advance(2999)
    assert await log.last(subject) is not None
    clock.advance(1)
    assert await log.last(subject) is None


async def test_a_subject_outside_every_stream_is_refused(log: MemoryEventStore) -> None:
    """Nothing stores a subject no stream listens on; reading it finds nothing."""
    with pytest.raises(Transient):
        await log.append("elsewhere.ev.run.a", started(), msg_id="m1", expected_seq=None)
    with pytest.raises(Transient):
        await log.put_ticket("a.b", "ix", START, new=True)  # tickets are one token deep
    assert await log.last("elsewhere.ev.run.a") is None
    assert await log.bounds() == (0, 0)


async def test_reads_decode_a_fresh_copy(log: MemoryEventStore) -> None:
    """Events are stored encoded: a reader changing what it read changes nothing stored."""
    subject = log.names.ix("i")
    answered = InteractionAnswered(
        interaction_id="i", group_id="g", answered_by="bob", answered_at=START, answer={"n": 1}
    )
    await log.append(subject, answered, msg_id="m1", expected_seq=None)
    read = await log.last(subject)
    assert read is not None
    read.event.answer["n"] = 2  # type: ignore[union-attr]
    again = await log.last(subject)
    assert again is not None
    assert again.event.answer == {"n": 1}  # type: ignore[union-attr]


async def test_provision_again_keeps_the_streams(log: MemoryEventStore) -> None:
    """Provisioning is safe to repeat: contents and sequences stay."""
    await log.append(log.names.run("a"), started(), msg_id="m1", expected_seq=None)
    await log.put_secret("i", "r", b"1")
    await log.provision()
    await log.provision()
    assert await log.bounds() == (1, 1)
    assert await log.get_secret("i", "r") == b"1"
    assert await log.append(log.names.run("b"), started("b"), msg_id="m2", expected_seq=0) == 2
