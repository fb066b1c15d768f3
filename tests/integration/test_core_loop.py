"""The core loop against real NATS JetStream and PostgreSQL: ask, list, stream, answer, wake."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from layby import InteractionTimeoutError
from layby_domain.clock import ManualClock
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import OPERATOR, System, start_system, stop_system
from tests.helpers import eventually, wait_total

pytestmark = pytest.mark.integration


async def wait_listed(system: System, count: int, token: str = OPERATOR) -> list[dict]:
    async with system.http(token) as http:

        async def listed() -> dict:
            return (await http.get("/api/interactions")).json()["data"]  # type: ignore[no-any-return]

        data = await eventually(
            listed, f"{count} pending questions", until=lambda data: data["total"] >= count
        )
    return data["items"]  # type: ignore[no-any-return]


async def test_sync_ask_returns_the_typed_answer_given_at_the_answer_door(system: System) -> None:
    """A blocked ask wakes with the typed value posted to the answer door (docs/asking.md#answer-formats, docs/doors/answer.md#success)."""
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
    """On timeout the question is pruned and InteractionTimeoutError raised (docs/aggregates/interaction.md#sync-timeout)."""
    client = await system.sdk()
    # A budget the ask is surely recorded within on a loaded machine: a prune that overtakes the
    # ask itself is "already gone" (tests/integration/test_ask_service.py covers that race).
    with pytest.raises(InteractionTimeoutError, match="the question was pruned"):
        await client.ask_user("Anyone?", timeout=2)
    await wait_total(system, 0)
    async with system.http() as http:
        assert (await http.get("/api/interactions")).json()["data"]["total"] == 0


async def test_module_level_ask_user_connects_from_the_environment(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`from layby import ask_user` connects with LAYBY_NATS_URL and LAYBY_TOKEN (docs/cli.md)."""
    import layby
    from layby import sdk

    monkeypatch.setenv("LAYBY_NATS_URL", str(system.settings.nats_url))
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    monkeypatch.setenv("LAYBY_NAMESPACE", system.settings.namespace)
    loop = asyncio.get_running_loop()
    try:
        task = asyncio.create_task(
            layby.ask_user("From the environment?", answer_format="confirm", timeout=30)
        )
        items = await wait_listed(system, 1)
        async with system.http() as http:
            await http.post(f"/api/interactions/{items[0]['interaction_id']}/answer", json={"answer": True})
        assert await asyncio.wait_for(task, 10) is True
    finally:
        client = sdk._clients.pop(loop, None)
        if client is not None:
            await client.close()


async def test_module_level_ask_user_checks_arguments_before_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad argument raises ValueError before any connection is opened (docs/asking.md#timeout)."""
    import layby

    monkeypatch.setenv("LAYBY_NATS_URL", "nats://127.0.0.1:1")  # nothing listens: connecting would fail
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    with pytest.raises(ValueError, match="timeout must be positive, got 0"):
        await layby.ask_user("q", timeout=0)


async def test_an_answer_recorded_after_the_budget_is_not_returned(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """An answer that lands after the deadline raises InteractionTimeoutError saying so, never a
    silent default (docs/aggregates/interaction.md#sync-timeout)."""
    clock = ManualClock(datetime.now(UTC))
    system = await start_system(settings, clock=clock)
    try:
        await system.stop_service("resume")  # no wake: the asker learns of the answer only at its deadline
        client = await system.sdk()
        task = asyncio.create_task(client.ask_user("Late?", timeout=1.5))
        items = await wait_listed(system, 1)
        clock.advance(2)  # the door's clock is past the question's deadline when it records the answer
        async with system.http() as http:
            resp = await http.post(
                f"/api/interactions/{items[0]['interaction_id']}/answer", json={"answer": "late"}
            )
        assert resp.status_code == 200
        with pytest.raises(
            InteractionTimeoutError, match="an answer was recorded after the budget and was not returned"
        ):
            await task
    finally:
        await stop_system(system)
