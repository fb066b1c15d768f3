"""The notification feed (docs/notifications.md#the-feed): the in-app record of notifications,
on the ``<NS>_FEED`` stream.

The stream keeps at most ``INTERACTIONS_NOTIFICATIONS_FEED_MAX`` messages per subject (its
``max_msgs_per_subject``, oldest dropped first), so the stream itself is the ring: nothing ever
trims it by hand. The shared feed is one subject (``<ns>.feed.all``), read by unrestricted
identities; each identity's own feed is ``<ns>.feed.id.<sha256 of the identity>``, read by that
identity when it is restricted. An identity's feed carries a rolling TTL
(``INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS``): once its newest entry is older than the TTL
the whole feed has expired and reads return nothing; the shared feed never expires. Time comes
from the service's injected clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta

import msgspec
import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from layby.connection import NO_MESSAGE_FOUND
from layby_contracts.subjects import Names
from layby_server.store.eventstore import unavailable_on_transport_error

READ_BATCH = 500
"""Messages fetched per pull while a feed is read (a feed holds at most the feed max)."""
READER_IDLE_SECONDS = 10.0
"""A reader's ephemeral consumer is removed by the server this long after its last use."""


class FeedEntry(msgspec.Struct, frozen=True, kw_only=True, tag="feed.notification.v1"):
    """One recorded notification: ``id`` minted by the server, the message, where it was sent
    (``recipient``), whose feed it is for (``audience``), when it was recorded."""

    id: str
    message: str
    recipient: str | None
    audience: str | None
    created_at: datetime


_enc = msgspec.json.Encoder()
_dec = msgspec.json.Decoder(FeedEntry)


def identity_key(identity: str) -> str:
    """The subject token of an identity's feed: its SHA-256 (an identity may hold any character)."""
    return hashlib.sha256(identity.encode()).hexdigest()


def live(newest_first: list[FeedEntry], ttl: timedelta) -> list[FeedEntry]:
    """The entries a rolling TTL kept: each entry lives while the next one came within the TTL,
    so the first gap of a TTL or more (newest to oldest) is where the feed once expired whole —
    what lies behind it is gone even though a later notification started the feed again."""
    for index in range(1, len(newest_first)):
        if newest_first[index - 1].created_at - newest_first[index].created_at >= ttl:
            return newest_first[:index]
    return newest_first


class Feed:
    """Record to and read the feed of one namespace."""

    def __init__(
        self,
        js: JetStreamContext,
        names: Names,
        *,
        max_entries: int,
        ttl_seconds: float,
        now: Callable[[], datetime],
    ) -> None:
        self._js = js
        self._names = names
        self._max = max_entries
        self._ttl = timedelta(seconds=ttl_seconds)
        self._now = now

    def subject_of(self, identity: str | None) -> str:
        """The shared feed (None), or one identity's own."""
        names = self._names
        return names.feed_shared if identity is None else names.feed_identity(identity_key(identity))

    async def record(self, entry: FeedEntry) -> None:
        """Append ``entry`` to the shared feed and, when it has an audience, to the audience's own
        feed (``Nats-Msg-Id`` absorbs a retry of either append)."""
        payload = _enc.encode(entry)
        targets = [self.subject_of(None)]
        if entry.audience is not None:
            targets.append(self.subject_of(entry.audience))
        with unavailable_on_transport_error("recording a notification"):
            for index, subject in enumerate(targets):
                await self._js.publish(
                    subject, payload, headers={"Nats-Msg-Id": f"feed-{entry.id}-{index}"}, timeout=10
                )

    async def read(self, identity: str | None) -> list[FeedEntry]:
        """The feed newest first: an identity's own (empty once its TTL has run out), or the
        shared one (``identity`` None)."""
        subject = self.subject_of(identity)
        stream = self._names.feed_stream
        with unavailable_on_transport_error("read of the notification feed"):
            try:
                last = await self._js.get_last_msg(stream, subject, direct=True)
            except nats.js.errors.NotFoundError:
                return []
            except nats.js.errors.APIError as exc:
                if exc.err_code == NO_MESSAGE_FOUND:
                    return []
                raise
            if identity is not None and self._expired(last.data or b""):
                return []
            entries = await self._all(stream, subject, int(last.seq or 0))
        entries.reverse()
        if identity is not None:
            entries = live(entries, self._ttl)
        return entries[: self._max]

    def _expired(self, newest: bytes) -> bool:
        try:
            entry = _dec.decode(newest)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False
        return entry.created_at + self._ttl <= self._now()

    async def _all(self, stream: str, subject: str, last_seq: int) -> list[FeedEntry]:
        """Every entry of ``subject`` up to ``last_seq``, oldest first, through a short-lived
        consumer filtered on the subject (a feed holds at most the feed max)."""
        sub = await self._js.pull_subscribe(
            subject,
            stream=stream,
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.ALL,
                ack_policy=AckPolicy.NONE,
                inactive_threshold=READER_IDLE_SECONDS,
                mem_storage=True,
            ),
        )
        entries: list[FeedEntry] = []
        try:
            while True:
                try:
                    batch = await sub.fetch(READ_BATCH, timeout=2)
                except nats.errors.TimeoutError:
                    break
                done = False
                for msg in batch:
                    meta = msg.metadata
                    try:
                        entries.append(_dec.decode(msg.data))
                    except (msgspec.DecodeError, msgspec.ValidationError):
                        pass  # not a feed entry: skipped, the feed stays readable
                    if meta.sequence.stream >= last_seq or meta.num_pending == 0:
                        done = True
                if done or not batch:
                    break
        finally:
            await sub.unsubscribe()
        return entries
