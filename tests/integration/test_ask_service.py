"""The ask service as the authority: caps, refusals, sweeping, sensitive answers (docs/asking.md#asking-a-question, docs/asking.md#validated-before-anything-is-stored, docs/aggregates/interaction.md#sync-wait, docs/asking.md#concurrency-cap, docs/aggregates/interaction.md#the-sweeper)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import asyncpg
import msgspec
import pytest

from layby import CrossIdentityAudienceError, InteractionLimitError, SecretValue
from layby_contracts.commands import REPLY_DECODER, Accepted, Ask, Refused
from layby_domain.clock import ManualClock
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, BOB, OPERATOR, System, start_system, stop_system
from tests.helpers import eventually, sse, wait_total
from tests.samples import interaction_asked

pytestmark = pytest.mark.integration


async def raw_ask(system: System, token: str = OPERATOR, **fields: object) -> Accepted | Refused:
    """Send an Ask command with no waiter behind it (like a SIGKILLed asker)."""
    client = await system.sdk()
    cmd = Ask(token=token, interaction_id=str(uuid.uuid4()), **{"question": "q", **fields})  # type: ignore[arg-type]
    msg = await client._nc.request(system.settings.names.cmd_ask, msgspec.json.encode(cmd), timeout=10)
    reply = REPLY_DECODER.decode(msg.data)
    assert isinstance(reply, Accepted | Refused)
    return reply


@pytest.mark.settings(max_concurrent=5)
async def test_burst_over_the_cap_admits_exactly_the_cap(system: System) -> None:
    """A burst of N > cap concurrent asks admits exactly cap and refuses the rest (docs/asking.md#concurrency-cap)."""
    replies = await asyncio.gather(*(raw_ask(system, timeout=60) for _ in range(40)))
    accepted = [r for r in replies if isinstance(r, Accepted)]
    refused = [r for r in replies if isinstance(r, Refused)]
    assert len(accepted) == 5
    assert {r.message for r in refused} == {"ask_user refused: already at the max_concurrent limit (5)"}
    assert {r.kind for r in refused} == {"limit"}


@pytest.mark.settings(max_concurrent=1)
async def test_sdk_raises_interaction_limit_error_and_answering_frees_the_slot(
    system: System, db: asyncpg.Pool
) -> None:
    """At the cap ask_user raises InteractionLimitError; answering frees the slot (docs/asking.md#concurrency-cap)."""
    client = await system.sdk()
    first = asyncio.create_task(client.ask_user("one", timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    with pytest.raises(InteractionLimitError, match=r"already at the max_concurrent limit \(1\)"):
        await client.ask_user("two", timeout=60)
    async with system.http() as http:
        await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": "ok"})
    assert await first == "ok"
    await eventually(  # the projector releases the slot right after it applies the answer
        lambda: db.fetchval("SELECT count(*) FROM admissions"),
        "the answered question's slot to be released",
        until=lambda held: held == 0,
    )
    second = asyncio.create_task(client.ask_user("two", timeout=60))
    await wait_total(system, 1)
    assert not second.done()
    second.cancel()


async def test_refused_asks_write_nothing(system: System, store: EventStore) -> None:
    """Every argument error raises before any state is written (docs/asking.md#validated-before-anything-is-stored)."""
    _, before = await store.bounds()
    bad = [
        {"answer_format": "select"},
        {"question": "x" * 8193},
        {"answer_format": "nope"},
        {"timeout": 0},
        {"audience": " "},
        {"answer_format": "form", "schema": {"type": 5}},
    ]
    for fields in bad:
        reply = await raw_ask(system, **fields)
        assert isinstance(reply, Refused)
        assert reply.kind == "invalid"
    reply = await raw_ask(system, token="not-a-real-token-123456")
    assert isinstance(reply, Refused)
    assert (reply.kind, reply.field) == ("unauthorized", "token")
    assert (await store.bounds())[1] == before


async def test_sdk_argument_errors_raise_value_error_naming_the_field(system: System) -> None:
    """Argument errors raise ValueError naming the field before anything is stored (docs/asking.md#asking-a-question, docs/asking.md#validated-before-anything-is-stored)."""
    client = await system.sdk()
    with pytest.raises(ValueError, match="answer_format 'select' requires a non-empty options list"):
        await client.ask_user("q", answer_format="select")
    with pytest.raises(ValueError, match="timeout must be positive, got 0"):
        await client.ask_user("q", timeout=0)
    await wait_total(system, 0)


async def test_restricted_asker_addressing_another_identity_is_refused(system: System) -> None:
    """A restricted asker may address only itself: CrossIdentityAudienceError (docs/asking.md#audience-clamp)."""
    client = await system.sdk(ALICE)
    with pytest.raises(CrossIdentityAudienceError):
        await client.ask_user("for bob", audience="bob", timeout=5)


async def test_restricted_askers_unset_audience_is_clamped_to_itself(system: System) -> None:
    """A restricted caller's unset audience becomes its own id (docs/asking.md#audience-clamp)."""
    client = await system.sdk(ALICE)
    task = asyncio.create_task(client.ask_user("mine", timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    assert item["audience"] == "alice"
    task.cancel()


async def test_sdk_with_an_unknown_token_is_refused(system: System) -> None:
    """The asker's identity is the token's; an unknown token is refused before anything is stored."""
    client = await system.sdk("unknown-token-0123456789")
    with pytest.raises(PermissionError, match="LAYBY_TOKEN was refused"):
        await client.ask_user("q", timeout=5)


async def test_sensitive_answer_reaches_the_waiter_wrapped_and_is_not_projected(
    system: System, db: asyncpg.Pool
) -> None:
    """Sensitive: the waiter gets a SecretValue; the record keeps no response body (docs/aggregates/interaction.md#sensitive-answers)."""
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("PIN?", sensitive=True, timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    assert item["sensitive"] is True
    async with system.http() as http:
        await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": "1234"})
    secret = await task
    assert isinstance(secret, SecretValue)
    assert secret.reveal() == "1234"
    assert "1234" not in repr(secret)
    row = await eventually(
        lambda: db.fetchrow(
            "SELECT status, answer FROM interactions WHERE interaction_id = $1", item["interaction_id"]
        ),
        "the answer in the projection",
        until=lambda row: row is not None and row["status"] == "answered",
    )
    assert row is not None
    assert (row["status"], row["answer"]) == ("answered", None)


async def test_abandoned_sync_question_is_swept_after_its_deadline(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """A question whose waiter died is removed once deadline + grace pass (docs/aggregates/interaction.md#abandoned-sync-questions)."""
    clock = ManualClock(datetime.now(UTC))
    system = await start_system(settings, clock=clock)
    try:
        async with sse(system) as stream:
            reply = await raw_ask(system, timeout=30)
            assert isinstance(reply, Accepted)
            await stream.until("interaction.add", reply.interaction_id)
            clock.advance(30 + settings.blocking_grace_seconds + 1)
            removed = await stream.until("interaction.removed", reply.interaction_id)
        assert removed.data["interaction_id"] == reply.interaction_id
        await wait_total(system, 0)
    finally:
        await stop_system(system)


async def test_list_read_excludes_and_prunes_a_sync_question_past_its_deadline(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """A sync question past its deadline is pruned during the read with a removed event (docs/doors/list.md#pending-questions-only)."""
    clock = ManualClock(datetime.now(UTC))
    system = await start_system(msgspec.structs.replace(settings, blocking_grace_seconds=3600), clock=clock)
    try:
        reply = await raw_ask(system, timeout=30)
        assert isinstance(reply, Accepted)
        await wait_total(system, 1)
        async with sse(system) as stream:
            clock.advance(31)
            await wait_total(system, 0)
            removed = await stream.until("interaction.removed", reply.interaction_id)
        assert removed.data["interaction_id"] == reply.interaction_id
    finally:
        await stop_system(system)


async def test_an_answer_recorded_in_time_is_returned_even_when_its_wake_is_lost(system: System) -> None:
    """With the resume service down no wake arrives; at its deadline the asker finds the answer in
    the log, recorded within the budget, and returns it instead of raising (ADR 0005)."""
    await system.stop_service("resume")
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Still on?", answer_format="confirm", timeout=2))
    item = (await wait_total(system, 1))["items"][0]
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": True})
    assert resp.status_code == 200
    assert not task.done()
    assert await asyncio.wait_for(task, 10) is True


async def test_a_waiter_whose_connection_failed_over_gets_an_answer_its_lost_wake_carried_at_once(
    system: System,
) -> None:
    """A wake published while the asker's connection was away is lost; when the connection comes
    back the waiter looks at its question and returns the answer then, not at its deadline
    (docs/reliability.md#lost-wakes)."""
    await system.stop_service("resume")  # no wake will come
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Still on?", answer_format="confirm", timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": True})
    assert resp.status_code == 200
    assert not task.done()
    client.look_again()  # what the connection's reconnect does
    assert await asyncio.wait_for(task, 5) is True


async def test_a_look_tells_pending_answered_and_gone_apart_and_only_to_the_asker(system: System) -> None:
    """``cmd.ask.look.v1`` changes nothing: pending while open, the answer once answered, gone
    when removed; a user token may look only at its own question."""
    from layby_contracts.commands import REPLY_DECODER, Look, PruneResult, Refused

    client = await system.sdk(ALICE)
    task = asyncio.create_task(client.ask_user("Look at me?", answer_format="confirm", timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    ix = item["interaction_id"]

    async def look(token: str) -> object:
        msg = await client.nc.request(
            system.settings.names.cmd_ask,
            msgspec.json.encode(Look(token=token, interaction_id=ix)),
            timeout=5,
        )
        return REPLY_DECODER.decode(msg.data)

    assert await look(ALICE) == PruneResult(outcome="pending")
    refused = await look(BOB)
    assert isinstance(refused, Refused)
    assert refused.kind == "audience"  # Forbidden: not the asker
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{ix}/answer", json={"answer": False})
    assert resp.status_code == 200
    answered = await look(ALICE)
    assert isinstance(answered, PruneResult)
    assert (answered.outcome, answered.answer) == ("answered", False)
    assert await asyncio.wait_for(task, 10) is False


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"not json",
        b"[]",
        b'{"type": "cmd.ask.v1"}',
        b'{"type": "cmd.nope.v1", "token": "x"}',
        b'{"type": "cmd.ask.v1", "token": "t", "interaction_id": "x", "question": "q", "surprise": 1}',
    ],
)
async def test_malformed_commands_are_refused_and_the_service_keeps_running(
    system: System, payload: bytes
) -> None:
    """Malformed commands get a clear refusal; the ask service keeps serving."""
    client = await system.sdk()
    msg = await client._nc.request(system.settings.names.cmd_ask, payload, timeout=10)
    reply = REPLY_DECODER.decode(msg.data)
    assert isinstance(reply, Refused)
    assert reply.kind == "invalid"
    assert reply.message.startswith("malformed command")
    assert isinstance(await raw_ask(system, timeout=30), Accepted)


async def test_an_answer_racing_the_sweepers_prune_resolves_exactly_once(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """An answer and the sweeper's prune of the same abandoned question race in the log: exactly one
    of them lands, and the answer door says which (200, or 404 after the prune won) (docs/aggregates/interaction.md#first-resolution-wins)."""
    clock = ManualClock(datetime.now(UTC))
    system = await start_system(settings, clock=clock)
    try:
        ids = []
        for _ in range(20):
            reply = await raw_ask(system, timeout=30)
            assert isinstance(reply, Accepted)
            ids.append(reply.interaction_id)
        await wait_total(system, 20)
        clock.advance(30 + settings.blocking_grace_seconds + 1)  # the sweeper may now prune them all
        async with system.http() as http:
            results = await asyncio.gather(
                *(http.post(f"/api/interactions/{iid}/answer", json={"answer": "x"}) for iid in ids)
            )
        statuses = [r.status_code for r in results]
        assert set(statuses) <= {200, 404}
        for iid, status in zip(ids, statuses, strict=True):
            events = await _events_of(store, iid)
            assert len(events) == 2, events  # asked + exactly one resolution
            assert events[1] == ("interaction.answered.v1" if status == 200 else "interaction.removed.v1")
    finally:
        await stop_system(system)


async def _events_of(store: EventStore, iid: str) -> list[str]:
    from layby_server.projection.projector import read_range

    _, last = await store.bounds()
    return [
        s.event.__struct_config__.tag  # type: ignore[misc]
        for s in await read_range(store, 1, last)
        if s.event.interaction_id == iid
    ]


async def test_a_prune_that_overtakes_its_ask_leaves_a_tombstone_so_the_ask_is_refused_and_removed(
    system: System, store: EventStore
) -> None:
    """Cancelled while recording: the prune arrives first and the late ask is refused (its question
    removed as cancelled the moment it is recorded), so no orphan question waits in the inbox for a
    caller that is gone (docs/aggregates/interaction.md#states-and-events)."""
    from layby_contracts.commands import Prune

    client = await system.sdk()
    iid = str(uuid.uuid4())
    prune = Prune(token=OPERATOR, interaction_id=iid, reason="cancelled")
    msg = await client._nc.request(system.settings.names.cmd_prune, msgspec.json.encode(prune), timeout=10)
    assert REPLY_DECODER.decode(msg.data).outcome == "gone"  # type: ignore[union-attr]
    late = Ask(token=OPERATOR, interaction_id=iid, question="too late", timeout=30)
    msg = await client._nc.request(system.settings.names.cmd_ask, msgspec.json.encode(late), timeout=10)
    reply = REPLY_DECODER.decode(msg.data)
    assert isinstance(reply, Refused)
    assert (reply.kind, reply.field) == ("invalid", "interaction_id")
    await wait_total(system, 0)
    assert await _events_of(store, iid) == [
        "interaction.withdrawn.v1",
        "interaction.asked.v1",
        "interaction.removed.v1",
    ]


async def test_a_prune_of_a_guessed_id_by_another_identity_cannot_pre_empt_the_question(
    system: System,
) -> None:
    """bob prunes an id alice has not asked yet (a park's id is guessable from its run): the prune
    binds only bob, and alice's ask of that id is recorded and answerable
    (docs/aggregates/interaction.md#cancellation)."""
    from layby_contracts.commands import Prune

    client = await system.sdk(ALICE)
    iid = str(uuid.uuid4())
    snoop = Prune(token=BOB, interaction_id=iid, reason="cancelled")
    msg = await client._nc.request(system.settings.names.cmd_prune, msgspec.json.encode(snoop), timeout=10)
    assert REPLY_DECODER.decode(msg.data).outcome == "gone"  # type: ignore[union-attr]
    ask = Ask(token=ALICE, interaction_id=iid, question="Mine?", answer_format="confirm", timeout=30)
    msg = await client._nc.request(system.settings.names.cmd_ask, msgspec.json.encode(ask), timeout=10)
    assert isinstance(REPLY_DECODER.decode(msg.data), Accepted)
    await wait_total(system, 1, token=ALICE)


async def test_a_restricted_token_cannot_read_someone_elses_answer_through_prune(system: System) -> None:
    """Prune reports an answer only to its asker (or an operator)."""
    from layby_contracts.commands import Prune

    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Secret plan?", audience="bob", timeout=60))
    item = (await wait_total(system, 1))["items"][0]
    async with system.http(BOB) as bob:
        await bob.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": "plan B"})
    assert await task == "plan B"
    snoop = Prune(token=ALICE, interaction_id=item["interaction_id"], reason="timeout")
    msg = await client._nc.request(system.settings.names.cmd_prune, msgspec.json.encode(snoop), timeout=10)
    reply = REPLY_DECODER.decode(msg.data)
    assert isinstance(reply, Refused)
    assert "plan B" not in reply.message


@pytest.mark.parametrize(
    "fields",
    [{"question": "a\x00b"}, {"group_id": "g\x00"}, {"answer_format": "select", "options": ["ok", "n\x00o"]}],
)
async def test_nul_characters_are_refused_before_anything_is_stored(
    system: System, store: EventStore, fields: dict
) -> None:
    """PostgreSQL cannot hold U+0000: such asks are refused naming the field, nothing is appended."""
    _, before = await store.bounds()
    reply = await raw_ask(system, timeout=30, **fields)
    assert isinstance(reply, Refused)
    assert reply.message.endswith("must not contain NUL characters")
    assert (await store.bounds())[1] == before


async def test_a_poison_event_does_not_hold_its_batch_mates_back(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """An event the projection cannot store is isolated; the events around it are projected at once
    (ADR 0006)."""

    now = datetime.now(UTC)
    poison = interaction_asked(
        str(uuid.uuid4()),
        now,
        group_id="g\x00",  # text columns refuse NUL: this event cannot be projected
        question="bad\x00",
        timeout_at=now.replace(year=now.year + 1),
    )
    await store.append(store.names.ix(poison.interaction_id), poison, msg_id="poison", expected_seq=0)
    good = await raw_ask(system, timeout=60)
    assert isinstance(good, Accepted)
    items = (await wait_total(system, 1))["items"]
    assert items[0]["interaction_id"] == good.interaction_id
