"""The JetStream event store (docs/engineering.md#one-writer-per-aggregate,
docs/engineering.md#exactly-once-effects).

Streams are provisioned idempotently at start-up. Each aggregate has its own subject; an
append carries ``Nats-Msg-Id`` (server-side de-duplication of retries) and, for aggregates,
``Nats-Expected-Last-Subject-Sequence`` so the log decides every race. Only features present
in NATS 2.9 are used (see docs/decisions/0002-jetstream-durability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import nats
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import (
    PubAck,
    RawStreamMsg,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from layby.connection import NO_MESSAGE_FOUND, WRONG_LAST_SEQUENCE
from layby_contracts.errors import Conflict, Unavailable
from layby_contracts.events import Event, decode_event, encode_event
from layby_contracts.subjects import Names
from layby_contracts.webhooks import ATTEMPT_DECODER, WebhookAttempt
from layby_server.observability import tracing
from layby_server.store import eventschema
from layby_server.store.limits import Ownership, merge
from layby_server.store.streams import EVENTS, STREAMS, Limits

if TYPE_CHECKING:
    from layby_server.store.eventlog import EventLog
from layby_server.store.sealing import Sealer, open_secret, sealer_of

T = TypeVar("T")
STREAM_NOT_FOUND = 10059
DUPLICATE_WINDOW = timedelta(minutes=2)
TAKEN, FREE = b"taken", b"free"
ATTEMPT_SECONDS = 2.0
"""One try of a JetStream request: far past a healthy reply (milliseconds), short enough that a
request lost with a node (its leader killed, or paused) is sent again soon after a new leader is
elected (docs/reliability.md#leader-changes)."""
PATIENCE_SECONDS = 15.0
"""How long one store operation keeps trying across a leader election or a lost node before it
gives up with ``Unavailable`` (an election takes a few seconds)."""
PAUSE_SECONDS = (0.05, 0.5)
"""The first and the longest pause between two tries."""
TRIED_AGAIN = (
    nats.errors.TimeoutError,
    TimeoutError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)
"""What a try can meet while a stream has no leader or a node is gone: nothing was decided, the
same request may be sent again (an append carries its ``Nats-Msg-Id``, so a try that landed
unseen is recognised; see ``EventStore.append``)."""


@contextlib.contextmanager
def unavailable_on_transport_error(what: str) -> Iterator[None]:
    """The one place a NATS transport failure becomes ``Unavailable`` ("nothing was decided; try
    again"): a timeout, no responders, no stream answering (a leader election), a closed
    connection, or an API error the caller did not handle itself. Callers catch the API errors
    that mean something (a lost race, a missing message) inside this block."""
    try:
        yield
    except (nats.errors.Error, TimeoutError) as exc:
        detail = f"{exc}" if isinstance(exc, nats.js.errors.APIError) else type(exc).__name__
        raise Unavailable(f"{what} failed: {detail}") from exc


def changes(wanted: StreamConfig, existing: StreamConfig) -> list[str]:
    """The fields ``wanted`` sets that ``existing`` holds otherwise (metadata: the keys it sets;
    the server adds keys of its own)."""
    differ = []
    for item in dataclasses.fields(wanted):
        value = getattr(wanted, item.name)
        if value is None:
            continue
        held = getattr(existing, item.name)
        if item.name == "metadata":
            if any((held or {}).get(key) != v for key, v in value.items()):
                differ.append(item.name)
        elif value != held:
            differ.append(item.name)
    return differ


@dataclass(frozen=True, slots=True)
class Stored:
    """One event as read back from the log, with its stream sequence and, when tracing is on,
    the W3C trace context it was appended under (the reader's spans continue that trace)."""

    seq: int
    event: Event
    trace: tracing.Carrier | None = None
    delivered: int = 1
    """How many times a consumer has been handed this message (1 on the first delivery)."""


def _ignore(event: Event) -> None:
    """No one counts appends (a store opened outside a service, a test's)."""


class EventStore:
    def __init__(
        self,
        nc: NATS,
        names: Names,
        *,
        replicas: int = 1,
        idle_ttl_seconds: float = 86400.0,
        media_retention_seconds: float = 30 * 86400.0,
        events_max_age_seconds: float | None = None,
        events_max_bytes: int | None = None,
        tickets_max_age_seconds: float | None = None,
        owns: Ownership | None = None,
        sealer: Sealer | None = None,
        feed_max: int = 1000,
    ) -> None:
        self.sealer = sealer
        """Seals sensitive answers at rest (LAYBY_SECRETS_KEY); None: this process keeps none."""
        self.nc = nc
        self.js: JetStreamContext = nc.jetstream(timeout=10)
        self._jt: JetStreamContext = nc.jetstream(timeout=ATTEMPT_SECONDS)
        """For the requests this store tries again: each try waits ``ATTEMPT_SECONDS``."""
        self.patience = PATIENCE_SECONDS
        self.names = names
        self._replicas = replicas
        self.media_retention = media_retention_seconds
        self._limits = Limits(
            events_max_age=events_max_age_seconds or 0.0,
            events_max_bytes=events_max_bytes or -1,
            idle_ttl=idle_ttl_seconds,
            media_retention=media_retention_seconds,
            tickets_max_age=tickets_max_age_seconds or 0.0,
            feed_max=feed_max,
        )
        self._owns = owns or Ownership()
        """Which tunable limits this store rewrites on a stream that exists (layby_server.store.limits)."""
        self.on_appended: Callable[[Event], None] = _ignore
        """Called once for each event this store appended (the service's metrics count it)."""

    @property
    def replicated(self) -> bool:
        """Whether the event log has followers (a direct get may then lag its leader)."""
        return self._replicas > 1

    async def provision(self) -> None:
        """Create or update the streams; safe to run from every replica at every start. A log a
        newer build wrote is refused before anything is updated
        (docs/engineering.md#evolving-event-schemas). A tunable limit of a stream that exists is
        kept unless this store owns it (see ``layby_server.store.limits``), so an operator's change
        made by hand survives a restart."""
        await eventschema.check_before_provisioning(self)
        limits = dataclasses.replace(self._limits, metadata=eventschema.stream_metadata(self.nc))
        for stream in STREAMS:
            for name, subjects in stream.names(self.names):
                config = await self._ensure(
                    self._stream(name, subjects, stream.description, **stream.limits(limits)), stream.role
                )
                if stream is EVENTS:
                    # The event log's replica count is every other stream's.
                    self._replicas = int(config.num_replicas or 1)
        await eventschema.record(self)

    def _stream(self, name: str, subjects: str, description: str, **limits: Any) -> StreamConfig:
        """One Layby stream: file storage, limits retention, direct gets, the de-duplication
        window, this store's replica count, and the stream's own ``limits``."""
        return StreamConfig(
            name=name,
            subjects=[subjects],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            num_replicas=self._replicas,
            allow_direct=True,
            duplicate_window=DUPLICATE_WINDOW.total_seconds(),
            description=description,
            **limits,
        )

    async def _ensure(self, config: StreamConfig, role: str = "") -> StreamConfig:
        """Create the stream with ``config``, or update it keeping the limits it does not own;
        returns the configuration written."""
        assert config.name is not None
        try:
            info = await self.js.stream_info(config.name)
        except nats.js.errors.NotFoundError:
            try:
                await self.js.add_stream(config)
                return config
            except nats.js.errors.BadRequestError:
                info = await self.js.stream_info(config.name)  # another replica created it meanwhile
        config = merge(config, info.config, self._owns.owned(role))
        if not changes(config, info.config):
            # Every replica provisions at every start; on a cluster each update is a proposal
            # to the meta group, so one that changes nothing is not sent.
            return config
        await self.js.update_stream(config)
        return config

    async def append(self, subject: str, event: Event, *, msg_id: str, expected_seq: int | None) -> int:
        """Append one event; returns its stream sequence.

        Raises ``Conflict`` when ``expected_seq`` is no longer the subject's last sequence (a
        lost race: re-read and re-decide) and ``Unavailable`` when the server is unreachable.
        A try whose acknowledgement was lost (a leader killed, a timeout) is sent again with the
        same ``Nats-Msg-Id``; when the log then answers "duplicate" or "moved on", the subject
        is read from the leader, and an append found there with this id and these bytes is this
        one: it landed once, and is reported as appended, not as a lost race.
        """
        headers = {"Nats-Msg-Id": msg_id}
        if expected_seq is not None:
            headers["Nats-Expected-Last-Subject-Sequence"] = str(expected_seq)
        tracing.inject(headers)  # the appending span's context, for whoever reads the event
        data = encode_event(event)
        with unavailable_on_transport_error(f"append to {subject}"):
            ack, tries = await self._publish(subject, data, headers)
            if ack is None or (ack.duplicate and expected_seq):
                # Moved on, or de-duplicated on Nats-Msg-Id before the expected sequence was
                # checked (NATS 2.9): ours when an earlier try of this call landed unseen;
                # otherwise this append decided nothing.
                stream = self.stream_of(subject)
                after = expected_seq if ack is None else int(ack.seq) - 1
                seq = None
                if tries > 1 and stream is not None:
                    seq = await self._landed(stream, subject, msg_id, data, after)
                if seq is None:
                    raise Conflict(
                        f"{subject} moved on past sequence {expected_seq}"
                        if ack is None
                        else f"{subject}: duplicate of an earlier append"
                    )
                self.on_appended(event)
                return seq
        if not ack.duplicate:
            self.on_appended(event)  # durable now; a de-duplicated retry recorded nothing new
        elif expected_seq == 0 and await self._taken_by_another(subject, int(ack.seq), data):
            # NATS 2.9 de-duplicates before it checks an expected 0: the subject's first message
            # carries this id but another writer's bytes (two replicas firing one tick), so this
            # append decided nothing, as 2.15's wrong-last-sequence says.
            raise Conflict(f"{subject} moved on past sequence 0")
        return int(ack.seq)

    async def _taken_by_another(self, subject: str, seq: int, data: bytes) -> bool:
        """Whether message ``seq`` of the subject's stream is on ``subject`` with other bytes."""
        stream = self.stream_of(subject)
        if stream is None:
            return False
        raw = await self.found(lambda: self._jt.get_msg(stream, seq=seq))
        return raw is not None and raw.subject == subject and raw.data != data

    async def patiently(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, tried again on ``TRIED_AGAIN`` (no leader, a lost node) with growing
        pauses, for at most ``patience`` seconds; the last failure is raised after that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.patience
        pause, longest = PAUSE_SECONDS
        while True:
            try:
                return await attempt()
            except TRIED_AGAIN:
                if loop.time() + pause >= deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, longest)

    async def _put(self, subject: str, data: bytes, headers: dict[str, str] | None = None) -> PubAck:
        """One publish, tried ``patiently``."""
        return await self.patiently(
            lambda: self._jt.publish(subject, data, headers=headers, timeout=ATTEMPT_SECONDS)
        )

    async def _publish(self, subject: str, data: bytes, headers: dict[str, str]) -> tuple[PubAck | None, int]:
        """``_put``, and how many tries it took; no acknowledgement when the subject moved on
        past the expected sequence the headers name."""
        tries = 0

        async def once() -> PubAck:
            nonlocal tries
            tries += 1
            return await self._jt.publish(subject, data, headers=headers, timeout=ATTEMPT_SECONDS)

        try:
            return await self.patiently(once), tries
        except nats.js.errors.APIError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise
            return None, tries

    def stream_of(self, subject: str) -> str | None:
        """The stream that holds an appended subject (the event log, or a run's step shard)."""
        names = self.names
        if subject.startswith(f"{names.namespace}.ev."):
            return names.events_stream
        prefix = f"{names.namespace}.step."
        if subject.startswith(prefix):
            return names.steps_stream(int(subject[len(prefix) :].split(".", 1)[0]))
        return None

    async def _landed(
        self, stream: str, subject: str, msg_id: str, data: bytes, after: int | None
    ) -> int | None:
        """The sequence of this publish if the leader holds it (its id and bytes, the first
        message of ``subject`` after ``after``); None when what is there is another's."""
        raw = await self.found(
            lambda: self._jt.get_msg(stream, seq=(after or 0) + 1, subject=subject, next=True)
        )
        if raw is not None and (raw.headers or {}).get("Nats-Msg-Id") == msg_id and raw.data == data:
            return int(raw.seq or 0) or None
        return None

    async def last_steps(self, run_id: str, generation: int, *, leader: bool = False) -> Stored | None:
        """The last ``StepRecorded`` of a run's generation (it holds all the generation's steps)."""
        stream = self.names.steps_stream(self.names.step_shard(run_id))
        return await self.last(self.names.steps(run_id, generation), leader=leader, stream=stream)

    async def last(self, subject: str, *, leader: bool = False, stream: str | None = None) -> Stored | None:
        """The last event on a subject, or ``None`` when the subject is empty.

        By default this is a direct get, which any replica may serve (fast, possibly a moment
        stale on a cluster). Decisions never rest on it alone: they append with the read
        sequence expected, and after a lost race they re-read with ``leader=True``. An empty
        answer from a replica is asked of the leader again: a replica may not hold yet what was
        just acknowledged, and "not found" is not a stale answer any decision can correct
        (docs/reliability.md#reads-after-writes).
        """
        # A single-replica stream has no followers: its direct get is the leader's answer, and
        # it costs the server far less than the JetStream API's JSON form.
        stream = stream or self.names.events_stream
        if not leader or self._replicas == 1:
            raw = await self._last_seen(stream, subject)
        else:
            raw = await self._last_raw(stream, subject, direct=False)
        if raw is None:
            return None
        assert raw.data is not None
        assert raw.seq is not None
        return Stored(seq=int(raw.seq), event=decode_event(raw.data), trace=tracing.carrier_of(raw.headers))

    async def _last_seen(self, stream: str, subject: str) -> RawStreamMsg | None:
        """A subject's last message by direct get, asked of the leader again when a replica has
        none (it may not hold yet what was just acknowledged)."""
        raw = await self._last_raw(stream, subject, True)
        if raw is None and self._replicas > 1:
            raw = await self._last_raw(stream, subject, False)
        return raw

    async def _last_raw(self, stream: str, subject: str, direct: bool) -> RawStreamMsg | None:
        with unavailable_on_transport_error(f"read of {subject}"):
            return await self.found(lambda: self._jt.get_last_msg(stream, subject, direct=direct))

    async def found(self, read: Callable[[], Awaitable[RawStreamMsg]]) -> RawStreamMsg | None:
        """``read()`` tried ``patiently``; None when JetStream says there is no such message."""
        try:
            return await self.patiently(read)
        except nats.js.errors.NotFoundError:
            return None
        except nats.js.errors.APIError as exc:
            if exc.err_code == NO_MESSAGE_FOUND:
                return None
            raise

    async def first(self, subject: str) -> Stored | None:
        """The first event on a subject (for an interaction: its ``asked`` event), from the leader."""
        raw = await self.next_message(self.names.events_stream, subject, 1)
        if raw is None:
            return None
        assert raw.data is not None
        assert raw.seq is not None
        return Stored(seq=int(raw.seq), event=decode_event(raw.data), trace=tracing.carrier_of(raw.headers))

    async def events_on(self, subject: str, *, limit: int, stream: str | None = None) -> list[Stored]:
        """The first ``limit`` events on one subject of the event log (or of ``stream``; wildcards
        allowed), oldest first (one read each, from the leader: an interaction's subject holds a
        handful)."""
        found: list[Stored] = []
        seq = 1
        while len(found) < limit:
            raw = await self.next_message(stream or self.names.events_stream, subject, seq)
            if raw is None or raw.data is None or raw.seq is None:
                break
            found.append(Stored(seq=int(raw.seq), event=decode_event(raw.data)))
            seq = int(raw.seq) + 1
        return found

    async def next_message(self, stream: str, subject: str, seq: int) -> RawStreamMsg | None:
        """The first message of ``stream`` on ``subject`` (wildcards allowed) at or after ``seq``,
        or ``None`` when there is none. A replicated stream answers from its leader: a follower
        may not hold yet a message a consumer already delivered."""
        direct = self._replicas == 1
        with unavailable_on_transport_error(f"read of {stream}"):
            return await self.found(
                lambda: self._jt.get_msg(stream, seq=seq, subject=subject, next=True, direct=direct)
            )

    async def detect_replicas(self) -> None:
        """Read the event log's replica count (a client that did not provision the streams)."""
        info = await self.patiently(lambda: self._jt.stream_info(self.names.events_stream))
        self._replicas = int(info.config.num_replicas or 1)

    async def bounds(self, stream: str | None = None) -> tuple[int, int]:
        """(first, last) sequence of the event log (or of ``stream``)."""
        info = await self.patiently(lambda: self._jt.stream_info(stream or self.names.events_stream))
        return int(info.state.first_seq), int(info.state.last_seq)

    async def _put_if(
        self, stream: str, subject: str, payload: bytes, headers: dict[str, str], expected: str
    ) -> bool:
        """Publish ``payload`` only while ``subject``'s last sequence is ``expected``; False when it
        moved on. ``headers`` carry a ``Nats-Msg-Id``: a try that landed unseen and was sent
        again comes back as a duplicate (NATS 2.9) or as "moved on" (2.15), and is told apart
        from another writer's by its id and bytes, read from the leader (``_landed``)."""
        headers = {**headers, "Nats-Expected-Last-Subject-Sequence": expected}
        ack, tries = await self._publish(subject, payload, headers)
        if ack is not None and not ack.duplicate:
            return True
        if tries == 1:
            return False
        return await self._landed(stream, subject, headers["Nats-Msg-Id"], payload, int(expected)) is not None

    async def publish_once(self, subject: str, payload: bytes, *, msg_id: str) -> bool:
        """Publish to an empty subject of the continuations stream, at most once.

        ``Nats-Msg-Id`` absorbs a retry within the duplicate window, and the expected last
        subject sequence 0 absorbs one after it. Returns False when it was already there.
        """
        headers = {"Nats-Msg-Id": msg_id}
        tracing.inject(headers)
        with unavailable_on_transport_error(f"publish to {subject}"):
            return await self._put_if(self.names.continuations_stream, subject, payload, headers, "0")

    async def put_media(self, media_id: str, mime: str, payload: bytes) -> None:
        """Keep an inline image of a question, by reference (docs/asking.md#inline-images)."""
        with unavailable_on_transport_error("storing an inline image"):
            await self._put(
                self.names.media(media_id),
                payload,
                {"Content-Type": mime, "Nats-Msg-Id": f"media-{media_id}"},
            )

    async def get_media(self, media_id: str) -> tuple[str, bytes, datetime] | None:
        """(MIME type, bytes, stored at) of an inline image, or None when unknown or expired."""
        raw = await self._last_seen(self.names.media_stream, self.names.media(media_id))
        if raw is None:
            return None
        mime = (raw.headers or {}).get("Content-Type", "application/octet-stream")
        stored = raw.time or datetime.now(UTC)
        return mime, raw.data or b"", stored

    async def put_ticket(
        self, ticket_hash: str, interaction_id: str, expires_at: datetime, *, new: bool
    ) -> bool:
        """Record (``new``: only if the hash is unused) or refresh a ticket; False if it was taken."""
        # Each call's own id: a try that landed unseen is told from a hash in use (``_put_if``).
        headers = {"Nats-Msg-Id": f"ticket-{uuid.uuid4().hex}"}
        subject = self.names.ticket(ticket_hash)
        payload = f'{{"interaction_id":"{interaction_id}","expires_at":"{expires_at.isoformat()}"}}'.encode()
        with unavailable_on_transport_error("storing a ticket"):
            if new:
                return await self._put_if(self.names.tickets_stream, subject, payload, headers, "0")
            await self._put(subject, payload, headers)
        return True

    async def get_ticket(self, ticket_hash: str) -> tuple[str, datetime] | None:
        """(interaction id, expires at) of a ticket hash, or None."""
        raw = await self._last_seen(self.names.tickets_stream, self.names.ticket(ticket_hash))
        if raw is None:
            return None
        body = msgspec.json.decode(raw.data or b"{}")
        return body["interaction_id"], datetime.fromisoformat(body["expires_at"])

    async def put_chat(self, subject: str, value: dict[str, Any]) -> None:
        """Remember one chat correlation fact (a posted message, a chat's latest question)."""
        with unavailable_on_transport_error("storing a chat correlation"):
            await self._put(subject, msgspec.json.encode(value))

    async def get_chat(self, subject: str) -> dict[str, Any] | None:
        """A chat correlation fact, from a replica and then the leader (a fact just written may
        not have reached a replica yet)."""
        data = await self._last_data(self.names.chat_stream, subject, "read of a chat correlation")
        value = None if data is None else msgspec.json.decode(data or b"null")
        return value if isinstance(value, dict) else None

    async def _last_data(self, stream: str, subject: str, what: str) -> bytes | None:
        """The last message's bytes of ``subject`` (``_last_seen``); None when there is none."""
        with unavailable_on_transport_error(what):
            raw = await self._last_seen(stream, subject)
        return None if raw is None else raw.data or b""

    async def claim_once(self, subject: str) -> bool:
        """Take a claim on the chat stream once (an inbound event's ``chat_seen``, a conversation
        reply's ``chat_said``, a retraction's ``chat_retracted``): False when it was taken before.
        A claim released after a failure (``release``) can be taken again. The first attempt is one
        publish expecting an empty subject; only a subject already written is read."""
        expected = "0"
        with unavailable_on_transport_error("taking an inbound event"):
            for _ in range(2):
                # This claim's own id: a try that landed unseen is taken by us (``_put_if``).
                mine = {"Nats-Msg-Id": f"claim-{uuid.uuid4().hex}"}
                if await self._put_if(self.names.chat_stream, subject, TAKEN, mine, expected):
                    return True
                if expected != "0":
                    return False  # released and taken again meanwhile
                raw = await self.found(lambda: self._jt.get_last_msg(self.names.chat_stream, subject))
                if raw is None:
                    continue  # purged by age meanwhile: try the empty subject again
                if raw.data != FREE:
                    return False
                expected = str(raw.seq)
        return False

    async def release(self, subject: str) -> None:
        """Give back a claim whose work failed, so the provider's redelivery is taken."""
        with unavailable_on_transport_error("releasing an inbound event"):
            await self._put(subject, FREE)

    async def append_message(self, subject: str, event: Event, *, msg_id: str) -> int:
        """Record an inbound chat message on the messages stream (``msg_id`` de-duplicates a
        redelivery); returns its sequence, the messages door's event id."""
        with unavailable_on_transport_error("recording an inbound message"):
            ack = await self._put(subject, encode_event(event), {"Nats-Msg-Id": msg_id})
        return int(ack.seq)

    async def record_webhook_attempt(self, attempt: WebhookAttempt) -> None:
        """Record one delivery attempt (de-duplicated per webhook id and attempt number)."""
        subject = self.names.webhook(attempt.interaction_id)
        with unavailable_on_transport_error(f"append to {subject}"):
            await self._put(
                subject,
                msgspec.json.encode(attempt),
                {"Nats-Msg-Id": f"{attempt.webhook_id}.{attempt.attempt}.{attempt.result}"},
            )

    async def webhook_attempts(self, interaction_id: str, *, limit: int = 100) -> list[WebhookAttempt]:
        """The recorded attempts of an interaction's webhooks, oldest first (at most ``limit``)."""
        subject = self.names.webhook(interaction_id)
        found: list[WebhookAttempt] = []
        seq = 1
        while len(found) < limit:
            raw = await self.next_message(self.names.webhooks_stream, subject, seq)
            if raw is None:
                break
            assert raw.data is not None
            assert raw.seq is not None
            found.append(ATTEMPT_DECODER.decode(raw.data))
            seq = int(raw.seq) + 1
        return found

    async def put_secret(self, interaction_id: str, ref: str, payload: bytes) -> None:
        """Keep a sensitive answer for its waiter (idle TTL), sealed, outside the event log."""
        subject = self.names.secret(interaction_id, ref)
        sealed = sealer_of(self).seal(payload, bound_to=subject)
        with unavailable_on_transport_error("storing the sensitive answer"):
            await self._put(subject, sealed)

    async def get_secret(self, interaction_id: str, ref: str | None) -> bytes | None:
        """A sensitive answer; a direct get first, the leader when a replica has not caught up."""
        if ref is None:
            return None
        subject = self.names.secret(interaction_id, ref)
        data = await self._last_data(self.names.secrets_stream, subject, "read of the sensitive answer")
        return None if data is None else open_secret(self, data, subject)


async def wait_for_jetstream(nc: NATS, timeout: float = 30.0) -> None:
    """Block until JetStream answers (a restarting server takes a moment)."""
    js = nc.jetstream(timeout=2)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await js.account_info()
            return
        except (
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
            nats.js.errors.ServiceUnavailableError,
        ):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


if TYPE_CHECKING:
    _: type[EventLog] = EventStore  # mypy checks JetStream's store against the interface
