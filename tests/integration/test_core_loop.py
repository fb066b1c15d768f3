"""The core loop against real NATS JetStream and PostgreSQL: ask, list, stream, answer, wake."""

from __future__ import annotations

import asyncio

import pytest

from layby import InteractionTimeoutError
from tests.conftest import OPERATOR, System

pytestmark = pytest.mark.integration


async def wait_listed(system: System, count: int, token: str = OPERATOR) -> list[dict]:
    async with system.http(token) as http:
        for _ in range(200):
            body = (await http.get("/api/interactions")).json()
            if body["data"]["total"] >= count:
                return body["data"]["items"]
            await asyncio.sleep(0.02)
    raise AssertionError(f"expected {count} pending questions")


async def test_sync_ask_returns_the_typed_answer_given_at_the_answer_door(system: System) -> None:
    """A blocked ask wakes with the typed value posted to the answer door (inventory A1.4, A16.153)."""
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Deploy?", answer_format="confirm", timeout=30))
    items = await wait_listed(system, 1)
    async with system.http() as http:
        resp = await http.post(
            f"/api/interactions/{items[0]['interaction_id']}/answer", json={"answer": True}
        )
    assert resp.status_code == 200
    assert resp.json() == {"data": {"interaction_id": items[0]["interaction_id"], "status": "answered"}}
    assert await asyncio.wait_for(task, 10) is True


async def test_sync_ask_times_out_prunes_and_raises(system: System) -> None:
    """On timeout the question is pruned and InteractionTimeoutError raised (inventory A6.63)."""
    client = await system.sdk()
    with pytest.raises(InteractionTimeoutError, match="the question was pruned"):
        await client.ask_user("Anyone?", timeout=0.3)
    async with system.http() as http:
        for _ in range(100):
            if (await http.get("/api/interactions")).json()["data"]["total"] == 0:
                break
            await asyncio.sleep(0.02)
        assert (await http.get("/api/interactions")).json()["data"]["total"] == 0
