"""``GET /api/interactions``: the paged pending list (docs/doors/list.md#the-list-door)."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import ALICE, System
from tests.helpers import wait_total

pytestmark = pytest.mark.integration


async def ask_many(system: System, n: int, **kwargs: object) -> list[asyncio.Task]:
    client = await system.sdk()
    return [asyncio.create_task(client.ask_user(f"q{i}", timeout=60, **kwargs)) for i in range(n)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("page=x", "page and pageSize must be integers: page=x pageSize=None"),
        ("pageSize=1.5", "page and pageSize must be integers: page=None pageSize=1.5"),
        ("page=0", "page must be >= 1"),
        ("pageSize=0", "pageSize must be >= 1"),
        ("page=1000001", "page must be <= 1000000"),
    ],
)
async def test_bad_window_is_400(system: System, query: str, message: str) -> None:
    """Non-integers, page < 1, pageSize < 1 and page > 1,000,000 give 400 (docs/doors/list.md#paging)."""
    async with system.http() as http:
        resp = await http.get(f"/api/interactions?{query}")
    assert resp.status_code == 400
    assert resp.json()["error"] == message


async def test_empty_inbox_page_shape(system: System) -> None:
    """The page envelope: items, total, page, page_size, next_page, truncated (docs/doors/list.md#response)."""
    async with system.http() as http:
        resp = await http.get("/api/interactions")
    assert resp.status_code == 200
    assert resp.json() == {
        "data": {"items": [], "total": 0, "page": 1, "page_size": 50, "next_page": None, "truncated": False}
    }


async def test_page_size_over_200_is_capped_not_refused(system: System) -> None:
    """pageSize > 200 is capped to 200 and echoed as page_size: 200 (docs/doors/list.md#paging)."""
    async with system.http() as http:
        resp = await http.get("/api/interactions?pageSize=5000")
    assert resp.status_code == 200
    assert resp.json()["data"]["page_size"] == 200


async def test_paging_and_next_page(system: System) -> None:
    """next_page is page+1 iff page * size < total (docs/doors/list.md#response)."""
    tasks = await ask_many(system, 5)
    await wait_total(system, 5)
    async with system.http() as http:
        p1 = (await http.get("/api/interactions?page=1&pageSize=2")).json()["data"]
        p3 = (await http.get("/api/interactions?page=3&pageSize=2")).json()["data"]
        p4 = (await http.get("/api/interactions?page=4&pageSize=2")).json()["data"]
    assert (len(p1["items"]), p1["total"], p1["next_page"]) == (2, 5, 2)
    assert (len(p3["items"]), p3["next_page"]) == (1, None)
    assert (p4["items"], p4["total"]) == ([], 5)
    for t in tasks:
        t.cancel()


async def test_item_shape_matches_the_add_frame(system: System) -> None:
    """Items carry the add-frame keys; optional keys are absent, never null (docs/doors/list.md#the-item)."""
    client = await system.sdk()
    task = asyncio.create_task(
        client.ask_user("Pick", answer_format="select", options=["a", "b"], timeout=60)
    )
    item = (await wait_total(system, 1))["items"][0]
    assert set(item) == {
        "interaction_id",
        "group_id",
        "question",
        "answer_format",
        "format_payload",
        "created_at",
        "timeout_at",
        "sensitive",
    }
    assert item["format_payload"] == {"options": ["a", "b"]}
    assert item["sensitive"] is False
    task.cancel()


async def test_groups_are_ordered_by_their_most_recent_question(system: System) -> None:
    """Groups ascend by their most recent question's created_at, then creation order (docs/doors/list.md#order)."""
    client = await system.sdk()
    tasks = []
    for question, group in [("a1", "A"), ("b1", "B"), ("a2", "A")]:
        tasks.append(asyncio.create_task(client.ask_user(question, group_id=group, timeout=60)))
        await wait_total(system, len(tasks))
    items = (await wait_total(system, 3))["items"]
    assert [i["question"] for i in items] == ["b1", "a1", "a2"]
    for t in tasks:
        t.cancel()


async def test_restricted_caller_sees_only_its_own_and_total_counts_only_those(system: System) -> None:
    """The audience filter runs before paging, so total counts only what the caller may see (docs/doors/list.md#audience-filter)."""
    client = await system.sdk()
    tasks = [
        asyncio.create_task(client.ask_user(f"for {aud}", audience=aud, timeout=60))
        for aud in ("alice", "bob", None, "alice")
    ]
    await wait_total(system, 4)
    async with system.http(ALICE) as http:
        data = (await http.get("/api/interactions?pageSize=1")).json()["data"]
    assert data["total"] == 2
    assert data["next_page"] == 2
    assert data["items"][0]["audience"] == "alice"
    for t in tasks:
        t.cancel()


async def test_answered_and_pruned_questions_leave_the_list(system: System) -> None:
    """Items are pending questions only (docs/doors/list.md#pending-questions-only)."""
    tasks = await ask_many(system, 2)
    items = (await wait_total(system, 2))["items"]
    q0 = next(i for i in items if i["question"] == "q0")  # asked by tasks[0]
    async with system.http() as http:
        await http.post(f"/api/interactions/{q0['interaction_id']}/answer", json={"answer": "x"})
    assert await tasks[0] == "x"
    tasks[1].cancel()
    await wait_total(system, 0)
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_unauthenticated_list_is_401(system: System) -> None:
    """The list door is authenticated (docs/doors/common.md#authentication)."""
    async with system.http(None) as http:
        resp = await http.get("/api/interactions")
    assert resp.status_code == 401
    assert resp.json() == {"error": "missing bearer token"}


async def test_a_forms_properties_keep_the_authors_order_in_the_list(system: System) -> None:
    """The inbox renders fields in schema order: the stored frame must not reorder keys."""
    client = await system.sdk()
    schema = {
        "type": "object",
        "properties": {"zeta": {"type": "string"}, "name": {"type": "string"}, "a": {"type": "integer"}},
    }
    ask = asyncio.create_task(client.ask_user("Ordered?", answer_format="form", schema=schema, timeout=30))
    await wait_total(system, 1)
    async with system.http() as http:
        raw = (await http.get("/api/interactions")).text
    assert raw.index('"zeta"') < raw.index('"name"') < raw.index('"a":')
    ask.cancel()


async def test_the_list_says_which_stream_position_it_reflects_and_can_be_seeded_with_one(
    system: System,
) -> None:
    """docs/doors/list.md#seeding-the-stream: the list's Layby-Stream-Seq covers every event it
    shows; ``after`` waits for the projection; the stream says where its frames start."""
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("Seeded?", timeout=30))
    await wait_total(system, 1)
    async with system.http() as http:
        async with http.stream("GET", "/api/interactions/stream") as stream:
            start = int(stream.headers["layby-stream-seq"])
            assert start >= 1  # the question's event came before the stream's start
            listed = await http.get("/api/interactions", params={"after": str(start)})
            assert listed.status_code == 200
            assert int(listed.headers["layby-stream-seq"]) >= start
            assert [i["question"] for i in listed.json()["data"]["items"]] == ["Seeded?"]
        bad = await http.get("/api/interactions", params={"after": "-1"})
        assert bad.status_code == 400
        assert bad.json() == {
            "error": "after must be a stream sequence (a non-negative integer)",
            "field": "after",
        }
    ask.cancel()
