"""Every stream of a namespace, declared once: its subjects, its description, its limits, whether
its limits are tunable (``layby_server.store.limits``) and which service roles read it.

Provisioning (``EventStore.provision``), the backup's order (``layby_server.operations.backup``), the NATS
permissions of each role (``layby_server.operations.natsauth``) and the tests' clean-up all read this table,
so a new stream is one row here (docs/operations.md#streams).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from nats.js.api import DiscardPolicy

from layby_contracts.subjects import STEP_SHARDS, Names

CONTINUATION_MAX_AGE = timedelta(days=30)
CHAT_MAX_AGE = timedelta(days=90)
"""How long where a question was posted (and which inbound events were taken) is remembered: a
reply to an older message is an unmatched inbound message (docs/channels.md#correlation)."""
MESSAGES_MAX_AGE = timedelta(days=30)
"""How long inbound messages stay readable on the messages door (docs/channels.md#inbound-messages)."""
WEBHOOK_ATTEMPTS_MAX_AGE = timedelta(days=30)
"""How long the attempts of a webhook stay visible in the interaction view (docs/webhooks.md#attempts)."""

ALL_ROLES = frozenset({"ask", "door", "delivery", "resume", "sweeper", "admin"})


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits an installation sets (its settings), as the streams' rows read them."""

    events_max_age: float = 0.0
    """JetStream: 0 = no max age."""
    events_max_bytes: int = -1
    """JetStream: -1 = no cap."""
    idle_ttl: float = 86400.0
    media_retention: float = 30 * 86400.0
    tickets_max_age: float = 0.0
    feed_max: int = 1000
    """INTERACTIONS_NOTIFICATIONS_FEED_MAX: the feed stream's messages per subject (its ring)."""
    metadata: dict[str, str] | None = None
    """The event log's metadata (the event-schema version, ``layby_server.store.eventschema``); None
    on a server that keeps none."""


@dataclass(frozen=True, slots=True)
class Stream:
    """One kind of stream, named ``<key>_stream`` and ``<key>_all`` in ``Names`` (the steps: one
    per shard). ``role`` names the limits an operator may tune by hand ("" none)."""

    key: str
    description: str
    limits: Callable[[Limits], dict[str, Any]]
    readers: frozenset[str]
    role: str = ""

    def names(self, n: Names) -> list[tuple[str, str]]:
        """Its (name, subjects) pairs in a namespace."""
        if self.key == "steps":
            return [(n.steps_stream(shard), n.steps_all(shard)) for shard in range(STEP_SHARDS)]
        return [(getattr(n, f"{self.key}_stream"), getattr(n, f"{self.key}_all"))]


OLD = DiscardPolicy.OLD
STREAMS: tuple[Stream, ...] = (
    # The backup takes them in this order: the event log first, then the streams whose messages
    # the log refers to. Those are always written before the event that refers to them (a ticket,
    # an image, a sealed answer, a step record), so each one's later snapshot holds everything
    # the log's snapshot refers to (docs/operations.md#backup-and-restore).
    Stream(
        "events",
        "Layby event log: the source of truth",
        lambda lim: {
            "discard": OLD,
            "metadata": lim.metadata,
            "max_age": lim.events_max_age,
            "max_bytes": lim.events_max_bytes,
        },
        ALL_ROLES,
        role="events",
    ),
    Stream(
        "steps",
        "Layby recorded steps of runs, one subject per run generation",
        lambda lim: {"discard": OLD},
        frozenset({"ask", "door", "resume"}),
    ),
    # Sealed answers are read only by the services that hand them to their waiter (the resume
    # service's wake, the ask service's late-answer reply).
    Stream(
        "secrets",
        "Layby answers of sensitive questions, kept for the idle TTL only",
        lambda lim: {"max_age": lim.idle_ttl, "max_msgs_per_subject": 1},
        frozenset({"ask", "resume"}),
        role="secrets",
    ),
    Stream(
        "tickets",
        "Layby callback tickets by hash: interaction id and expiry",
        lambda lim: {"max_age": lim.tickets_max_age, "max_msgs_per_subject": 1},
        frozenset({"ask", "door", "delivery"}),
        role="tickets",
    ),
    Stream(
        "media",
        "Layby inline images of questions, served by reference",
        lambda lim: {"max_age": lim.media_retention, "max_msgs_per_subject": 1},
        frozenset({"door", "delivery"}),
        role="media",
    ),
    Stream(
        "chat",
        "Layby chat correlation: where each channel question was posted, inbound events taken",
        lambda lim: {"max_age": CHAT_MAX_AGE.total_seconds(), "max_msgs_per_subject": 1},
        frozenset({"door", "delivery"}),
    ),
    Stream(
        "messages",
        "Layby inbound chat messages that answered nothing (late, bridged, unmatched)",
        lambda lim: {"max_age": MESSAGES_MAX_AGE.total_seconds(), "discard": OLD},
        frozenset({"door"}),
    ),
    # The feed stream is the ring (docs/notifications.md#the-feed): always rewritten, since
    # INTERACTIONS_NOTIFICATIONS_FEED_MAX has a default every service applies.
    Stream(
        "feed",
        "Layby notification feed: the shared feed and each identity's, newest kept",
        lambda lim: {"max_msgs_per_subject": lim.feed_max, "discard": OLD},
        frozenset({"door"}),
    ),
    Stream(
        "webhooks",
        "Layby delivery attempts of signed webhooks out, one subject per interaction",
        lambda lim: {"max_age": WEBHOOK_ATTEMPTS_MAX_AGE.total_seconds(), "discard": OLD},
        frozenset({"door"}),
    ),
    Stream(
        "continuations",
        "Layby continuations: one per (run, generation), consumed by workers",
        lambda lim: {"max_age": CONTINUATION_MAX_AGE.total_seconds(), "max_msgs_per_subject": 1},
        frozenset({"ask", "resume", "admin"}),
    ),
    # Every role reads the meta stream: each start checks and records the event-schema version.
    Stream("meta", "Layby facts about the log", lambda lim: {"max_msgs_per_subject": 1}, ALL_ROLES),
)
EVENTS = STREAMS[0]


def stream_names(names: Names) -> list[str]:
    """Every stream of a namespace, in the table's (the backup's) order."""
    return [name for stream in STREAMS for name, _ in stream.names(names)]


def read_by(role: str, names: Names) -> list[str]:
    """The streams a service role reads."""
    return [name for stream in STREAMS if role in stream.readers for name, _ in stream.names(names)]


__all__ = [
    "ALL_ROLES",
    "CHAT_MAX_AGE",
    "CONTINUATION_MAX_AGE",
    "EVENTS",
    "MESSAGES_MAX_AGE",
    "STREAMS",
    "WEBHOOK_ATTEMPTS_MAX_AGE",
    "Limits",
    "Stream",
    "read_by",
    "stream_names",
]
