"""The event store's rules, run against JetStream and against its in-memory twin alike.

Every test takes ``log``: once an ``EventStore`` on a fresh namespace of the test NATS server,
once a ``MemoryEventStore``. A rule that passes for one and fails for the other is a divergence
of the twin (libs/layby_server/store/memstore.py) from JetStream.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import nats.js.errors
import pytest

from layby.connection import connect_nats
from layby_contracts.errors import Conflict, NotFound
from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    RunStarted,
    StepRecorded,
    StepResult,
    encode_event,
)
from layby_contracts.subjects import Names
from layby_domain.interaction import Decision, Interaction, decide_answer, decide_remove
from layby_domain.run import Steps
from layby_server.operations.embedded import EmbeddedNats
from layby_server.service import provision_patiently
from layby_server.store.eventlog import Outcome, as_event, decide_and_append
from layby_server.store.eventstore import EventStore
from layby_server.store.memstore import MemoryEventStore
from layby_server.store.sealing import Sealer, new_key
from layby_server.write.resolve import resolve
from tests.infra import delete_streams
from tests.samples import interaction_asked

pytestmark = pytest.mark.integration

Log = EventStore | MemoryEventStore
NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def _namespace() -> str:
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture
async def jetstream(nats_server: tuple[str, EmbeddedNats | None]) -> AsyncIterator[EventStore]:
    nc = await connect_nats(nats_server[0], name="test-eventstore-behaviour")
    store = EventStore(nc, Names(_namespace()), sealer=Sealer(new_key()))
    await provision_patiently(store)  # as the services do: a busy server's 5xx is tried again
    yield store
    await delete_streams(store)
    await nc.close()


@pytest.fixture(params=["jetstream", "memory"])
def log(request: pytest.FixtureRequest) -> Log:
    if request.param == "jetstream":
        store: EventStore = request.getfixturevalue("jetstream")
        return store
    return MemoryEventStore(Names(_namespace()))


async def dedupes_first(log: Log) -> bool:
    """Whether the server de-duplicates a msg_id before it checks the expected sequence (NATS
    2.9) or after (the pinned 2.15); probed on the continuations stream, not the event log."""
    if isinstance(log, MemoryEventStore):
        return log.dedupe_first
    subject = log.names.continuation("probe", "order", 0)
    headers = {"Nats-Msg-Id": "probe-order", "Nats-Expected-Last-Subject-Sequence": "0"}
    await log.js.publish(subject, b"", headers=headers)
    try:
        ack = await log.js.publish(subject, b"", headers=headers)
    except nats.js.errors.APIError:
        return False
    return bool(ack.duplicate)


def started(run_id: str = "r1") -> RunStarted:
    return RunStarted(run_id=run_id, flow="f", identity="alice", started_at=NOW)


def asked(interaction_id: str, *, sensitive: bool = False) -> InteractionAsked:
    return interaction_asked(
        interaction_id,
        NOW,
        question="Proceed?",
        timeout_at=NOW + timedelta(minutes=5),
        sensitive=sensitive,
        asked_by="alice",
    )


async def ask(log: Log, *, sensitive: bool = False) -> tuple[str, int]:
    interaction_id = str(uuid.uuid4())
    seq = await log.append(
        log.names.ix(interaction_id),
        asked(interaction_id, sensitive=sensitive),
        msg_id=f"asked-{interaction_id}",
        expected_seq=0,
    )
    return interaction_id, seq


def answer_with(value: str) -> Callable[[Interaction], Decision]:
    def decide(state: Interaction) -> Decision:
        return decide_answer(state, by="bob", restricted=False, answer=value, now=NOW)

    return decide


# -- append ---------------------------------------------------------------------------------


async def test_append_numbers_the_stream_with_one_increasing_sequence(log: Log) -> None:
    """Appends return increasing sequences, shared by every subject of the stream."""
    a, b = log.names.run("a"), log.names.run("b")
    seqs = [
        await log.append(a, started("a"), msg_id="m1", expected_seq=None),
        await log.append(b, started("b"), msg_id="m2", expected_seq=None),
        await log.append(a, started("a"), msg_id="m3", expected_seq=None),
    ]
    assert seqs == [1, 2, 3]


async def test_expecting_zero_on_a_non_empty_subject_conflicts(log: Log) -> None:
    """Expected last subject sequence 0 means the subject must be empty."""
    subject = log.names.run("a")
    assert await log.append(subject, started(), msg_id="m1", expected_seq=0) == 1
    with pytest.raises(Conflict, match="moved on past sequence 0"):
        await log.append(subject, started(), msg_id="m2", expected_seq=0)
    assert (await log.bounds())[1] == 1


async def test_expecting_the_last_sequence_succeeds_and_a_stale_one_conflicts(log: Log) -> None:
    """An append lands only when it expects the subject's current last sequence."""
    subject = log.names.run("a")
    first = await log.append(subject, started(), msg_id="m1", expected_seq=0)
    second = await log.append(subject, started(), msg_id="m2", expected_seq=first)
    assert second > first
    with pytest.raises(Conflict):
        await log.append(subject, started(), msg_id="m3", expected_seq=first)
    last = await log.last(subject)
    assert last is not None
    assert last.seq == second


async def test_the_expected_sequence_is_the_subjects_not_the_streams(log: Log) -> None:
    """Another subject's appends do not move this subject's last sequence."""
    a, b = log.names.run("a"), log.names.run("b")
    seq_a = await log.append(a, started("a"), msg_id="m1", expected_seq=0)
    await log.append(b, started("b"), msg_id="m2", expected_seq=0)
    assert await log.append(a, started("a"), msg_id="m3", expected_seq=seq_a) == 3


async def test_a_repeated_msg_id_is_deduplicated(log: Log) -> None:
    """The same msg_id twice without expected_seq stores once; the retry gets the first sequence."""
    subject = log.names.run("a")
    first = await log.append(subject, started(), msg_id="m1", expected_seq=None)
    again = await log.append(subject, started(), msg_id="m1", expected_seq=None)
    assert again == first
    assert await log.bounds() == (1, 1)


async def test_a_repeated_msg_id_expecting_a_sequence_conflicts(log: Log) -> None:
    """A duplicate of an append that landed, expecting a non-zero sequence, decides nothing."""
    subject = log.names.run("a")
    first = await log.append(subject, started(), msg_id="m1", expected_seq=0)
    second = await log.append(subject, started(), msg_id="m2", expected_seq=first)
    with pytest.raises(Conflict):  # wrong last sequence (2.15) or a duplicate (2.9): both Conflict
        await log.append(subject, started(), msg_id="m2", expected_seq=first)
    assert await log.bounds() == (1, second)


async def test_a_repeated_msg_id_expecting_zero_returns_the_first_sequence(log: Log) -> None:
    """A retried first append (expected 0) stores nothing: the first sequence (2.9) or Conflict (2.15)."""
    subject = log.names.run("a")
    first = await log.append(subject, started(), msg_id="m1", expected_seq=0)
    if await dedupes_first(log):
        assert await log.append(subject, started(), msg_id="m1", expected_seq=0) == first
    else:
        with pytest.raises(Conflict, match="moved on past sequence 0"):
            await log.append(subject, started(), msg_id="m1", expected_seq=0)
    assert await log.bounds() == (1, 1)


async def test_another_writers_first_append_with_the_same_msg_id_is_a_lost_race(log: Log) -> None:
    """Two writers that derive one msg_id (two replicas firing one tick) both expecting an empty
    subject: exactly one lands; the other is a Conflict on both NATS 2.9 and 2.15
    (docs/reliability.md#leader-changes)."""
    subject = log.names.run("a")
    first = await log.append(subject, started("one writer"), msg_id="tick-1", expected_seq=0)
    with pytest.raises(Conflict, match="moved on past sequence 0"):
        await log.append(subject, started("another writer"), msg_id="tick-1", expected_seq=0)
    assert await log.bounds() == (1, first)


async def test_msg_ids_are_deduplicated_across_the_whole_stream(log: Log) -> None:
    """A msg_id is unique per stream: reused on another subject, nothing lands there, yet the
    append reports the first message's sequence (unless it expects a non-zero sequence)."""
    a, b = log.names.run("a"), log.names.run("b")
    first = await log.append(a, started("a"), msg_id="m1", expected_seq=None)
    assert await log.append(b, started("b"), msg_id="m1", expected_seq=None) == first
    assert await log.append(b, started("b"), msg_id="m1", expected_seq=0) == first
    assert await log.last(b) is None
    with pytest.raises(Conflict, match="duplicate of an earlier append"):
        await log.append(a, started("a"), msg_id="m1", expected_seq=first)


async def test_two_appends_expecting_the_same_sequence_one_lands(log: Log) -> None:
    """Concurrent appends expecting the same sequence: the log lets exactly one land."""
    subject = log.names.run("a")
    results = await asyncio.gather(
        log.append(subject, started(), msg_id="m1", expected_seq=0),
        log.append(subject, started(), msg_id="m2", expected_seq=0),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["Conflict", "int"]
    assert await log.bounds() == (1, 1)


async def test_an_event_that_does_not_encode_is_refused_before_anything_is_stored(log: Log) -> None:
    """Events are stored encoded: an unencodable event fails the append and stores nothing."""
    bad = RunStarted(run_id="a", flow="f", identity="alice", input=object(), started_at=NOW)
    with pytest.raises(TypeError):
        await log.append(log.names.run("a"), bad, msg_id="m1", expected_seq=0)
    assert await log.bounds() == (0, 0)


# -- reads ----------------------------------------------------------------------------------


async def test_last_and_first_of_an_empty_subject_are_none(log: Log) -> None:
    """Reading an empty subject is an answer (None), not an error."""
    subject = log.names.ix(str(uuid.uuid4()))
    assert await log.last(subject) is None
    assert await log.last(subject, leader=True) is None
    assert await log.first(subject) is None


async def test_last_and_first_of_a_subject(log: Log) -> None:
    """first is the subject's oldest event, last its newest, each with its stream sequence."""
    subject = log.names.run("a")
    one = await log.append(subject, started(), msg_id="m1", expected_seq=0)
    await log.append(log.names.run("b"), started("b"), msg_id="m2", expected_seq=None)
    later = RunStarted(run_id="a", flow="g", identity="alice", started_at=NOW)
    three = await log.append(subject, later, msg_id="m3", expected_seq=one)
    first, last = await log.first(subject), await log.last(subject, leader=True)
    assert first is not None
    assert last is not None
    assert (first.seq, first.event) == (one, started())
    assert (last.seq, last.event) == (three, later)


async def test_last_of_another_subject_is_independent(log: Log) -> None:
    """Each subject has its own last event; an empty neighbour stays empty."""
    a, b, c = log.names.run("a"), log.names.run("b"), log.names.run("c")
    await log.append(a, started("a"), msg_id="m1", expected_seq=None)
    await log.append(b, started("b"), msg_id="m2", expected_seq=None)
    last_a, last_b = await log.last(a), await log.last(b)
    assert last_a is not None
    assert last_b is not None
    assert (last_a.seq, last_b.seq) == (1, 2)
    assert await log.last(c) is None


async def test_bounds_and_provision_again(log: Log) -> None:
    """bounds is (0, 0) on an empty log, then (first, last); provisioning again keeps the log."""
    assert await log.bounds() == (0, 0)
    await log.append(log.names.run("a"), started(), msg_id="m1", expected_seq=None)
    await log.append(log.names.run("b"), started("b"), msg_id="m2", expected_seq=None)
    await log.provision()
    assert await log.bounds() == (1, 2)


async def test_the_side_streams_have_their_own_sequences(log: Log) -> None:
    """Secrets, tickets, media and continuations are separate streams: the event log does not move."""
    await log.put_secret("i", "r", b"1")
    await log.put_ticket("h", "i", NOW, new=True)
    await log.put_media("m", "image/png", b"png")
    await log.publish_once(log.names.continuation("f", "r", 1), b"{}", msg_id="c1")
    assert await log.bounds() == (0, 0)
    assert await log.append(log.names.run("a"), started(), msg_id="c1", expected_seq=0) == 1


# -- resolve --------------------------------------------------------------------------------


async def test_the_first_resolution_wins_and_the_second_sees_it(log: Log) -> None:
    """An answer resolves a pending question; a later removal keeps it (status answered)."""
    interaction_id, asked_seq = await ask(log)
    won = await resolve(log, interaction_id, answer_with("yes"))
    assert isinstance(won.appended, InteractionAnswered)
    assert won.appended.answer == "yes"
    assert won.state.seq == asked_seq
    lost = await resolve(log, interaction_id, lambda s: decide_remove(s, reason="timeout", now=NOW))
    assert lost.appended is None
    assert lost.kept == "answered"
    assert lost.state.status == "answered"
    assert lost.state.seq == won.seq
    last = await log.last(log.names.ix(interaction_id))
    assert last is not None
    assert last.seq == won.seq


async def test_racing_resolutions_append_one_event(log: Log) -> None:
    """An answer racing a removal: one lands, the other decides again on the winner."""
    interaction_id, asked_seq = await ask(log)
    answer, remove = await asyncio.gather(
        resolve(log, interaction_id, answer_with("yes")),
        resolve(log, interaction_id, lambda s: decide_remove(s, reason="timeout", now=NOW)),
        return_exceptions=True,
    )
    last = await log.last(log.names.ix(interaction_id))
    assert last is not None
    assert last.seq == asked_seq + 1
    if isinstance(last.event, InteractionAnswered):
        assert not isinstance(answer, BaseException)
        assert answer.seq == last.seq
        assert not isinstance(remove, BaseException)
        assert remove.kept == "answered"
    else:
        assert isinstance(answer, NotFound)  # a removed question is not found by the answer door
        assert not isinstance(remove, BaseException)
        assert remove.seq == last.seq


async def test_a_sensitive_answer_goes_to_the_secret_store(log: Log) -> None:
    """A sensitive answer's value is kept under the event's secret_ref, never in the event."""
    interaction_id, _ = await ask(log, sensitive=True)
    done = await resolve(log, interaction_id, answer_with("hunter2"))
    last = await log.last(log.names.ix(interaction_id))
    assert last is not None
    assert isinstance(last.event, InteractionAnswered)
    assert last.event == done.appended
    assert last.event.answer is None
    assert last.event.secret_ref is not None
    assert b"hunter2" not in encode_event(last.event)
    assert await log.get_secret(interaction_id, last.event.secret_ref) == b'"hunter2"'


async def test_secrets_are_read_by_their_reference(log: Log) -> None:
    """A secret is found by (interaction, ref) only; no ref reads as None."""
    await log.put_secret("i", "r1", b"one")
    await log.put_secret("i", "r1", b"two")
    assert await log.get_secret("i", "r1") == b"two"
    assert await log.get_secret("i", "r2") is None
    assert await log.get_secret("i", None) is None


# -- tickets, continuations, media ----------------------------------------------------------


async def test_a_new_ticket_refuses_a_hash_in_use_and_a_refresh_overwrites(log: Log) -> None:
    """put_ticket(new=True) returns False on a taken hash and leaves it; new=False replaces it."""
    expires = NOW + timedelta(minutes=1)
    assert await log.put_ticket("h1", "ix-1", expires, new=True) is True
    assert await log.put_ticket("h1", "ix-2", expires + timedelta(minutes=1), new=True) is False
    assert await log.get_ticket("h1") == ("ix-1", expires)
    later = expires + timedelta(hours=1)
    assert await log.put_ticket("h1", "ix-1", later, new=False) is True
    assert await log.get_ticket("h1") == ("ix-1", later)
    assert await log.get_ticket("h2") is None


async def test_a_tickets_expiry_lives_in_its_value(log: Log) -> None:
    """get_ticket returns the stored expiry for the caller to judge; the hash stays taken after it."""
    past = datetime.now(UTC) - timedelta(minutes=1)
    assert await log.put_ticket("h1", "ix-1", past, new=True)
    found = await log.get_ticket("h1")
    assert found is not None
    interaction_id, expires_at = found
    assert interaction_id == "ix-1"
    assert expires_at == past
    assert expires_at <= datetime.now(UTC)  # what the callback door checks before honouring it
    assert await log.put_ticket("h1", "ix-2", NOW, new=True) is False


async def test_publish_once_publishes_at_most_once(log: Log) -> None:
    """publish_once is True once, then False for a retry and for any other publish to the subject."""
    subject = log.names.continuation("f", "r1", 1)
    assert await log.publish_once(subject, b"{}", msg_id="cont-1") is True
    assert await log.publish_once(subject, b"{}", msg_id="cont-1") is False
    assert await log.publish_once(subject, b"{}", msg_id="cont-2") is False
    assert await log.publish_once(log.names.continuation("f", "r1", 2), b"{}", msg_id="cont-3") is True


async def test_media_is_kept_by_reference_once(log: Log) -> None:
    """An inline image is stored with its MIME type and time; a second put of its id is de-duplicated."""
    media_id = "x" * 43
    await log.put_media(media_id, "image/png", b"first")
    await log.put_media(media_id, "image/gif", b"second")
    found = await log.get_media(media_id)
    assert found is not None
    mime, data, stored_at = found
    assert (mime, data) == ("image/png", b"first")
    assert abs(stored_at - datetime.now(UTC)) < timedelta(minutes=1)
    assert await log.get_media("y" * 43) is None


async def test_a_sensitive_answer_is_sealed_at_rest(log: Log) -> None:
    """What the secrets stream holds is the sealed value, bound to its subject: not the answer."""
    await log.put_secret("i", "r", b'"correct horse battery staple"')
    subject = log.names.secret("i", "r")
    if isinstance(log, EventStore):
        raw = (await log.js.get_last_msg(log.names.secrets_stream, subject)).data
    else:
        found = log._get(log.names.secrets_stream, subject)
        assert found is not None
        raw = found.data
    assert raw and b"correct horse" not in raw
    assert await log.get_secret("i", "r") == b'"correct horse battery staple"'


def recorded(run_id: str, call: int, steps: dict[str, StepResult], generation: int = 0) -> StepRecorded:
    step = StepResult(name=f"s{call}", result=call)
    return StepRecorded(
        run_id=run_id,
        generation=generation,
        call=call,
        step=step,
        steps={**steps, str(call): step},
        recorded_at=NOW,
    )


async def test_a_generations_step_record_lives_on_its_step_stream(log: Log) -> None:
    """A step record is read back by run and generation from its step stream, not the event log;
    another generation of the same run has a record of its own."""
    assert await log.last_steps("r1", 0) is None
    subject = log.names.steps("r1", 0)
    seq = await log.append(subject, recorded("r1", 0, {}), msg_id="s-1", expected_seq=0)
    found = await log.last_steps("r1", 0, leader=True)
    assert found is not None and found.seq == seq
    assert isinstance(found.event, StepRecorded) and set(found.event.steps) == {"0"}
    assert await log.last(subject) is None  # not on the event log
    assert await log.last_steps("r1", 1) is None


async def test_step_streams_are_sharded_by_run_with_their_own_sequences(log: Log) -> None:
    """Runs of different shards number their records independently of each other and of the log."""
    runs = {}
    for n in range(40):
        runs.setdefault(log.names.step_shard(f"run-{n}"), f"run-{n}")
        if len(runs) == 2:
            break
    first, second = runs.values()
    await log.append(log.names.ix("a"), asked("a"), msg_id="a-1", expected_seq=0)
    one = await log.append(log.names.steps(first, 0), recorded(first, 0, {}), msg_id="x-1", expected_seq=0)
    two = await log.append(log.names.steps(second, 0), recorded(second, 0, {}), msg_id="x-2", expected_seq=0)
    assert one == two == 1


async def test_the_first_record_of_a_step_wins_and_the_next_extends_it(log: Log) -> None:
    """Two records expecting the same sequence: one lands; the next step appends on top of it."""
    subject = log.names.steps("r1", 0)
    results = await asyncio.gather(
        *(log.append(subject, recorded("r1", 0, {}), msg_id=f"s-{n}", expected_seq=0) for n in range(2)),
        return_exceptions=True,
    )
    assert sum(isinstance(r, int) for r in results) == 1
    assert sum(isinstance(r, Conflict) for r in results) == 1
    first = await log.last_steps("r1", 0, leader=True)
    assert first is not None and isinstance(first.event, StepRecorded)
    await log.append(subject, recorded("r1", 1, first.event.steps), msg_id="s-3", expected_seq=first.seq)
    last = await log.last_steps("r1", 0, leader=True)
    assert last is not None and isinstance(last.event, StepRecorded)
    assert set(last.event.steps) == {"0", "1"}


async def test_racing_step_writers_each_decide_again_on_what_won(log: Log) -> None:
    """The generic decide -> append -> re-read loop: concurrent writers of one step record all
    land, each deciding on the record the previous one left (no step is lost)."""
    subject = log.names.steps("r1", 0)

    async def read(_leader: bool) -> Steps:
        last = await log.last_steps("r1", 0, leader=True)
        return Steps() if last is None else Steps.of(last.seq, last.event)

    async def write(call: int) -> Outcome[Steps, StepRecorded]:
        return await decide_and_append(
            log,
            subject,
            read=read,
            decide=lambda steps: recorded("r1", call, steps.recorded),
            event_of=as_event,
            msg_id=lambda _: f"step-{call}-{uuid.uuid4().hex}",
            attempts=20,
        )

    outcomes = await asyncio.gather(*(write(call) for call in range(5)))
    assert all(o.seq is not None and not o.lost for o in outcomes)
    last = await log.last_steps("r1", 0, leader=True)
    assert last is not None and isinstance(last.event, StepRecorded)
    assert set(last.event.steps) == {str(call) for call in range(5)}


async def test_a_decision_to_append_nothing_appends_nothing(log: Log) -> None:
    """``decide`` returning None keeps the state: no append, no sequence, not lost."""

    async def read(_leader: bool) -> Steps:
        return Steps()

    outcome: Outcome[Steps, StepRecorded] = await decide_and_append(
        log, log.names.steps("r1", 0), read=read, decide=lambda _: None, event_of=as_event, msg_id=str
    )
    assert (outcome.decision, outcome.seq, outcome.lost) == (None, None, False)
    assert await log.last_steps("r1", 0) is None


# -- a lost acknowledgement (a leader killed after it stored the append) --------------------


def lose_first_acks(store: EventStore, count: int = 1) -> list[int]:
    """The next ``count`` publishes reach JetStream and are stored, but their acknowledgements
    are lost on the way back (as when the leader dies right after its quorum stored them). The
    server is real; only the reply is dropped. Returns the list the tries are counted in."""
    real = store._jt.publish
    tries: list[int] = []

    async def publish(*args: object, **kwargs: object) -> object:
        tries.append(1)
        ack = await real(*args, **kwargs)  # type: ignore[arg-type]
        if len(tries) <= count:
            raise nats.errors.TimeoutError
        return ack

    store._jt.publish = publish  # type: ignore[method-assign]
    return tries


@pytest.mark.parametrize("expected", [None, 0, "last"])
async def test_an_append_whose_acknowledgement_was_lost_is_appended_once_and_reported_as_appended(
    jetstream: EventStore, expected: int | str | None
) -> None:
    """A try that landed unseen is sent again with the same Nats-Msg-Id; whether the log answers
    "duplicate" (NATS 2.9) or "moved on" (2.15), the append is this call's: one event stored,
    its sequence returned, no Conflict (a lost race would make the caller decide again and, say,
    refuse its own answer as already given)."""
    store = jetstream
    subject = store.names.run("lost-ack")
    before = await store.append(subject, started(), msg_id="first", expected_seq=0)
    tries = lose_first_acks(store)
    seq = (
        await store.append(
            subject, started(), msg_id="second", expected_seq=before if expected == "last" else expected
        )
        if expected != 0
        else await store.append(store.names.run("fresh"), started("fresh"), msg_id="fresh", expected_seq=0)
    )
    assert len(tries) == 2
    assert await store.bounds() == (1, seq)
    assert seq == before + 1


async def test_a_duplicate_of_another_writers_append_is_still_a_lost_race_after_a_retry(
    jetstream: EventStore,
) -> None:
    """Only this call's own bytes make a duplicate "ours": another writer's append under the same
    id (two replicas deciding the same resume) stays a Conflict, even when this call had to try
    again."""
    store = jetstream
    subject = store.names.run("rival")
    first = await store.append(subject, started(), msg_id="first", expected_seq=0)
    rival = RunStarted(run_id="rival", flow="other", identity="bob", started_at=NOW)
    await store.append(subject, rival, msg_id="same", expected_seq=first)
    tries = lose_first_acks(store)
    with pytest.raises(Conflict):
        await store.append(subject, started(), msg_id="same", expected_seq=first)
    assert len(tries) >= 1
    assert await store.bounds() == (1, first + 1)


async def test_a_claim_whose_acknowledgement_was_lost_is_taken_by_its_claimer(jetstream: EventStore) -> None:
    """claim_once's try that landed unseen is not mistaken for another's claim."""
    store = jetstream
    lose_first_acks(store)
    assert await store.claim_once(store.names.chat_seen("k1")) is True
    assert await store.claim_once(store.names.chat_seen("k1")) is False


async def test_a_new_ticket_whose_acknowledgement_was_lost_is_not_refused_as_taken(
    jetstream: EventStore,
) -> None:
    store = jetstream
    lose_first_acks(store)
    expires = NOW + timedelta(hours=1)
    assert await store.put_ticket("h" * 64, "ix-1", expires, new=True) is True
    assert await store.put_ticket("h" * 64, "ix-2", expires, new=True) is False
