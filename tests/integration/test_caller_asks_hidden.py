"""Caller asks are hidden from people: no inbox surface shows them, no human answer door takes them,
no channel delivers them (docs/caller-asks.md#hidden-from-the-inbox).

The caller asks here are appended to the log directly, as the ask service records them, so these
tests hold whatever path records them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

from layby_contracts import events
from layby_server.projection.projector import rebuild
from layby_server.store.eventstore import EventStore
from tests import samples
from tests.channel_plugins import ScriptedChat
from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import caught_up, eventually, handled_by, mint, sse

pytestmark = pytest.mark.integration

SNAPSHOT = "SELECT * FROM interactions ORDER BY interaction_id"


def _now() -> datetime:
    return datetime.now(UTC)


def caller_ask(**fields: Any) -> events.InteractionAsked:
    """A caller ask of alice's as the ask service records it: an async park of its run, on a subject,
    asked now."""
    alices: dict[str, Any] = {
        "group_id": str(uuid.uuid4()),
        "asked_by": "alice",
        "audience": "alice",
        "payload": {"plan": None},
        "chain": ["orders"],
    }
    return samples.caller_ask(str(uuid.uuid4()), _now(), **(alices | fields))


def question(**fields: Any) -> events.InteractionAsked:
    """An ordinary question for a person (an async park, so no waiter is needed)."""
    return caller_ask(to=None, subject=None, payload=None, chain=None, question="Ship it?", **fields)


def _through_the_api(asked: events.InteractionAsked, **fields: Any) -> events.InteractionAnswered:
    return samples.answered(asked, _now(), audience=asked.audience, run_id=asked.run_id, via="api", **fields)


def resumed(asked: events.InteractionAsked) -> events.InteractionAnswered:
    return _through_the_api(asked, visit="v-1")


def answered(asked: events.InteractionAsked) -> events.InteractionAnswered:
    return _through_the_api(asked, answer="yes")


def settled(asked: events.InteractionAsked, outcome: Any = "finished") -> events.InteractionSettled:
    return samples.settled(
        asked, outcome, _now(), result={"plan": "gold"}, run_id=asked.run_id, subject=asked.subject
    )


def taken(asked: events.InteractionAsked) -> events.InteractionTaken:
    return samples.taken(asked, _now())


def removed(asked: events.InteractionAsked) -> events.InteractionRemoved:
    return samples.removed(asked, "cancelled", _now(), audience=asked.audience, run_id=asked.run_id)


async def record(store: EventStore, *log: events.Event) -> None:
    """Append each event on its interaction's subject (runs on theirs), in order."""
    for event in log:
        subject = (
            store.names.run(event.run_id)
            if isinstance(event, events.RunStarted)
            else store.names.ix(event.interaction_id)  # type: ignore[union-attr]
        )
        await store.append(subject, event, msg_id=str(uuid.uuid4()), expected_seq=None)


async def test_caller_asks_never_appear_in_the_list_or_the_inbox_tables(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """The list door (what the inbox page shows) never lists a caller ask, whatever its state, and the
    inbox table never holds one."""
    waiting, running, ended = caller_ask(), caller_ask(), caller_ask()
    await record(store, waiting, running, resumed(running), ended, resumed(ended), settled(ended))
    person = question()
    await record(store, person)
    await caught_up(db, store)
    for token in (OPERATOR, ALICE):
        async with system.http(token) as http:
            listed = (await http.get("/api/interactions", params={"pageSize": 200})).json()["data"]
        assert [i["interaction_id"] for i in listed["items"]] == [person.interaction_id]
        assert listed["total"] == 1
    rows = await db.fetch("SELECT interaction_id FROM interactions")
    assert [r["interaction_id"] for r in rows] == [person.interaction_id]


async def test_the_stream_sends_no_frame_for_any_event_of_a_caller_ask(
    system: System, store: EventStore
) -> None:
    """A stream client sees the ordinary questions appended around a caller ask's whole life, and
    nothing of the caller ask: no add, answered, removed, settled or taken frame (frames come in log
    order, so a caller frame would have come first)."""
    one, two = caller_ask(), caller_ask()
    person = question()
    async with sse(system) as stream:
        await record(store, one, resumed(one), two, person)
        first = await stream.next()
        assert (first.event, first.data["interaction_id"]) == ("interaction.add", person.interaction_id)
        await record(store, settled(one), taken(one), removed(two), answered(person))
        second = await stream.next()
        assert (second.event, second.data["interaction_id"]) == (
            "interaction.answered",
            person.interaction_id,
        )


async def test_caller_asks_never_reach_the_done_list(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """The done list of resolved questions never shows a resumed, settled, taken or removed caller ask."""
    one, two, three = caller_ask(), caller_ask(), caller_ask()
    person = question()
    await record(
        store,
        one,
        resumed(one),
        settled(one),
        taken(one),
        two,
        removed(two),
        three,
        resumed(three),
        settled(three, "parked"),
    )
    await record(store, person, answered(person))
    await caught_up(db, store)
    async with system.http() as http:
        done = (await http.get("/api/interactions/done")).json()["data"]
    assert [i["interaction_id"] for i in done["items"]] == [person.interaction_id]
    assert done["total"] == 1


async def test_the_runs_summary_never_names_a_caller_ask_as_a_waiting_question(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """The dashboard's oldest open question, which a person would go and answer, is never a caller ask."""
    run_id = str(uuid.uuid4())
    await record(
        store,
        events.RunStarted(run_id=run_id, flow="orders", identity="alice", input=None, started_at=_now()),
    )
    await record(store, caller_ask(run_id=run_id))
    await caught_up(db, store)
    async with system.http() as http:
        summary = (await http.get("/api/runs/summary")).json()["data"]
    assert summary["oldest_open"] is None


async def test_the_answer_door_refuses_a_caller_ask_with_the_unknown_id_404(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """Answering a caller ask gets exactly the 404 of an unknown id, pending or resumed, so no person
    can resolve one or learn that it exists; nothing is recorded."""
    asked = caller_ask()
    await record(store, asked)
    async with system.http() as http:
        unknown = await http.post(f"/api/interactions/{uuid.uuid4()}/answer", json={"answer": "gold"})
        assert unknown.status_code == 404
        pending = await http.post(f"/api/interactions/{asked.interaction_id}/answer", json={"answer": "gold"})
        assert (pending.status_code, pending.content) == (404, unknown.content)
        assert pending.headers["content-type"] == unknown.headers["content-type"]
        await record(store, resumed(asked))
        late = await http.post(f"/api/interactions/{asked.interaction_id}/answer", json={"answer": "gold"})
        assert (late.status_code, late.content) == (404, unknown.content)
    last = await store.last(store.names.ix(asked.interaction_id))
    assert (
        last is not None
        and isinstance(last.event, events.InteractionAnswered)
        and last.event.answered_by == "alice"
    )
    assert last.event.to == "caller"


async def test_a_ticket_bound_to_a_caller_ask_gets_the_uniform_404(system: System, store: EventStore) -> None:
    """A callback ticket bound to a caller ask (a client's mistake: caller asks get none) answers GET
    and POST with the byte-identical 404 of an unknown ticket, pending or resumed."""
    # Named a channel, it would be reachable by ticket were it a person's question.
    asked = caller_ask(answer_format="confirm", channel="ops", recipient="room-1")
    await record(store, asked)
    bound = await mint(system, store, asked.interaction_id)
    unknown = f"{system.url}/api/interactions/callback/{'A' * 43}"

    def same(got: httpx.Response, want: httpx.Response) -> None:
        assert (got.status_code, got.content, got.headers["content-type"]) == (
            want.status_code,
            want.content,
            want.headers["content-type"],
        )
        assert got.status_code == 404

    async with httpx.AsyncClient(timeout=10) as http:
        for _ in range(2):
            same(await http.get(bound), await http.get(unknown))
            same(
                await http.post(bound, json={"answer": True}), await http.post(unknown, json={"answer": True})
            )
            same(await http.post(bound), await http.post(unknown))
            await record(store, resumed(asked))
    last = await store.last(store.names.ix(asked.interaction_id))
    assert (
        last is not None
        and isinstance(last.event, events.InteractionAnswered)
        and last.event.answered_by == "alice"
    )


async def test_rebuilding_the_projections_still_leaves_caller_asks_out(
    system: System, store: EventStore, db: asyncpg.Pool
) -> None:
    """Replaying the log from scratch gives exactly the live tables: caller asks stay out of them."""
    one, two = caller_ask(), caller_ask()
    person = question()
    await record(store, one, resumed(one), settled(one), taken(one), two, person, removed(two))
    await caught_up(db, store)
    live = [dict(r) for r in await db.fetch(SNAPSHOT)]
    assert [r["interaction_id"] for r in live] == [person.interaction_id]
    await rebuild(db, store)
    assert [dict(r) for r in await db.fetch(SNAPSHOT)] == live


async def test_the_delivery_service_never_delivers_or_retracts_a_caller_ask(
    chan: System, store: EventStore
) -> None:
    """A caller ask is never sent to a channel, even one that names a channel, and its resolution is
    never retracted anywhere; an ordinary channel question next to it is delivered."""
    asked = caller_ask(channel="chat-a", recipient="room-1")
    person = question(channel="chat-a", recipient="room-1")
    await record(store, asked, person)
    await eventually(
        lambda: [p.interaction_id for p in ScriptedChat.LOGS["chat-a"].posted],
        "the ordinary question to be posted",
        until=lambda ids: person.interaction_id in ids,
    )
    await record(
        store,
        samples.answered(asked, _now(), channels=["chat-a"]),
    )
    await handled_by(store, "delivery")
    chat = ScriptedChat.LOGS["chat-a"]
    assert asked.interaction_id not in [p.interaction_id for p in chat.posted]
    assert asked.interaction_id not in chat.retracted
