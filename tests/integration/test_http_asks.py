"""HTTP asks and runs end to end (docs/doors/asks.md, docs/doors/runs.md#start): a question asked
over ``POST /api/asks``, answered through the answer door, and read at the outcome door, against
the running system."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

import layby
from layby_domain.clock import ManualClock
from layby_server.store.eventstore import EventStore
from layby_services.door.routes.asks import TOO_MANY_POLLS
from tests.conftest import ALICE, BOB, OPERATOR, System
from tests.helpers import eventually
from tests.integration.test_nats_authorization import Secured, secured  # noqa: F401 - its fixture
from tests.integration.test_parks import Workers

pytestmark = pytest.mark.integration


async def ask(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    response = await http.post("/api/asks", json={"timeout": 60, **body})
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def outcome(http: httpx.AsyncClient, interaction_id: str, wait: float = 0) -> dict[str, Any]:
    response = await http.get(f"/api/interactions/{interaction_id}/outcome", params={"wait": wait})
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def answer(system: System, interaction_id: str, value: Any, token: str = OPERATOR) -> int:
    async with system.http(token) as http:
        r = await http.post(f"/api/interactions/{interaction_id}/answer", json={"answer": value})
        return r.status_code


async def test_an_http_ask_answered_at_the_answer_door_is_returned_by_the_waiting_long_poll(
    system: System,
) -> None:
    async with system.http() as http:
        created = await ask(http, question="Deploy?", answer_format="confirm")
        ix = created["interaction_id"]
        assert created["group_id"] and created["timeout_at"]
        polling = asyncio.create_task(outcome(http, ix, wait=20))
        await asyncio.sleep(0)  # let the poll start; it waits on the log, not on this
        assert await answer(system, ix, True) == 200
        got = await polling
        assert got["status"] == "answered" and got["answer"] is True
        assert got["answered_by"] == "ops" and got["sensitive"] is False
        assert await outcome(http, ix) == got  # read again: the same single outcome


async def test_wait_zero_on_a_pending_question_answers_pending_at_once(system: System) -> None:
    async with system.http() as http:
        created = await ask(http, question="Later?")
        got = await outcome(http, created["interaction_id"], wait=0)
    assert got == {
        "interaction_id": created["interaction_id"],
        "status": "pending",
        "timeout_at": created["timeout_at"],
    }


async def test_a_question_past_its_deadline_is_expired_for_every_poll(
    clocked: System, clock: ManualClock, store: EventStore
) -> None:
    async with clocked.http() as http:
        created = await ask(http, question="Too late?", timeout=30)
        ix = created["interaction_id"]
        assert (await outcome(http, ix))["status"] == "pending"
        clock.advance(31)
        first = await outcome(http, ix)
        assert first["status"] == "expired" and first["reason"] in ("timeout", "abandoned")
        assert await outcome(http, ix, wait=5) == first
        # An answer after the deadline finds the question resolved: the outcome stays.
        assert await answer(clocked, ix, "yes") in (404, 409)
        assert await outcome(http, ix) == first
    last = await store.last(store.names.ix(ix), leader=True)
    assert last is not None and type(last.event).__name__ == "InteractionRemoved"


async def test_a_deleted_question_reads_removed_cancelled_and_delete_is_idempotent(system: System) -> None:
    async with system.http() as http:
        ix = (await ask(http, question="Withdraw me?"))["interaction_id"]
        polling = asyncio.create_task(outcome(http, ix, wait=20))
        removed = await http.delete(f"/api/interactions/{ix}")
        assert removed.status_code == 200, removed.text
        assert removed.json()["data"] == {"interaction_id": ix, "outcome": "pruned"}
        got = await polling
        assert got["status"] == "removed" and got["reason"] == "cancelled"
        again = await http.delete(f"/api/interactions/{ix}")
        assert again.status_code == 200
        assert again.json()["data"] == {"interaction_id": ix, "outcome": "gone", "reason": "cancelled"}
        assert await outcome(http, ix) == got
        answered = (await ask(http, question="Answered first?"))["interaction_id"]
        assert await answer(system, answered, "done") == 200
        late = await http.delete(f"/api/interactions/{answered}")
        assert late.json()["data"] == {"interaction_id": answered, "outcome": "answered"}


async def test_twenty_concurrent_pollers_all_see_the_one_outcome_the_log_decided(
    system: System, store: EventStore
) -> None:
    async with system.http() as http:
        ix = (await ask(http, question="Race?"))["interaction_id"]
        pollers = [asyncio.create_task(outcome(http, ix, wait=20)) for _ in range(20)]
        await asyncio.sleep(0)
        # An answer and a withdrawal race: the log decides one, every poller reports that one.
        answering = asyncio.create_task(answer(system, ix, "mine"))
        deleting = asyncio.create_task(http.delete(f"/api/interactions/{ix}"))
        await asyncio.gather(answering, deleting)
        seen = await asyncio.gather(*pollers)
    assert all(s == seen[0] for s in seen)
    last = await store.last(store.names.ix(ix), leader=True)
    assert last is not None
    expected = "answered" if type(last.event).__name__ == "InteractionAnswered" else "removed"
    assert seen[0]["status"] == expected


async def test_someone_elses_question_is_the_same_404_as_an_unknown_id(system: System) -> None:
    async with system.http(ALICE) as alice:
        mine = (await ask(alice, question="Alice's own"))["interaction_id"]
    async with system.http(OPERATOR) as op:
        to_alice = (await ask(op, question="For alice", audience="alice"))["interaction_id"]
    async with system.http(BOB) as bob:
        theirs = await bob.get(f"/api/interactions/{mine}/outcome")
        unknown = await bob.get(f"/api/interactions/{uuid.uuid4()}/outcome")
        malformed = await bob.get("/api/interactions/not-an-id/outcome")
        deleted = await bob.delete(f"/api/interactions/{mine}")
        assert (
            theirs.status_code == unknown.status_code == malformed.status_code == deleted.status_code == 404
        )
        assert theirs.json() == unknown.json() == malformed.json() == deleted.json()
    async with system.http(ALICE) as alice:
        assert (await outcome(alice, to_alice))["status"] == "pending"  # addressed to alice
        assert (await outcome(alice, mine))["status"] == "pending"  # asked by alice
        refused = await alice.delete(f"/api/interactions/{to_alice}")  # not hers to withdraw
        assert refused.status_code == 403


async def test_a_sensitive_answer_reaches_only_the_identity_that_asked(system: System) -> None:
    async with system.http(OPERATOR) as op:
        ix = (await ask(op, question="PIN?", audience="alice", sensitive=True))["interaction_id"]
        assert await answer(system, ix, "1234", token=ALICE) == 200
        mine = await outcome(op, ix, wait=10)
        assert mine["status"] == "answered" and mine["answer"] == "1234" and mine["sensitive"] is True
    async with system.http(ALICE) as alice:
        addressed = await outcome(alice, ix)
    assert addressed["status"] == "answered" and addressed["sensitive"] is True and "answer" not in addressed


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"question": ""}, "question"),
        ({"question": "Pick?", "answer_format": "select"}, "options"),
        ({"question": "Soon?", "timeout": -1}, "timeout"),
        ({"question": "Typo?", "timout": 5}, "timout"),
        ({"question": 42}, "question"),
        ({"question": "Link?", "link": "https://x.example/{callback_url}"}, "link"),
        ({"question": "Where?", "channel": "nosuchchannel"}, "channel"),
        ({"question": "Hook?", "notify_url": "http://hooks.example.com/in"}, "notify_url"),
        ({"question": "Inside?", "notify_url": "https://10.0.0.7/in"}, "notify_url"),
    ],
)
async def test_bad_input_is_a_400_naming_the_field_and_records_nothing(
    system: System, store: EventStore, body: dict[str, Any], field: str
) -> None:
    before = await store.bounds()
    async with system.http() as http:
        response = await http.post("/api/asks", json=body)
        not_json = await http.post("/api/asks", content=b"[1, 2]")
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert not_json.status_code == 400
    assert await store.bounds() == before


async def test_a_user_naming_another_identitys_audience_is_refused_and_nothing_recorded(
    system: System, store: EventStore
) -> None:
    before = await store.bounds()
    async with system.http(BOB) as bob:
        response = await bob.post("/api/asks", json={"question": "For alice?", "audience": "alice"})
    assert response.status_code == 403 and "only to itself" in response.json()["error"]
    assert await store.bounds() == before


@pytest.mark.settings(http_max_long_polls=2)
async def test_long_polls_beyond_the_bound_are_a_503_with_retry_after(system: System) -> None:
    async with system.http() as http:
        ix = (await ask(http, question="Busy?"))["interaction_id"]

        async def hold() -> dict[str, Any]:
            while True:  # a probe below may take the slot a moment first: then try again
                r = await http.get(f"/api/interactions/{ix}/outcome", params={"wait": 3600})
                if r.status_code != 503:
                    assert r.status_code == 200, r.text
                    data: dict[str, Any] = r.json()["data"]
                    return data

        held = [asyncio.create_task(hold()) for _ in range(2)]

        async def one_more() -> httpx.Response:
            # Under the bound this poll is held 10 ms and answers pending; at the bound it is refused.
            return await http.get(f"/api/interactions/{ix}/outcome", params={"wait": 0.01})

        refused = await eventually(
            one_more, "the door to hold both polls", until=lambda r: r.status_code == 503
        )
        assert refused.headers["retry-after"] == "1" and refused.json()["error"] == TOO_MANY_POLLS
        assert (await outcome(http, ix, wait=0))["status"] == "pending"  # an instant read is never held
        assert await answer(system, ix, "ok") == 200
        assert [(await p)["answer"] for p in held] == ["ok", "ok"]
        negative = await http.get(f"/api/interactions/{ix}/outcome", params={"wait": -1})
        assert negative.status_code == 400 and negative.json()["field"] == "wait"


@pytest.mark.settings(http_poll_max_wait_seconds=0.5)
async def test_a_wait_longer_than_the_doors_maximum_is_cut_to_it(system: System) -> None:
    async with system.http() as http:
        ix = (await ask(http, question="Still there?"))["interaction_id"]
        started = asyncio.get_running_loop().time()
        got = await outcome(http, ix, wait=3600)
        assert got["status"] == "pending"
        assert asyncio.get_running_loop().time() - started < 5


async def test_post_runs_starts_a_served_flow_and_warns_for_an_unserved_one(
    system: System, workers: Workers
) -> None:
    def register(w: layby.Worker) -> None:
        @w.flow("http-served")
        async def served(order: dict[str, Any]) -> dict[str, Any]:
            return order

    await workers.serve(await workers.new(register))
    async with system.http() as http:
        started = await http.post("/api/runs", json={"flow": "http-served", "input": {"n": 1}})
        assert started.status_code == 201, started.text
        run_id = started.json()["data"]["run_id"]
        assert "warning" not in started.json()["data"]
        orphan = await http.post("/api/runs", json={"flow": "http-nobody"})
        assert orphan.status_code == 201
        assert "no worker serves flow 'http-nobody'" in orphan.json()["data"]["warning"]
        again = await http.post(
            "/api/runs", json={"flow": "http-served", "run_id": run_id, "input": {"n": 1}}
        )
        assert again.status_code == 201 and again.json()["data"]["run_id"] == run_id
        for body, field in (
            ({"flow": "no spaces allowed"}, "flow"),
            ({"flow": ""}, "flow"),
            ({"flow": "ok", "run_id": "nope"}, "run_id"),
            ({"flow": "ok", "extra": 1}, "extra"),
            ({"input": {}}, "flow"),
        ):
            refused = await http.post("/api/runs", json=body)
            assert refused.status_code == 400, (body, refused.text)
            assert refused.json()["field"] == field, (body, refused.text)
        view = await http.get(f"/api/runs/{run_id}")
        assert view.status_code == 200


async def test_http_asks_and_runs_need_nothing_nats_forbids_the_door(secured: Secured) -> None:  # noqa: F811 - the fixture
    """Under NATS authorization the door sends the ask, the prune and the run start, hears the
    wake, and hands a sensitive answer to its asker without reading a sealed answer itself (the
    fixture fails on any permission violation)."""
    system = secured.system
    async with system.http(ALICE) as alice:
        ix = (await ask(alice, question="PIN?", audience="alice", sensitive=True))["interaction_id"]
        polling = asyncio.create_task(outcome(alice, ix, wait=20))
        assert await answer(system, ix, "4321", token=ALICE) == 200
        got = await polling
        assert got["status"] == "answered" and got["answer"] == "4321"
        other = (await ask(alice, question="Withdraw?"))["interaction_id"]
        assert (await alice.delete(f"/api/interactions/{other}")).json()["data"]["outcome"] == "pruned"
        started = await alice.post("/api/runs", json={"flow": "nobody-serves-this"})
        assert started.status_code == 201 and "warning" in started.json()["data"]
