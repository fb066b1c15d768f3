"""Caller asks, runs that call runs, and the generic tools from inside a flow.

docs/caller-asks.md. Real NATS and PostgreSQL, the five services in-process, workers in-process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import layby
from layby_contracts.errors import BadInput
from tests.conftest import System
from tests.helpers import finished_run, serving, soon

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def worker(system: System) -> AsyncIterator[layby.Worker]:
    client = await system.sdk()
    w = layby.Worker(client, settings=system.settings)

    @w.flow("tool")
    async def tool(inp: dict[str, Any]) -> dict[str, Any]:
        if inp.get("ask"):
            answer = await layby.ask_user(
                "proceed?", answer_format="confirm", to="caller", expiry_at=soon(), payload={"n": inp["n"]}
            )
            return {"tool_got": answer}
        return {"tool_done": inp["n"]}

    @w.flow("agent")
    async def agent(inp: dict[str, Any]) -> Any:
        first = await layby.call("tool", {"n": 1, "ask": inp.get("ask", False)})
        if not (isinstance(first, dict) and layby.CALLER_ASKS_KEY in first):
            return {"direct": first}
        parked = await layby.list_parked()
        asked = first[layby.CALLER_ASKS_KEY]["asks"][0]
        outcome = await layby.resume_parked(asked["id"], payload=True)
        return {"parked": parked, "asked": asked, "outcome": outcome, "after": await layby.list_parked()}

    @w.flow("bad-tools")
    async def bad_tools(inp: dict[str, Any]) -> Any:
        try:
            await layby.resume_parked("not-an-entry", payload=1)
        except BadInput as exc:
            return {"error": str(exc), "field": exc.field}
        return {"error": None}

    async with serving(w):
        yield w


async def test_a_call_returns_the_called_runs_result(system: System, worker: layby.Worker) -> None:
    """``layby.call`` runs another flow as the caller's child and returns its result
    (docs/caller-asks.md#runs-that-call-runs)."""
    run_id = await worker.start("agent", {})
    run = await finished_run(system, run_id)
    assert run["result"] == {"direct": {"tool_done": 1}}


async def test_a_caller_ask_is_handed_up_and_answered_by_the_caller_with_the_generic_tools(
    system: System, worker: layby.Worker
) -> None:
    """A child's caller ask reaches its caller as the call's value; the caller sees it with
    ``list_parked`` and resumes it with ``resume_parked``, getting the child's next outcome; the
    entry leaves the subject once taken, and the run's record lists it among the interactions it
    resolved (docs/caller-asks.md#the-generic-tools)."""
    run_id = await worker.start("agent", {"ask": True})
    run = await finished_run(system, run_id, timeout=30)
    result = run["result"]
    entry = result["asked"]
    assert entry == {
        "id": entry["id"],
        "status": "asking",
        "to": "caller",
        "asked_by": ["agent", "tool"],
        "question": "proceed?",
        "answer_format": "confirm",
        "group_id": entry["group_id"],
        "payload": {"n": 1},
    }
    assert result["parked"] == [entry]
    assert result["outcome"] == {"id": entry["id"], "status": "finished", "result": {"tool_got": True}}
    assert result["after"] == []
    assert run["resumed_interactions"] == [entry["id"]]


async def test_caller_asks_need_a_run_and_are_always_async(system: System) -> None:
    """``to="caller"`` outside a run raises before anything is stored; ``mode="sync"`` and a
    ``payload`` on a person's question are refused naming the field
    (docs/caller-asks.md#asking-the-caller)."""
    client = await system.sdk()
    with pytest.raises(RuntimeError, match="needs a resumable run"):
        await client.ask_user("proceed?", to="caller", expiry_at=soon())
    with pytest.raises(BadInput) as sync:
        await client.ask_user("proceed?", to="caller", mode="sync")
    assert sync.value.field == "mode"
    with pytest.raises(BadInput) as payload:
        await client.ask_user("proceed?", payload={"x": 1}, timeout=5)
    assert payload.value.field == "payload"


async def test_a_generic_tool_naming_no_parked_entry_raises_at_once(
    system: System, worker: layby.Worker
) -> None:
    """``resume_parked`` of an id that is not parked on the run's subject raises the refusal,
    naming it, at once and never retried like a transient failure
    (docs/caller-asks.md#the-generic-tools)."""
    run_id = await worker.start("bad-tools", {})
    run = await finished_run(system, run_id, timeout=15)
    assert run["result"] == {
        "error": "resume_expr named not-an-entry, which is not parked on this subject",
        "field": "resume_expr",
    }
