"""A real LangGraph graph using Layby as its inbox (docs/review.md#langgraphs-humaninterrupt): a
node interrupts with LangGraph's ``HumanInterrupt``, the graph's checkpointer keeps it, ``layby.answer_interrupt``
gets the person's decision from Layby, and the graph resumes with the ``HumanResponse`` — accepted,
edited or rejected by a person at the answer door, on real NATS and PostgreSQL."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import uuid
from typing import Any, TypedDict

import pytest

from layby.review import answer_interrupt
from tests.conftest import System
from tests.helpers import eventually

pytestmark = pytest.mark.integration

if importlib.util.find_spec("langgraph") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must install the test extra, which brings LangGraph (see .ci/run)")
    pytest.skip("LangGraph is not installed: pip install -e '.[test]'", allow_module_level=True)

from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.types import Command, interrupt  # noqa: E402


class State(TypedDict, total=False):
    amount: int
    paid: int | None
    note: str


def build_graph() -> Any:
    """An agent's refund step: ask a human (the Agent Inbox shape), then act on the response."""

    def propose(state: State) -> State:
        response = interrupt(
            {
                "action_request": {"action": "refund", "args": {"amount": state["amount"]}},
                "config": {
                    "allow_accept": True,
                    "allow_edit": True,
                    "allow_respond": False,
                    "allow_ignore": True,
                },
                "description": "Refund the customer's last order",
            }
        )
        if response["type"] in ("accept", "edit"):
            return {"paid": response["args"]["args"]["amount"], "note": response["type"]}
        return {"paid": None, "note": response["type"]}

    graph = StateGraph(State)
    graph.add_node("propose", propose)
    graph.add_edge(START, "propose")
    graph.add_edge("propose", END)
    return graph.compile(checkpointer=InMemorySaver())


async def decide_in_layby(system: System, answer_of: Any) -> None:
    """The person: finds the review in the inbox and answers it at the answer door."""
    async with system.http() as http:

        async def listed() -> dict[str, Any] | None:
            items = (await http.get("/api/interactions?pageSize=200")).json()["data"]["items"]
            return next((i for i in items if i["answer_format"] == "review"), None)

        item = await eventually(listed, "the graph's review in the inbox", retry=())
        resp = await http.post(
            f"/api/interactions/{item['interaction_id']}/answer", json={"answer": answer_of(item)}
        )
        assert resp.status_code == 200, resp.text


@pytest.mark.parametrize(
    ("decision", "paid", "note"),
    [
        ({"decision": "accept"}, 120, "accept"),
        ({"decision": "edit", "arguments": {"amount": 80}}, 80, "edit"),
        ({"decision": "reject", "reason": "fraud"}, None, "ignore"),
    ],
)
async def test_a_langgraph_interrupt_is_decided_in_layby_and_the_graph_resumes_with_it(
    system: System, decision: dict[str, Any], paid: int | None, note: str
) -> None:
    client = await system.sdk()
    graph = build_graph()
    config = {"configurable": {"thread_id": str(uuid.uuid4())}}
    first = await graph.ainvoke({"amount": 120}, config)
    (pending,) = first["__interrupt__"]
    assert graph.get_state(config).next == ("propose",)  # parked in the checkpointer

    def answer_of(item: dict[str, Any]) -> dict[str, Any]:
        return (
            {**decision, "arguments_sha256": item["format_payload"]["arguments_sha256"]}
            if decision["decision"] != "reject"
            else decision
        )

    person = asyncio.create_task(decide_in_layby(system, answer_of))
    response = await answer_interrupt(pending.value, client=client, timeout=30)
    await person
    final = await graph.ainvoke(Command(resume=response), config)
    assert (final["paid"], final["note"]) == (paid, note)
    assert graph.get_state(config).next == ()
