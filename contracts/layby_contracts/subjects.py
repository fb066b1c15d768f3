"""Stream, subject and consumer names, in one place (docs/engineering.md#contracts-are-the-shared-vocabulary).

Every name is derived from a namespace so that tests (and several deployments sharing one
NATS account) never see each other's traffic. The default namespace is ``layby``.
"""

from __future__ import annotations

import zlib

import msgspec

STEP_SHARDS = 4
"""How many step streams a namespace has. A run's steps live in the stream its id hashes to, so
this never changes once a namespace holds runs (docs/decisions/0016-steps-on-their-own-streams.md)."""


def versioned(flow: str, version: int) -> str:
    """A flow's name in subjects and consumer names: version 1 is the bare name (as before
    versions existed), another is ``<flow>~<version>`` (``~`` is never part of a flow name)."""
    return flow if version == 1 else f"{flow}~{version}"


class Names(msgspec.Struct, frozen=True):
    """All JetStream and core-NATS names of one namespace."""

    namespace: str = "layby"

    @property
    def events_stream(self) -> str:
        """The event log: the source of truth for interactions."""
        return f"{self.namespace.upper()}_EVENTS"

    @property
    def secrets_stream(self) -> str:
        """Short-lived answers of sensitive questions; never projected, never replayed to clients."""
        return f"{self.namespace.upper()}_SECRETS"

    @property
    def meta_stream(self) -> str:
        """Facts about the log itself, one message per subject (the event-schema version)."""
        return f"{self.namespace.upper()}_META"

    @property
    def meta_all(self) -> str:
        return f"{self.namespace}.meta.*"

    @property
    def event_schema(self) -> str:
        """The event-schema version the log was last written with
        (docs/engineering.md#evolving-event-schemas)."""
        return f"{self.namespace}.meta.event_schema"

    @property
    def doctor_ping(self) -> str:
        """Core NATS: every service process answers a request here with a ``ServiceSeen`` (who it
        is, its clock, its protocol) — how ``layby doctor`` finds the services
        (docs/operations.md#layby-doctor)."""
        return f"{self.namespace}.doctor.ping"

    def doctor_probe(self, nonce: str) -> str:
        """Core NATS: a door that served ``GET /api/doctor/probe/{nonce}`` says so here, proving to
        ``layby doctor`` that the public base URL reaches this installation's doors."""
        return f"{self.namespace}.doctor.probe.{nonce}"

    @property
    def doctor_probe_all(self) -> str:
        return f"{self.namespace}.doctor.probe.*"

    @property
    def events_all(self) -> str:
        return f"{self.namespace}.ev.>"

    @property
    def ix_all(self) -> str:
        return f"{self.namespace}.ev.ix.*"

    def ix(self, interaction_id: str) -> str:
        """The subject of one interaction aggregate."""
        return f"{self.namespace}.ev.ix.{interaction_id}"

    def withdrawn(self, interaction_id: str) -> str:
        """Withdrawals of an interaction id by an asker that gave up before it was recorded."""
        return f"{self.namespace}.ev.wd.{interaction_id}"

    @property
    def media_stream(self) -> str:
        """Inline images of questions, stored by reference and served by the media door."""
        return f"{self.namespace.upper()}_MEDIA"

    def media(self, media_id: str) -> str:
        return f"{self.namespace}.media.{media_id}"

    @property
    def media_all(self) -> str:
        return f"{self.namespace}.media.*"

    @property
    def tickets_stream(self) -> str:
        """Callback tickets, by SHA-256 of the ticket: interaction id and expiry (never the ticket)."""
        return f"{self.namespace.upper()}_TICKETS"

    def ticket(self, ticket_hash: str) -> str:
        return f"{self.namespace}.ticket.{ticket_hash}"

    @property
    def tickets_all(self) -> str:
        return f"{self.namespace}.ticket.*"

    @property
    def messages_stream(self) -> str:
        """Inbound chat messages that answered nothing (late replies, bridged mismatches, ordinary
        messages to a bot): read on the messages door, kept for 30 days
        (docs/channels.md#inbound-messages)."""
        return f"{self.namespace.upper()}_MESSAGES"

    def messages(self, channel: str) -> str:
        return f"{self.namespace}.msg.{channel}"

    @property
    def messages_all(self) -> str:
        return f"{self.namespace}.msg.*"

    @property
    def chat_stream(self) -> str:
        """Where each channel question was posted, and which inbound events were taken: a key per
        subject, read by direct get (docs/channels.md#correlation)."""
        return f"{self.namespace.upper()}_CHAT"

    def chat_ref(self, key: str) -> str:
        """A posted message (``key``: the hash of channel, chat and message) -> its question."""
        return f"{self.namespace}.chat.ref.{key}"

    def chat_latest(self, key: str) -> str:
        """The last question posted in a chat (``key``: the hash of channel and chat)."""
        return f"{self.namespace}.chat.latest.{key}"

    def chat_sent(self, interaction_id: str, channel: str) -> str:
        """Where a question was posted on one channel (read to retract it)."""
        return f"{self.namespace}.chat.sent.{interaction_id}.{channel}"

    def chat_retracted(self, interaction_id: str, channel: str) -> str:
        """A question's retraction on one channel, claimed once before it is sent."""
        return f"{self.namespace}.chat.retracted.{interaction_id}.{channel}"

    def chat_seen(self, key: str) -> str:
        """An inbound event taken once (``key``: the hash of channel and the provider's event id)."""
        return f"{self.namespace}.chat.seen.{key}"

    def chat_said(self, key: str) -> str:
        """A conversation's reply posted into its chat once (``key``: the hash of channel and visit)."""
        return f"{self.namespace}.chat.said.{key}"

    @property
    def chat_all(self) -> str:
        return f"{self.namespace}.chat.>"

    def run(self, run_id: str) -> str:
        """The subject of one run aggregate (started, parked, resumed, finished, failed)."""
        return f"{self.namespace}.ev.run.{run_id}"

    @property
    def runs_all(self) -> str:
        return f"{self.namespace}.ev.run.*"

    def subject_index(self, subject: str) -> str:
        """The ids of every parked entry on a conversation or run-chain subject (docs/caller-asks.md)."""
        return f"{self.namespace}.ev.subj.{subject}"

    def door(self, name: str) -> str:
        """A door definition: saved, then saved again or deleted."""
        return f"{self.namespace}.ev.door.{name}"

    @property
    def doors_all(self) -> str:
        return f"{self.namespace}.ev.door.*"

    def ticks(self, name: str) -> str:
        """A schedule's ticks: each appended expecting the previous one, so one replica fires each."""
        return f"{self.namespace}.ev.tick.{name}"

    def visit(self, visit_id: str) -> str:
        """One visit: what it did, then the next outcome of what it resumed or started."""
        return f"{self.namespace}.ev.visit.{visit_id}"

    def conversation(self, subject: str) -> str:
        """The replies a conversation's receiver was told."""
        return f"{self.namespace}.ev.conv.{subject}"

    @property
    def conversations_all(self) -> str:
        return f"{self.namespace}.ev.conv.*"

    def steps_stream(self, shard: int) -> str:
        """Step stream ``shard``: the recorded steps of the runs whose ids hash to it."""
        return f"{self.namespace.upper()}_STEPS_{shard}"

    def steps_all(self, shard: int) -> str:
        return f"{self.namespace}.step.{shard}.>"

    @property
    def steps_streams(self) -> list[str]:
        return [self.steps_stream(shard) for shard in range(STEP_SHARDS)]

    @staticmethod
    def step_shard(run_id: str) -> int:
        return zlib.crc32(run_id.encode()) % STEP_SHARDS

    def steps_of_run(self, run_id: str) -> str:
        """Every generation's steps of one run (a wildcard over ``steps``)."""
        return f"{self.namespace}.step.{self.step_shard(run_id)}.{run_id}.*"

    def steps(self, run_id: str, generation: int) -> str:
        """The steps that execution ``generation`` of a run recorded (each message holds them all)."""
        return f"{self.namespace}.step.{self.step_shard(run_id)}.{run_id}.{generation}"

    @property
    def continuations_stream(self) -> str:
        """Continuations to run: one message per (run, generation), de-duplicated by key."""
        return f"{self.namespace.upper()}_CONTINUATIONS"

    def continuation(
        self, flow: str, run_id: str, generation: int, version: int = 1, moved_seq: int | None = None
    ) -> str:
        """One resume's subject. ``moved_seq``: the sequence of the move that published it again
        on another version (each move its own subject, so each is published once)."""
        tail = f"{run_id}.{generation}" if moved_seq is None else f"{run_id}.{generation}.m{moved_seq}"
        return f"{self.namespace}.cont.{versioned(flow, version)}.{tail}"

    def continuations_of(self, flow: str, version: int = 1) -> str:
        return f"{self.namespace}.cont.{versioned(flow, version)}.>"

    @property
    def continuations_all(self) -> str:
        return f"{self.namespace}.cont.>"

    def secret(self, interaction_id: str, ref: str) -> str:
        return f"{self.namespace}.secret.{interaction_id}.{ref}"

    @property
    def secrets_all(self) -> str:
        return f"{self.namespace}.secret.>"

    def wake(self, interaction_id: str, waiter: str | None = None) -> str:
        """Core-NATS subject on which a blocked asker waits.

        A client that asks often names a ``waiter`` and holds one subscription on
        ``wake_all(waiter)`` instead of one per question.
        """
        if waiter:
            return f"{self.namespace}.wake.{waiter}.{interaction_id}"
        return f"{self.namespace}.wake.{interaction_id}"

    def wake_all(self, waiter: str) -> str:
        return f"{self.namespace}.wake.{waiter}.*"

    @property
    def cmd_ask(self) -> str:
        return f"{self.namespace}.cmd.ask"

    @property
    def cmd_prune(self) -> str:
        return f"{self.namespace}.cmd.prune"

    @property
    def cmd_door(self) -> str:
        """Door and parked-entry commands (save, delete, visit, the generic tools), answered by the
        ask service."""
        return f"{self.namespace}.cmd.door"

    @property
    def cmd_notify(self) -> str:
        """One-way notifications (``cmd.notify.v1``), answered by the ask service."""
        return f"{self.namespace}.cmd.notify"

    @property
    def feed_stream(self) -> str:
        """The notification feed (docs/notifications.md#the-feed): one subject for the shared feed
        and one per identity, each kept to its newest ``INTERACTIONS_NOTIFICATIONS_FEED_MAX``."""
        return f"{self.namespace.upper()}_FEED"

    @property
    def feed_all(self) -> str:
        return f"{self.namespace}.feed.>"

    @property
    def feed_shared(self) -> str:
        """The shared feed, read by unrestricted identities."""
        return f"{self.namespace}.feed.all"

    def feed_identity(self, key: str) -> str:
        """One identity's own feed (``key``: the hash of the identity)."""
        return f"{self.namespace}.feed.id.{key}"

    @property
    def webhooks_stream(self) -> str:
        """Delivery attempts of signed webhooks out, one subject per interaction (docs/webhooks.md)."""
        return f"{self.namespace.upper()}_WEBHOOKS"

    def webhook(self, interaction_id: str) -> str:
        return f"{self.namespace}.webhook.{interaction_id}"

    @property
    def webhooks_all(self) -> str:
        return f"{self.namespace}.webhook.*"

    @property
    def cmd_run(self) -> str:
        """Run commands (start, park, end), answered by the ask service."""
        return f"{self.namespace}.cmd.run"

    def flow_durable(self, flow: str, version: int = 1) -> str:
        """The durable consumer shared by every worker that hosts ``version`` of ``flow``."""
        return f"{self.namespace}-flow-{versioned(flow, version)}"

    def durable(self, role: str) -> str:
        """Durable consumer name of a role (shared by that role's replicas)."""
        return f"{self.namespace}-{role}"
