"""``GET /api/interactions/{id}/history`` against the running system (docs/doors/history.md)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from layby.review import review
from layby_domain.formats.review import arguments_sha256
from tests.conftest import ALICE, BOB, System
from tests.integration.test_answer_door import open_question
from tests.integration.test_review import pending_review

pytestmark = pytest.mark.integration


async def test_the_history_lists_the_ask_and_the_answer_with_who_and_where(system: System) -> None:
    task, iid = await open_question(
        system, question="Deploy?", answer_format="confirm", timeout=30, audience="alice"
    )
    async with system.http(ALICE) as http:
        resp = await http.post(
            f"/api/interactions/{iid}/answer", json={"answer": True}, headers={"Layby-Client": "inbox"}
        )
        assert resp.status_code == 200
        assert await asyncio.wait_for(task, 10) is True
        history = await http.get(f"/api/interactions/{iid}/history")
    assert history.status_code == 200, history.text
    entries = history.json()["data"]["entries"]
    assert [(e["kind"], e.get("by")) for e in entries] == [("asked", "ops"), ("answered", "alice")]
    assert entries[0]["answer_format"] == "confirm" and entries[0]["audience"] == "alice"
    assert (entries[1]["via"], entries[1]["answer"]) == ("inbox", True)
    assert entries[0]["seq"] < entries[1]["seq"]


async def test_a_review_decision_is_in_its_history(system: System) -> None:
    client = await system.sdk()
    task = asyncio.create_task(review("pay", {"amount": 3}, client=client, timeout=30))
    item = await pending_review(system, task)
    iid = item["interaction_id"]
    async with system.http() as http:
        accept = {"decision": "accept", "arguments_sha256": arguments_sha256({"amount": 3})}
        assert (
            await http.post(f"/api/interactions/{iid}/answer", json={"answer": accept})
        ).status_code == 200
        await asyncio.wait_for(task, 10)
        entries = (await http.get(f"/api/interactions/{iid}/history")).json()["data"]["entries"]
    assert (entries[-1]["decision"], entries[-1]["arguments_sha256"]) == (
        "accept",
        arguments_sha256({"amount": 3}),
    )


async def test_a_sensitive_answer_stays_out_of_the_history(system: System) -> None:
    task, iid = await open_question(system, question="PIN?", sensitive=True, timeout=30)
    async with system.http() as http:
        assert (
            await http.post(f"/api/interactions/{iid}/answer", json={"answer": "1234"})
        ).status_code == 200
        await asyncio.wait_for(task, 10)
        resp = await http.get(f"/api/interactions/{iid}/history")
    assert "1234" not in resp.text
    assert "answer" not in resp.json()["data"]["entries"][-1]


async def test_another_users_question_an_unknown_id_and_a_malformed_id_are_the_same_404(
    system: System,
) -> None:
    task, iid = await open_question(system, question="Only Alice?", timeout=30, audience="alice")
    async with system.http(BOB) as bob, system.http(ALICE) as alice:
        theirs = await bob.get(f"/api/interactions/{iid}/history")
        unknown = await bob.get("/api/interactions/0b4e3f4e-2c1a-4d6e-9a51-3f1f0f4c1a2b/history")
        malformed = await bob.get("/api/interactions/not-an-id/history")
        assert theirs.status_code == unknown.status_code == malformed.status_code == 404
        assert theirs.json() == unknown.json() == malformed.json()
        assert (await alice.get(f"/api/interactions/{iid}/history")).status_code == 200
    async with system.http(None) as anonymous:
        assert (await anonymous.get(f"/api/interactions/{iid}/history")).status_code == 401
    task.cancel()


async def test_the_export_lists_every_step_in_the_range_as_json_lines(system: System) -> None:
    """Operators export a time range; steps after ``until`` and before ``since`` stay out."""
    since = datetime.now(UTC) - timedelta(seconds=1)
    task, iid = await open_question(system, question="Export me?", answer_format="confirm", timeout=30)
    async with system.http() as http:
        assert (await http.post(f"/api/interactions/{iid}/answer", json={"answer": False})).status_code == 200
        await asyncio.wait_for(task, 10)
        until = datetime.now(UTC) + timedelta(seconds=1)
        resp = await http.get("/api/history", params={"since": since.isoformat(), "until": until.isoformat()})
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in resp.text.splitlines()]
        mine = [(line["kind"], line.get("answer")) for line in lines if line["interaction_id"] == iid]
        assert mine == [("asked", None), ("answered", False)], resp.text
        later = await http.get(
            "/api/history",
            params={"since": until.isoformat(), "until": (until + timedelta(hours=1)).isoformat()},
        )
        assert later.status_code == 200 and later.text == ""


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "yesterday", "until": "2026-01-02T00:00:00Z"}, "since"),
        ({"since": "2026-01-01T00:00:00", "until": "2026-01-02T00:00:00Z"}, "since"),
        ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
    ],
)
async def test_a_bad_export_range_is_400_naming_the_field(
    system: System, params: dict[str, str], field: str
) -> None:
    async with system.http() as http:
        resp = await http.get("/api/history", params=params)
    assert resp.status_code == 400
    assert resp.json()["field"] == field


async def test_the_export_is_for_operators_only(system: System) -> None:
    params = {"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z"}
    async with system.http(ALICE) as http:
        assert (await http.get("/api/history", params=params)).status_code == 403
