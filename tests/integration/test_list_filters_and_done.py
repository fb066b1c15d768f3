"""The list door's filters and orders over the whole pending set (docs/doors/list.md#filters-and-order)
and the done door (docs/doors/done.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import wait_total

pytestmark = pytest.mark.integration


async def listed(system: System, query: str, token: str | None = None) -> dict[str, Any]:
    async with system.http(token) if token else system.http() as http:
        resp = await http.get(f"/api/interactions?{query}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json()["data"])


async def seed(system: System) -> list[asyncio.Task[Any]]:
    client = await system.sdk()
    tasks = []
    plan = [
        ("Deploy the Payments service?", "confirm", "release", 300),
        ("Which region first?", "select", "release", 60),
        ("Describe the outage", "text", "incident", 600),
        ("Approve the refund for order 7", "confirm", "billing", 120),
    ]
    for i, (question, fmt, group, timeout) in enumerate(plan):
        options = ["eu", "us"] if fmt == "select" else None
        tasks.append(
            asyncio.create_task(
                client.ask_user(question, answer_format=fmt, options=options, group_id=group, timeout=timeout)
            )
        )
        await wait_total(system, i + 1)
    return tasks


async def test_search_format_and_group_filters_narrow_the_whole_pending_set_before_paging(
    system: System,
) -> None:
    tasks = await seed(system)
    try:
        found = await listed(system, "q=payments&pageSize=1")
        assert found["total"] == 1 and found["items"][0]["question"] == "Deploy the Payments service?"
        assert (await listed(system, "q=ORDER%207"))["items"][0][
            "question"
        ] == "Approve the refund for order 7"
        confirms = await listed(system, "format=confirm&pageSize=1")
        assert confirms["total"] == 2 and confirms["next_page"] == 2
        release = await listed(system, "group=release")
        assert {i["question"] for i in release["items"]} == {
            "Deploy the Payments service?",
            "Which region first?",
        }
        both = await listed(system, "group=release&format=select")
        assert [i["question"] for i in both["items"]] == ["Which region first?"]
        assert (await listed(system, "q=nothing-like-this"))["total"] == 0
        assert (await listed(system, "origin=slack"))["total"] == 0
        assert (await listed(system, "q="))["total"] == 4  # empty means no filter
    finally:
        for t in tasks:
            t.cancel()


async def test_the_list_sorts_newest_oldest_and_by_deadline(system: System) -> None:
    tasks = await seed(system)
    try:
        newest = [i["question"] for i in (await listed(system, "sort=newest"))["items"]]
        assert newest[0] == "Approve the refund for order 7" and newest[-1] == "Deploy the Payments service?"
        oldest = [i["question"] for i in (await listed(system, "sort=oldest"))["items"]]
        assert oldest == list(reversed(newest))
        deadline = [i["question"] for i in (await listed(system, "sort=deadline"))["items"]]
        assert deadline == [
            "Which region first?",
            "Approve the refund for order 7",
            "Deploy the Payments service?",
            "Describe the outage",
        ]
    finally:
        for t in tasks:
            t.cancel()


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("format=essay", "format", "format must be one of text, confirm, select, form, external, review"),
        ("sort=random", "sort", "sort must be one of group, newest, oldest, deadline"),
        ("q=" + "x" * 201, "q", "q must be at most 200 characters"),
        ("group=%00", "group", "group must not contain NUL characters"),
    ],
)
async def test_a_bad_filter_is_400_naming_the_field(
    system: System, query: str, field: str, message: str
) -> None:
    async with system.http() as http:
        resp = await http.get(f"/api/interactions?{query}")
    assert resp.status_code == 400
    assert resp.json() == {"error": message, "field": field, "code": "bad-input"} or (
        resp.json()["error"] == message and resp.json().get("field") == field
    )
    assert "xxxxxxxxxx" not in resp.text  # the value is not reflected


async def test_a_restricted_caller_filters_only_what_it_may_see(system: System) -> None:
    client = await system.sdk()
    tasks = [
        asyncio.create_task(client.ask_user("ship it?", answer_format="confirm", audience=aud, timeout=60))
        for aud in ("alice", "bob")
    ]
    await wait_total(system, 2)
    try:
        assert (await listed(system, "format=confirm", ALICE))["total"] == 1
    finally:
        for t in tasks:
            t.cancel()


async def test_the_done_list_says_what_was_answered_by_whom_when_and_where(system: System) -> None:
    client = await system.sdk()
    asks = [
        asyncio.create_task(client.ask_user(q, timeout=60, group_id="g"))
        for q in ("from the inbox?", "from the cli?", "from the api?", "given up?")
    ]
    items = (await wait_total(system, 4))["items"]
    ids = {i["question"]: i["interaction_id"] for i in items}
    async with system.http() as http:
        for question, client_name in (
            ("from the inbox?", "inbox"),
            ("from the cli?", "cli"),
            ("from the api?", None),
        ):
            headers = {"Layby-Client": client_name} if client_name else {}
            resp = await http.post(
                f"/api/interactions/{ids[question]}/answer",
                json={"answer": question.upper()},
                headers=headers,
            )
            assert resp.status_code == 200
    asks[3].cancel()
    await asyncio.gather(*asks, return_exceptions=True)
    await wait_total(system, 0)
    async with system.http() as http:
        done = (await http.get("/api/interactions/done?pageSize=10")).json()["data"]
    assert done["total"] == 4
    by_q = {i["question"]: i for i in done["items"]}
    assert by_q["from the inbox?"]["via"] == "inbox"
    assert by_q["from the cli?"]["via"] == "cli"
    assert by_q["from the api?"]["via"] == "api"
    assert by_q["from the inbox?"]["answer"] == "FROM THE INBOX?"
    assert by_q["from the inbox?"]["status"] == "answered" and by_q["from the inbox?"]["by"]
    assert by_q["given up?"]["status"] == "removed" and by_q["given up?"]["reason"] == "cancelled"
    assert "answer" not in by_q["given up?"]
    # newest first
    stamps = [i["at"] for i in done["items"]]
    assert stamps == sorted(stamps, reverse=True)


async def test_the_done_list_never_shows_a_sensitive_answer_and_hides_other_identities(
    system: System,
) -> None:
    client = await system.sdk()
    secret = asyncio.create_task(client.ask_user("password?", sensitive=True, audience="alice", timeout=60))
    other = asyncio.create_task(client.ask_user("for bob", audience="bob", timeout=60))
    items = (await wait_total(system, 2))["items"]
    ids = {i["question"]: i["interaction_id"] for i in items}
    async with system.http() as http:
        for q in ("password?", "for bob"):
            assert (
                await http.post(f"/api/interactions/{ids[q]}/answer", json={"answer": "hunter2"})
            ).status_code == 200
    await asyncio.gather(secret, other)
    await wait_total(system, 0)
    async with system.http(ALICE) as http:
        done = (await http.get("/api/interactions/done")).json()["data"]
    assert [i["question"] for i in done["items"]] == ["password?"]
    assert "answer" not in done["items"][0] and done["items"][0]["sensitive"] is True
    assert "hunter2" not in str(done)


async def test_the_cli_answer_is_recorded_as_answered_from_the_cli(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    from layby.cli import main as cli_main

    monkeypatch.setenv("LAYBY_URL", system.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("cli?", timeout=60))
    items = (await wait_total(system, 1))["items"]
    code = await asyncio.to_thread(
        cli_main,
        ["interactions", "answer", items[0]["interaction_id"], "--answer", '"ok"'],
    )
    assert code == 0
    assert await ask == "ok"
    await wait_total(system, 0)
    async with system.http() as http:
        done = (await http.get("/api/interactions/done")).json()["data"]
    assert done["items"][0]["via"] == "cli"
