"""``GET /api/interactions/stream``: tail-only SSE with Last-Event-ID resume (docs/doors/stream.md#the-stream-door)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import structlog

from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import eventually, sse, wait_total

pytestmark = pytest.mark.integration


async def test_stream_headers(system: System) -> None:
    """200 text/event-stream with no-cache, keep-alive and X-Accel-Buffering: no (docs/doors/stream.md#request-and-headers)."""
    async with system.http() as http, http.stream("GET", "/api/interactions/stream") as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["x-accel-buffering"] == "no"


async def test_stream_is_tail_only_and_frames_carry_stream_sequence_ids(system: System) -> None:
    """No backlog on connect; add/answered frames with id: = stream sequence (docs/doors/stream.md#tail-only)."""
    client = await system.sdk()
    old = asyncio.create_task(client.ask_user("before connect", timeout=60))
    await wait_total(system, 1)
    async with sse(system) as stream:
        task = asyncio.create_task(client.ask_user("after connect", timeout=60))
        add = await stream.next()
        assert add.event == "interaction.add"
        assert add.data["question"] == "after connect"  # the earlier question is not replayed
        iid = add.data["interaction_id"]
        async with system.http() as http:
            await http.post(f"/api/interactions/{iid}/answer", json={"answer": "done"})
        answered = await stream.until("interaction.answered", iid)
        assert answered.data == {"interaction_id": iid, "group_id": add.data["group_id"]}
        assert int(answered.id) > int(add.id)
        bounds = await _bounds(system)
        assert int(answered.id) <= bounds[1]
    assert await task == "done"
    old.cancel()


async def test_cancelled_ask_emits_removed(system: System) -> None:
    """A cancelled sync ask is pruned and appears as interaction.removed (docs/aggregates/interaction.md#cancellation, docs/doors/stream.md#expiry-and-removal-frames)."""
    client = await system.sdk()
    async with sse(system) as stream:
        task = asyncio.create_task(client.ask_user("cancel me", timeout=60))
        add = await stream.next()
        task.cancel()
        removed = await stream.until("interaction.removed", add.data["interaction_id"])
        assert removed.data == {
            "interaction_id": add.data["interaction_id"],
            "group_id": add.data["group_id"],
        }
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_reconnect_with_last_event_id_receives_the_missed_answered_frame(system: System) -> None:
    """An answered frame that landed during a disconnect is delivered on reconnect (docs/doors/stream.md#resume-with-last-event-id)."""
    client = await system.sdk()
    async with sse(system) as stream:
        task = asyncio.create_task(client.ask_user("while away", timeout=60))
        add = await stream.next()
    iid = add.data["interaction_id"]
    async with system.http() as http:
        await http.post(f"/api/interactions/{iid}/answer", json={"answer": "x"})
    await task
    async with sse(system, headers={"Last-Event-ID": add.id}) as stream:
        missed = await stream.next()
    assert (missed.event, missed.data["interaction_id"]) == ("interaction.answered", iid)


async def test_query_parameter_last_event_id_is_the_fallback(system: System) -> None:
    """?last_event_id= is accepted when a proxy strips the header (docs/doors/stream.md#resume-with-last-event-id)."""
    client = await system.sdk()
    async with sse(system) as stream:
        task = asyncio.create_task(client.ask_user("q", timeout=60))
        add = await stream.next()
    task.cancel()
    async with sse(system, params={"last_event_id": str(int(add.id) - 1)}) as stream:
        replayed = await stream.next()
    assert replayed.id == add.id


async def test_header_wins_over_the_query_parameter(system: System) -> None:
    """When both are given, the Last-Event-ID header wins (docs/doors/stream.md#header-wins)."""
    client = await system.sdk()
    async with sse(system) as stream:
        t1 = asyncio.create_task(client.ask_user("one", timeout=60))
        first = await stream.next()
        t2 = asyncio.create_task(client.ask_user("two", timeout=60))
        second = await stream.next()
    async with sse(
        system, headers={"Last-Event-ID": first.id}, params={"last_event_id": str(int(first.id) - 1)}
    ) as stream:
        got = await stream.next()
    assert got.id == second.id
    t1.cancel()
    t2.cancel()


@pytest.mark.parametrize("bad", ["garbage", "-5", "99999999"])
async def test_malformed_or_unknown_id_falls_back_to_the_tail_and_logs_it(system: System, bad: str) -> None:
    """A malformed or uncovered id falls back to the tail end and is logged (docs/doors/stream.md#fallback-to-the-tail)."""
    client = await system.sdk()
    earlier = asyncio.create_task(client.ask_user("earlier", timeout=60))
    await wait_total(system, 1)
    with structlog.testing.capture_logs() as logs:
        async with sse(system, headers={"Last-Event-ID": bad}) as stream:
            later = asyncio.create_task(client.ask_user("later", timeout=60))
            frame = await stream.next()
    assert frame.data["question"] == "later"
    assert [e["reason"] for e in logs if e["event"] == "stream.resume_fallback"] in (
        ["malformed"],
        ["ahead_of_log"],
    )
    earlier.cancel()
    later.cancel()


@pytest.mark.settings(sse_resume_window=2)
async def test_an_aged_out_id_falls_back_and_logs(system: System) -> None:
    """An id older than the resume window falls back to the tail and is logged (docs/doors/stream.md#resume-window)."""
    client = await system.sdk()
    async with sse(system) as stream:
        tasks = [asyncio.create_task(client.ask_user(f"q{i}", timeout=60)) for i in range(4)]
        first = await stream.next()
        for _ in range(3):
            await stream.next()
    with structlog.testing.capture_logs() as logs:
        async with sse(system, headers={"Last-Event-ID": str(int(first.id) - 1)}) as stream:
            extra = asyncio.create_task(client.ask_user("fresh", timeout=60))
            frame = await stream.next()
    assert frame.data["question"] == "fresh"
    assert [e["reason"] for e in logs if e["event"] == "stream.resume_fallback"] == ["aged_out"]
    for t in [*tasks, extra]:
        t.cancel()


async def test_fresh_connect_is_not_logged(system: System) -> None:
    """No id at all is a normal fresh connect and is not logged (docs/doors/stream.md#fresh-connect)."""
    with structlog.testing.capture_logs() as logs:
        async with sse(system) as stream:
            client = await system.sdk()
            task = asyncio.create_task(client.ask_user("hi", timeout=60))
            await stream.next()
    assert not [e for e in logs if e["event"] == "stream.resume_fallback"]
    task.cancel()


async def test_restricted_stream_gets_only_its_own_frames(system: System) -> None:
    """Restricted callers get frames only for questions addressed to them (docs/doors/stream.md#audience-filter)."""
    client = await system.sdk()
    async with sse(system, ALICE) as alice:
        t_bob = asyncio.create_task(client.ask_user("for bob", audience="bob", timeout=60))
        t_alice = asyncio.create_task(client.ask_user("for alice", audience="alice", timeout=60))
        got = await alice.next()
        assert got.data["question"] == "for alice"
        async with system.http() as http:
            await http.post(f"/api/interactions/{got.data['interaction_id']}/answer", json={"answer": "ok"})
        assert (await alice.next()).event == "interaction.answered"
        with pytest.raises(TimeoutError):
            await alice.next(timeout=0.5)
    t_bob.cancel()
    await t_alice


@pytest.mark.settings(sse_keepalive_seconds=0.3)
async def test_keepalive_comment_when_nothing_is_delivered(system: System) -> None:
    """': keepalive' is sent when the keepalive window passes with no frame (docs/doors/stream.md#keepalive)."""
    async with sse(system, ALICE) as alice:
        client = await system.sdk(OPERATOR)
        task = asyncio.create_task(client.ask_user("for bob", audience="bob", timeout=60))
        first = await alice.next_any(timeout=5)
    assert first.comment == "keepalive"  # bob's frame neither reached alice nor reset her timer
    task.cancel()


async def test_unauthenticated_stream_is_401(system: System) -> None:
    """The stream door is authenticated (docs/doors/common.md#authentication)."""
    async with system.http("wrong-token-0123456789") as http:
        resp = await http.get("/api/interactions/stream")
    assert resp.status_code == 401
    assert resp.json() == {"error": "invalid bearer token"}


async def _bounds(system: System) -> tuple[int, int]:
    from layby.connection import connect_nats
    from layby_server.store.eventstore import EventStore

    assert system.settings.nats_url
    nc = await connect_nats(system.settings.nats_url, name="t")
    try:
        return await EventStore(nc, system.settings.names).bounds()
    finally:
        await nc.close()


@pytest.mark.settings(sse_max_clients=2)
async def test_a_stream_client_past_the_cap_gets_503_with_retry_after_and_a_freed_slot_is_reused(
    system: System,
) -> None:
    """LAYBY_SSE_MAX_CLIENTS: a client the door cannot serve is told so before any 200; when a
    client leaves, its slot is released (docs/doors/stream.md#capacity)."""
    headers = {"Authorization": f"Bearer {OPERATOR}"}
    async with httpx.AsyncClient(base_url=system.url, timeout=10) as http:
        first = await http.send(
            http.build_request("GET", "/api/interactions/stream", headers=headers), stream=True
        )
        second = await http.send(
            http.build_request("GET", "/api/interactions/stream", headers=headers), stream=True
        )
        assert first.status_code == second.status_code == 200
        refused = await http.get("/api/interactions/stream", headers=headers)
        assert refused.status_code == 503
        assert refused.json() == {"error": "too many open streams; retry later"}
        assert refused.headers["retry-after"] == "5"
        assert refused.headers["cache-control"] == "no-store"
        await first.aclose()

        async def reconnect() -> int:
            again = await http.send(
                http.build_request("GET", "/api/interactions/stream", headers=headers), stream=True
            )
            await again.aclose()
            return again.status_code

        await eventually(
            reconnect, "the slot of a client that left to be released", until=lambda status: status == 200
        )
        await second.aclose()
