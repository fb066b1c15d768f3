"""Hooks drive parkable runs through the door contract: a three-level chain resumed by a second
visit, a waiting outcome taken by the next, concurrent visits, a whole-chain cancel.

docs/doors/hooks.md, docs/caller-asks.md. Real NATS and PostgreSQL, the five services in-process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import layby
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, save_door, serving, soon

pytestmark = pytest.mark.timeout(120)

RESUME = """
. as $in
| [$parked[] | select(.status == "finished" or .status == "failed") | .id] as $done
| [$parked[] | select(.status == "asking") | {id: .id, payload: $in.approve}] as $asking
| if ($done | length) > 0 then $done[0]
  elif ($asking | length) > 0 and $in.approve != null then $asking[0]
  else null end
"""
START = "if .approve == null and .cancel == null then {n: .n} else null end"
CANCEL = 'if .cancel then [$parked[] | select(.status == "asking") | .id] else null end'


@pytest.fixture
async def flows(system: System) -> AsyncIterator[layby.Worker]:
    client = await system.sdk()
    w = layby.Worker(client, settings=system.settings)

    @w.flow("tool")
    async def tool(inp: dict[str, Any]) -> dict[str, Any]:
        answer = await layby.ask_user("deploy?", answer_format="confirm", to="caller", expiry_at=soon())
        return {"tool_got": answer, "n": inp.get("n")}

    @w.flow("agent")
    async def agent(inp: dict[str, Any]) -> Any:
        return await layby.call("tool", inp)

    @w.flow("relay")
    async def relay(inp: dict[str, Any]) -> Any:
        """Hands its child's question further up by asking its own caller: it stays parked."""
        first = await layby.call("tool", inp)
        asks = first[layby.CALLER_ASKS_KEY]["asks"]
        return await layby.ask_user("relay?", to="caller", expiry_at=soon(), payload={"below": asks[0]["id"]})

    async with serving(w):
        yield w


async def visit(system: System, name: str, body: dict[str, Any], wait: float = 15) -> dict[str, Any]:
    async with system.http() as http:
        response = await http.post(f"/api/hooks/{name}", params={"wait": wait}, json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def parked(system: System, subject: str) -> list[dict[str, Any]]:
    async with system.http() as http:
        response = await http.get(f"/api/subjects/{subject}/parked")
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["data"]["entries"]
    return entries


async def test_a_three_level_chain_is_resumed_by_a_second_visit_and_its_waiting_outcome_taken_by_a_third(
    system: System, store: EventStore, flows: layby.Worker
) -> None:
    """hook → agent → tool asking its caller: the question parks on the hook's subject, a second
    visit's ``resume_expr`` answers ``$parked[0]`` and gets the tool's result back, the result
    waits on the subject (a hook has no receiver), and a third visit takes it
    (docs/caller-asks.md#waiting-outcomes)."""
    await save_door(store, "deploys", kind="hook", target="agent", resume_expr=RESUME, start_expr=START)
    first = await visit(system, "deploys", {"n": 7})
    assert first["action"] == "start"
    assert first["outcome"]["status"] == "finished"  # the agent handed the question up and ended
    entries = await eventually(lambda: parked(system, "door:deploys"), "the tool's question on the subject")
    [entry] = entries
    assert entry["status"] == "asking"
    assert entry["asked_by"] == ["agent", "tool"]
    assert entry["question"] == "deploy?"

    second = await visit(system, "deploys", {"approve": True})
    assert second["action"] == "resume"
    assert second["resumed"] == [entry["id"]]
    assert second["outcome"] == {
        "status": "finished",
        "run_id": second["outcome"]["run_id"],
        "result": {"tool_got": True, "n": 7},
    }
    assert await parked(system, "door:deploys") == [{"id": entry["id"], "status": "finished"}]

    third = await visit(system, "deploys", {})
    assert third["action"] == "take"
    assert third["taken"] == [{"id": entry["id"], "status": "finished", "result": {"tool_got": True, "n": 7}}]
    assert await parked(system, "door:deploys") == []


async def test_concurrent_visits_resuming_one_entry_resume_it_exactly_once(
    system: System, store: EventStore, flows: layby.Worker
) -> None:
    """Of visits racing to resume the same entry, exactly one resumes it; the others are refused
    with 409 (docs/caller-asks.md#resume-take-and-cancel)."""
    await save_door(store, "race", kind="hook", target="agent", resume_expr=RESUME, start_expr=START)
    await visit(system, "race", {"n": 1})
    await eventually(lambda: parked(system, "door:race"), "the tool's question")
    async with system.http() as http:
        responses = await asyncio.gather(
            *(http.post("/api/hooks/race", json={"approve": i % 2 == 0}) for i in range(6))
        )
    codes = sorted(r.status_code for r in responses)
    resumed = [r for r in responses if r.status_code == 200 and r.json()["data"]["action"] == "resume"]
    assert len(resumed) == 1, [r.text for r in responses]
    assert all(code in (200, 400, 409) for code in codes), codes


async def test_a_cancel_tears_down_the_whole_chain_above_the_entry(
    system: System, store: EventStore, flows: layby.Worker
) -> None:
    """``cancel_expr`` names an entry: its run and every run linked above it end cancelled, and
    the entries leave the subject (docs/caller-asks.md#resume-take-and-cancel)."""
    await save_door(store, "chain", kind="hook", target="relay", cancel_expr=CANCEL, start_expr=START)
    first = await visit(system, "chain", {"n": 2})
    relay_run = first["run_id"]
    assert first["outcome"]["status"] == "parked"  # the relay asked its own caller
    entries = await eventually(
        lambda: parked(system, "door:chain"), "both questions", until=lambda e: len(e) == 2
    )
    tool_entry = next(e for e in entries if e["asked_by"] == ["relay", "tool"])
    async with system.http() as http:
        response = await http.post("/api/hooks/chain", json={"cancel": True})
        assert response.status_code == 200, response.text
        assert sorted(response.json()["data"]["cancelled"]) == sorted(e["id"] for e in entries)

        async def statuses() -> list[str]:
            runs = [(await http.get(f"/api/runs/{relay_run}")).json()["data"]]
            return [r["status"] for r in runs]

        await eventually(statuses, "the relay cancelled", until=lambda s: s == ["cancelled"])
    assert tool_entry["id"]
    assert await parked(system, "door:chain") == []


async def test_an_unknown_hook_needs_a_token_and_then_is_not_found(system: System) -> None:
    """Without credentials every hook name is 401 (nothing learned of which exist); with them,
    an unknown one is 404 (docs/doors/hooks.md)."""
    async with system.http(token=None) as anonymous:
        assert (await anonymous.post("/api/hooks/nope", json={})).status_code == 401
    async with system.http() as http:
        response = await http.post("/api/hooks/nope", json={})
    assert response.status_code == 404
    assert response.json() == {"error": "not found"}


async def test_extras_reach_a_target_that_declared_them_and_are_refused_otherwise(
    system: System, store: EventStore
) -> None:
    """A flow declares the extras keys it reads; a visit whose ``extras_expr`` yields only those
    starts it with them, and one that yields any other key is refused before anything starts
    (docs/caller-asks.md#extras)."""
    client = await system.sdk()
    w = layby.Worker(client, settings=system.settings)

    @w.flow("tenanted", extras=["tenant"])
    async def tenanted(inp: dict[str, Any]) -> Any:
        run = layby.current_run()
        assert run is not None
        return {"extras": run.extras, "input": inp}

    await save_door(store, "tenants", kind="hook", target="tenanted", extras_expr="{(.key): .value}")
    async with serving(w):
        started = await visit(system, "tenants", {"key": "tenant", "value": "acme"})
        assert started["outcome"]["result"] == {"extras": {"tenant": "acme"}, "input": {}}
        async with system.http() as http:
            refused = await http.post("/api/hooks/tenants", json={"key": "secret", "value": 1})
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "extras_expr yielded the key 'secret', which flow tenanted does not declare "
        "(it declares: tenant); nothing was started",
        "field": "extras_expr",
    }


@pytest.mark.parametrize(
    ("program", "error"),
    [
        ("last(repeat(1))", "resume_expr ran longer than 1.0 s"),
        ("1, 2", "resume_expr yielded more than one value; it must yield exactly one"),
        ("42", "resume_expr must yield null, an id, {id, payload}, or a list of these; it yielded a number"),
    ],
)
async def test_a_program_that_loops_or_yields_the_wrong_shape_refuses_the_visit_loudly(
    system: System, store: EventStore, program: str, error: str
) -> None:
    """A visit whose program loops, yields more than one value or a value of the wrong shape is
    refused with 400 naming the program, and nothing starts (docs/caller-asks.md#the-door-contract)."""
    await save_door(store, "broken", kind="hook", target="agent", resume_expr=program)
    async with system.http() as http:
        response = await http.post("/api/hooks/broken", json={})
        runs = (await http.get("/api/runs")).json()["data"]["items"]
    assert response.status_code == 400
    assert response.json() == {"error": error, "field": "resume_expr"}
    assert runs == []


async def test_a_conversation_receives_its_outcome_inline_so_nothing_waits_on_the_subject(
    system: System, store: EventStore, flows: layby.Worker
) -> None:
    """A conversation route is its visits' receiver: the outcome of an entry it resumed comes back
    in the response and is taken at once, so no waiting outcome is left on the conversation
    (docs/doors/hooks.md#conversations)."""
    await save_door(
        store,
        "support",
        kind="conversation",
        target="agent",
        resume_expr=RESUME,
        start_expr=START,
        subjects="sup:*",
    )
    async with system.http() as http:

        async def listed() -> list[Any]:
            items: list[Any] = (await http.get("/api/doors")).json()["data"]["items"]
            return items

        await eventually(listed, "the route in the doors list", until=lambda items: len(items) == 1)
        first = await http.post("/api/conversations/sup:42/messages", params={"wait": 15}, json={"n": 3})
        assert first.status_code == 200, first.text
        [entry] = await eventually(
            lambda: parked(system, "sup:42"), "the question", until=lambda e: len(e) == 1
        )
        second = await http.post(
            "/api/conversations/sup:42/messages", params={"wait": 15}, json={"approve": True}
        )
        assert second.status_code == 200, second.text
        outcome = second.json()["data"]["outcome"]
        assert (outcome["status"], outcome["result"]) == ("finished", {"tool_got": True, "n": 3})
        assert await parked(system, "sup:42") == []
        unrouted = await http.post("/api/conversations/other:1/messages", json={})
    assert unrouted.status_code == 404
    assert entry["asked_by"] == ["agent", "tool"]
