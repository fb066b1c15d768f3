"""A proposed action reviewed end to end on real NATS and PostgreSQL (docs/review.md): accept
bound to the exact arguments, edit, reject, the decorator and the LangGraph adapter."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

import layby
from layby.review import answer_interrupt, review, reviewed
from layby_domain.formats.review import arguments_sha256
from tests.channel_plugins import Bridge
from tests.conftest import ALICE, System
from tests.helpers import eventually

pytestmark = pytest.mark.integration

ARGS = {"to": "acme", "amount": 120}
REVIEW_PAGE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; form-action 'self'"
)
SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "integer", "minimum": 1}},
    "required": ["to", "amount"],
}


async def pending_review(
    system: System, task: asyncio.Task[Any], seen: set[str] | None = None
) -> dict[str, Any]:
    """The review question the task asked, as the inbox lists it (none of ``seen``)."""
    seen = set() if seen is None else seen
    async with system.http() as http:

        async def listed() -> dict[str, Any] | None:
            if task.done():
                task.result()
            items = (await http.get("/api/interactions?pageSize=200")).json()["data"]["items"]
            reviews = [i for i in items if i["answer_format"] == "review" and i["interaction_id"] not in seen]
            return reviews[0] if reviews else None

        item = await eventually(listed, "the review to be listed", retry=())
    seen.add(item["interaction_id"])
    return item


async def decide(system: System, iid: str, answer: Any, token: str | None = None) -> Any:
    async with system.http(*([token] if token else [])) as http:
        return await http.post(f"/api/interactions/{iid}/answer", json={"answer": answer})


async def test_an_accept_returns_the_proposed_arguments_and_who_accepted(system: System) -> None:
    client = await system.sdk()
    task = asyncio.create_task(
        review("pay", ARGS, schema=SCHEMA, client=client, timeout=30, audience="alice")
    )
    item = await pending_review(system, task)
    shown = item["format_payload"]
    assert shown["action"] == {"name": "pay", "arguments": ARGS, "schema": SCHEMA}
    assert shown["arguments_sha256"] == arguments_sha256(ARGS)
    resp = await decide(
        system,
        item["interaction_id"],
        {"decision": "accept", "arguments_sha256": shown["arguments_sha256"]},
        ALICE,
    )
    assert resp.status_code == 200, resp.text
    decided = await asyncio.wait_for(task, 10)
    assert decided == layby.Review(
        decision="accept", arguments=ARGS, arguments_sha256=arguments_sha256(ARGS), by="alice"
    )
    assert decided.approved


async def test_an_accept_of_other_arguments_is_409_and_the_question_stays_open(system: System) -> None:
    client = await system.sdk()
    task = asyncio.create_task(review("pay", ARGS, schema=SCHEMA, client=client, timeout=30))
    item = await pending_review(system, task)
    iid = item["interaction_id"]
    stale = arguments_sha256({"to": "mallory", "amount": 120})
    resp = await decide(system, iid, {"decision": "accept", "arguments_sha256": stale})
    assert resp.status_code == 409, resp.text
    assert resp.json()["field"] == "arguments_sha256"
    assert not task.done()
    # An edit must match the action's schema (400 naming the path), then is recorded.
    bad = {
        "decision": "edit",
        "arguments": {"to": "acme", "amount": 0},
        "arguments_sha256": arguments_sha256(ARGS),
    }
    resp = await decide(system, iid, bad)
    assert resp.status_code == 400, resp.text
    assert resp.json()["field"] == "arguments.amount"
    edited = {"to": "acme", "amount": 100}
    resp = await decide(
        system, iid, {"decision": "edit", "arguments": edited, "arguments_sha256": arguments_sha256(ARGS)}
    )
    assert resp.status_code == 200, resp.text
    decided = await asyncio.wait_for(task, 10)
    assert (decided.decision, decided.arguments) == ("edit", edited)
    assert decided.arguments_sha256 == arguments_sha256(edited)


async def test_the_decorated_tool_runs_with_the_edited_arguments_and_not_at_all_when_rejected(
    system: System,
) -> None:
    client = await system.sdk()
    ran: list[dict[str, Any]] = []

    @reviewed(client=client, timeout=30)
    async def pay(to: str, amount: int = 5) -> str:
        """Pay a vendor."""
        ran.append({"to": to, "amount": amount})
        return f"paid {amount} to {to}"

    task = asyncio.create_task(pay("acme"))
    seen: set[str] = set()
    item = await pending_review(system, task, seen)
    assert item["format_payload"]["action"]["arguments"] == {"to": "acme", "amount": 5}
    assert item["format_payload"]["action"]["description"] == "Pay a vendor."
    proposal = item["format_payload"]["arguments_sha256"]
    edit = {"decision": "edit", "arguments": {"to": "acme", "amount": 4}, "arguments_sha256": proposal}
    assert (await decide(system, item["interaction_id"], edit)).status_code == 200
    assert await asyncio.wait_for(task, 10) == "paid 4 to acme"

    task = asyncio.create_task(pay("mallory", 900))
    item = await pending_review(system, task, seen)
    resp = await decide(system, item["interaction_id"], {"decision": "reject", "reason": "not a vendor"})
    assert resp.status_code == 200, resp.text
    with pytest.raises(layby.ReviewRejectedError, match="not a vendor") as caught:
        await asyncio.wait_for(task, 10)
    assert caught.value.review.reason == "not a vendor"
    assert ran == [{"to": "acme", "amount": 4}]


async def test_a_langgraph_interrupt_gets_its_human_response(system: System) -> None:
    """HumanInterrupt in, HumanResponse out: the config's flags are the allowed decisions."""
    client = await system.sdk()
    interrupt = {
        "action_request": {"action": "send_email", "args": {"to": "a@example.com"}},
        "config": {"allow_accept": True, "allow_edit": False, "allow_ignore": True, "allow_respond": True},
        "description": "Send the summary",
    }
    task = asyncio.create_task(answer_interrupt([interrupt], client=client, timeout=30))
    item = await pending_review(system, task)
    assert item["format_payload"]["decisions"] == ["accept", "reject", "respond"]
    resp = await decide(system, item["interaction_id"], {"decision": "respond", "text": "cc the team"})
    assert resp.status_code == 200, resp.text
    assert await asyncio.wait_for(task, 10) == [{"type": "response", "args": "cc the team"}]


async def test_a_review_asked_over_http_is_answered_by_its_decision(system: System) -> None:
    """POST /api/asks takes action and decisions like any other format argument."""
    async with system.http() as http:
        body = {
            "question": "Delete the bucket?",
            "answer_format": "review",
            "action": {"name": "delete_bucket", "arguments": {"bucket": "logs"}},
            "decisions": ["accept", "reject"],
            "timeout": 30,
        }
        refused = await http.post("/api/asks", json={**body, "decisions": ["approve"]})
        assert refused.status_code == 400
        assert refused.json()["field"] == "decisions[0]"
        asked = await http.post("/api/asks", json=body)
        assert asked.status_code in (200, 201, 202), asked.text
        iid = asked.json()["data"]["interaction_id"]
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": {"decision": "reject"}})
        assert resp.status_code == 200, resp.text
        edit = {"decision": "edit", "arguments": {}, "arguments_sha256": arguments_sha256({"bucket": "logs"})}
        assert (await http.post(f"/api/interactions/{iid}/answer", json={"answer": edit})).status_code == 409


async def test_a_review_on_a_channel_shows_its_action_and_is_decided_on_its_review_page(
    chan: System, client: layby.Client, bridge: Bridge
) -> None:
    """The channel gets the action in its text and Accept / Reject; the callback URL is the review
    page (the stored proposal only, never the request), where a stale hash is 409 and an accept
    records the proposal's arguments."""
    seen = len(bridge.deliveries)
    task = asyncio.create_task(
        review("pay", ARGS, question="Pay <b>acme</b>?", client=client, timeout=30, channel="ops")
    )
    delivery = await bridge.next_delivery(seen + 1)
    assert delivery["options"] == ["Accept", "Reject"]
    assert "Action: pay" in delivery["question"]
    assert delivery["callback_url"] in delivery["question"]  # the edit link
    callback = delivery["callback_url"]
    async with httpx.AsyncClient() as http:
        page = await http.get(callback + "?x=<script>alert(1)</script>")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == REVIEW_PAGE_CSP
        assert b"Pay &lt;b&gt;acme&lt;/b&gt;?" in page.content
        assert b"alert(1)" not in page.content
        assert f'data-hash="{arguments_sha256(ARGS)}"'.encode() in page.content
        stale = await http.post(
            callback, json={"answer": {"decision": "accept", "arguments_sha256": "0" * 64}}
        )
        assert stale.status_code == 409
        accepted = await http.post(
            callback, json={"answer": {"decision": "accept", "arguments_sha256": arguments_sha256(ARGS)}}
        )
        assert accepted.status_code == 200, accepted.text
    decided = await asyncio.wait_for(task, 10)
    assert (decided.decision, decided.arguments) == ("accept", ARGS)
