"""Routing end to end on real NATS and PostgreSQL (docs/routing.md): a quorum decided across the
inbox and a chat channel, an escalation taken once by two sweepers on a manual clock and then
decided by the person it reached, a delegation at the door, and the ask door's refusals."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from layby_contracts.events import InteractionRouted
from layby_domain.clock import ManualClock
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, BOB, OPERATOR, System
from tests.helpers import eventually
from tests.integration.chat_systems import (
    SLACK_SECRETS,
    TELEGRAM_SECRETS,
    chat_system,
    telegram_and_slack,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]
PERSON = 515151


async def listed(system: System, token: str, question: str) -> dict[str, Any]:
    """The pending question ``question`` as ``token``'s inbox lists it."""
    async with system.http(token) as http:

        async def find() -> dict[str, Any] | None:
            items = (await http.get("/api/interactions?pageSize=200")).json()["data"]["items"]
            return next((i for i in items if i["question"] == question), None)

        found: dict[str, Any] = await eventually(find, f"{question!r} in the inbox", retry=())
        return found


async def answer(system: System, token: str, iid: str, value: Any) -> Any:
    async with system.http(token) as http:
        return await http.post(f"/api/interactions/{iid}/answer", json={"answer": value})


async def history(system: System, token: str, iid: str) -> Any:
    async with system.http(token) as http:
        return await http.get(f"/api/interactions/{iid}/history")


async def test_a_quorum_is_decided_by_a_vote_in_the_inbox_and_a_tap_in_telegram(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    async with (
        telegram_and_slack(settings, PERSON, register_webhook=True) as (tg, _slack, channels),
        chat_system(settings, channels, TELEGRAM_SECRETS | SLACK_SECRETS) as system,
    ):
        await eventually(lambda: tg.webhook, "the door to register the Telegram webhook", timeout=10)
        sdk = await system.sdk(public_base_url=system.url)
        voter = f"tg:{PERSON}"
        ask = asyncio.create_task(
            sdk.ask_user(
                "Release 4.2?",
                answer_format="confirm",
                channel="tg",
                timeout=60,
                routing={"voters": ["alice", voter], "required": 2},
            )
        )
        item = await listed(system, ALICE, "Release 4.2?")
        iid = item["interaction_id"]
        first = await answer(system, ALICE, iid, True)
        assert first.status_code == 200, first.text
        assert first.json()["data"] == {"interaction_id": iid, "status": "voted", "votes": 1, "required": 2}
        again = await answer(system, ALICE, iid, True)
        assert again.status_code == 409, again.text
        assert not ask.done()

        async def posted() -> Any:
            found = [m for m in tg.messages(PERSON) if m.from_bot and m.kind == "text"]
            return found[0] if found else None

        msg = await eventually(posted, "the question in the Telegram chat", timeout=10)
        await tg.tap(PERSON, msg.message_id, "Yes")
        assert await asyncio.wait_for(ask, 15) is True
        entries = (await history(system, ALICE, iid)).json()["data"]["entries"]
        kinds = [(e["kind"], e.get("by"), e.get("via")) for e in entries if e["kind"] != "webhook_attempt"]
        assert kinds == [("asked", "ops", None), ("voted", "alice", "api"), ("answered", voter, "channel")]
        assert entries[-1]["votes"] == 2


@pytest.fixture
async def second_sweeper(clocked: System, clock: ManualClock) -> AsyncIterator[None]:
    """A second sweeper replica beside the system's own, on the same manual clock."""
    from layby_services.sweeper.main import serve as sweeper

    stop = asyncio.Event()
    second = asyncio.create_task(sweeper(clocked.settings, stop, clock=clock), name="sweeper-2")
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(second, 15)


async def test_two_sweepers_take_an_escalation_once_and_the_person_it_reached_decides(
    clocked: System, second_sweeper: None, clock: ManualClock, store: EventStore, db: asyncpg.Pool
) -> None:
    system = clocked
    sdk = await system.sdk()
    ask = asyncio.create_task(
        sdk.ask_user(
            "Rotate the keys?",
            answer_format="confirm",
            audience="alice",
            timeout=600,
            routing={"escalate": [{"after": 60, "to": ["bob"]}]},
        )
    )
    item = await listed(system, ALICE, "Rotate the keys?")
    iid = item["interaction_id"]
    early = await answer(system, BOB, iid, True)
    assert early.status_code == 403, early.text  # not offered to bob yet
    clock.advance(61)

    async def projected() -> bool:
        row = await db.fetchrow(
            "SELECT routed_seq, route_at FROM interactions WHERE interaction_id = $1", iid
        )
        return row is not None and row["routed_seq"] is not None and row["route_at"] is None

    # Once the projection has the step, no sweeper finds anything due: what is on the log is final.
    await eventually(projected, "the escalation on the log and in the projection", timeout=15)
    events = await store.events_on(store.names.ix(iid), limit=100)
    steps = [e.event for e in events if isinstance(e.event, InteractionRouted)]
    assert [(s.step, s.progress.offered) for s in steps] == [("escalated", ["bob"])]
    # bob's inbox lists it now, and bob decides it.
    await listed(system, BOB, "Rotate the keys?")
    decided = await answer(system, BOB, iid, True)
    assert decided.status_code == 200, decided.text
    assert await asyncio.wait_for(ask, 15) is True
    entries = (await history(system, BOB, iid)).json()["data"]["entries"]
    assert [e["kind"] for e in entries] == ["asked", "escalated", "answered"]


async def test_a_question_handed_on_at_the_door_is_decided_by_the_delegate(system: System) -> None:
    sdk = await system.sdk()
    ask = asyncio.create_task(
        sdk.ask_user("Approve the invoice?", answer_format="confirm", audience="alice", timeout=60)
    )
    iid = (await listed(system, ALICE, "Approve the invoice?"))["interaction_id"]
    async with system.http(BOB) as http:
        outsider = await http.post(f"/api/interactions/{iid}/delegate", json={"to": "bob"})
    assert outsider.status_code == 403, outsider.text
    async with system.http(ALICE) as http:
        bad = await http.post(f"/api/interactions/{iid}/delegate", json={"to": ""})
        assert (bad.status_code, bad.json().get("field")) == (400, "to"), bad.text
        unknown = await http.post(f"/api/interactions/{iid}/delegate", json={"to": "bob", "cc": "x"})
        assert unknown.status_code == 400, unknown.text
        handed = await http.post(
            f"/api/interactions/{iid}/delegate", json={"to": "bob", "note": "away today"}
        )
    assert handed.status_code == 200, handed.text
    assert handed.json()["data"] == {"interaction_id": iid, "to": "bob", "status": "delegated"}
    refused = await answer(system, ALICE, iid, True)
    assert refused.status_code == 403, refused.text
    await listed(system, BOB, "Approve the invoice?")
    assert (await answer(system, BOB, iid, False)).status_code == 200
    assert await asyncio.wait_for(ask, 15) is False
    for token in (ALICE, BOB):  # both see the delegation
        entries = (await history(system, token, iid)).json()["data"]["entries"]
        delegated = next(e for e in entries if e["kind"] == "delegated")
        assert (delegated["by"], delegated["to"], delegated["detail"]) == ("alice", ["bob"], "away today")


async def test_the_ask_door_refuses_a_routing_naming_its_field_and_records_nothing(
    system: System, store: EventStore
) -> None:
    async with system.http() as http:
        for routing, field in (
            ({"required": 0}, "routing.required"),
            ({"voters": ["a", "a"]}, "routing.voters[1]"),
            ({"escalate": [{"after": 5, "channel": "nowhere"}]}, "routing.escalate[0].channel"),
            ({"required": "two"}, "routing.required"),
        ):
            resp = await http.post("/api/asks", json={"question": "Q?", "routing": routing})
            assert resp.status_code == 400, resp.text
            assert resp.json()["field"] == field, resp.text
    assert (await store.bounds())[1] == 0


async def test_the_cli_votes_hands_on_and_prints_the_routing_steps(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from layby.cli import main as cli_main

    monkeypatch.setenv("LAYBY_URL", system.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    sdk = await system.sdk()
    ask = asyncio.create_task(
        sdk.ask_user(
            "Two keys?",
            answer_format="confirm",
            timeout=60,
            routing={"voters": ["ops", "bob", "alice"], "required": 2},
        )
    )
    iid = (await listed(system, OPERATOR, "Two keys?"))["interaction_id"]
    assert await asyncio.to_thread(cli_main, ["interactions", "answer", iid, "--answer", "true"]) == 0
    assert f"voted on {iid} (1 of 2); it waits for more" in capsys.readouterr().out
    monkeypatch.setenv("LAYBY_TOKEN", BOB)
    assert (
        await asyncio.to_thread(
            cli_main, ["interactions", "delegate", iid, "--to", "dana", "--note", "covering"]
        )
        == 0
    )
    assert f"handed {iid} on to dana" in capsys.readouterr().out
    assert (await answer(system, ALICE, iid, True)).status_code == 200
    assert await asyncio.wait_for(ask, 15) is True
    assert await asyncio.to_thread(cli_main, ["interactions", "history", iid]) == 0
    lines = capsys.readouterr().out.splitlines()
    steps = [line.split()[1] for line in lines[1:]]
    assert steps == ["asked", "voted", "delegated", "answered"]
    assert "to dana covering" in lines[3]


async def test_the_person_a_question_is_handed_to_gets_it_live_on_the_stream_and_no_one_gets_it_twice(
    system: System,
) -> None:
    from tests.helpers import sse

    sdk = await system.sdk()
    async with sse(system, BOB) as bobs, sse(system) as operators:
        ask = asyncio.create_task(
            sdk.ask_user("Handed on live?", answer_format="confirm", audience="alice", timeout=60)
        )
        add = await operators.next()
        iid = add.data["interaction_id"]
        async with system.http(ALICE) as http:
            handed = await http.post(f"/api/interactions/{iid}/delegate", json={"to": "bob"})
        assert handed.status_code == 200, handed.text
        offered = await bobs.next()
        assert (offered.event, offered.data["interaction_id"]) == ("interaction.add", iid)
        assert int(offered.id) > int(add.id)
        assert (await answer(system, BOB, iid, True)).status_code == 200
        assert (await bobs.until("interaction.answered", iid)).data["interaction_id"] == iid
        answered = await operators.next()  # the operator had it already: no second add first
        assert (answered.event, answered.data["interaction_id"]) == ("interaction.answered", iid)
    assert await asyncio.wait_for(ask, 15) is True
