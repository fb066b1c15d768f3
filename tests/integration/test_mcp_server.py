"""``layby mcp``: a real MCP client session (the SDK's ``ClientSession``) over stdio (``layby mcp``
spawned against the test stack's NATS) and over streamable HTTP, calling each tool against the
running system (docs/mcp.md). The waits, the cancel and the log run over stdio (a process of its
own, as a desktop client starts it); the rest over HTTP, served in this process."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import layby
from layby_contracts.events import InteractionAsked, InteractionRemoved
from layby_server.operations.embedded import free_port
from layby_server.store.eventstore import EventStore
from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import eventually, finished_run, serving, wait_total

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def stdio_session(
    system: System, token: str = OPERATOR, *, errlog: TextIO = sys.stderr, **extra_env: str
) -> AsyncIterator[ClientSession]:
    s = system.settings
    env = {
        **extra_env,
        **os.environ,
        "LAYBY_NATS_URL": s.nats_url or "",
        "LAYBY_TOKEN": token,
        "LAYBY_NAMESPACE": s.namespace,
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "layby.cli", "mcp"], env=env)
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_server(system: System) -> AsyncIterator[str]:
    from layby.mcp.app import serve_http

    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(serve_http(system.settings, host="127.0.0.1", port=port, stop=stop))
    url = f"http://127.0.0.1:{port}/mcp"
    async with httpx.AsyncClient() as http:
        await eventually(lambda: http.get(url), "the MCP HTTP server to listen", retry=httpx.HTTPError)
    try:
        yield url
    finally:
        stop.set()  # a graceful shutdown closes the listening socket; a cancel would leak it
        await asyncio.wait_for(task, timeout=10)


@asynccontextmanager
async def http_session(url: str, token: str = OPERATOR) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def pending_id(system: System, question: str) -> str:
    data = await wait_total(system, 1)
    item = data["items"][0]
    assert item["question"] == question
    return str(item["interaction_id"])


async def test_the_tools_are_listed_with_schemas_from_the_contracts(system: System) -> None:
    """Every tool is listed, its input schema generated from its contract Struct and closed to
    unknown arguments."""
    async with http_server(system) as url, http_session(url) as session:
        listed = await session.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"ask_user", "notify_user", "list_parked", "resume_parked", "cancel_parked"}
    ask = tools["ask_user"].input_schema
    assert ask["type"] == "object" and ask["required"] == ["question"]
    assert ask["additionalProperties"] is False
    assert {
        "answer_format",
        "options",
        "schema",
        "media",
        "audience",
        "channel",
        "recipient",
        "timeout",
        "sensitive",
    } <= set(ask["properties"])
    assert all(t.input_schema["additionalProperties"] is False for t in tools.values())


async def test_ask_user_blocks_until_answered_at_the_answer_door_and_reports_progress(system: System) -> None:
    """ask_user waits while the question is pending, sends progress, and returns the answer as
    structured content and text."""
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with stdio_session(system) as session:
        call = asyncio.create_task(
            session.call_tool(
                "ask_user",
                {"question": "ship it?", "answer_format": "select", "options": ["yes", "no"], "timeout": 30},
                progress_callback=on_progress,
            )
        )
        iid = await pending_id(system, "ship it?")
        async with system.http() as http:
            resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "yes"})
            assert resp.status_code == 200, resp.text
        result = await call
    assert not result.is_error
    assert result.structured_content["answer"] == "yes"
    assert result.content[0].text == "yes"
    assert progress, "no progress notification while waiting"


async def test_a_sensitive_answer_is_returned_but_never_logged(system: System, tmp_path: Path) -> None:
    """The answer of a sensitive question reaches the MCP client; the server's log (its standard
    error, at debug) never shows it."""
    secret = "hunter2-do-not-log"
    with (tmp_path / "stderr.log").open("w+") as errlog:
        async with stdio_session(system, errlog=errlog, LAYBY_LOG_LEVEL="debug") as session:
            call = asyncio.create_task(
                session.call_tool("ask_user", {"question": "password?", "sensitive": True, "timeout": 30})
            )
            iid = await pending_id(system, "password?")
            async with system.http() as http:
                resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": secret})
                assert resp.status_code == 200, resp.text
            result = await call
        errlog.seek(0)
        logged = errlog.read()
    assert result.structured_content["answer"] == secret
    assert iid in logged, "the server logged nothing at debug: the check below would prove nothing"
    assert secret not in logged


async def test_ask_user_past_its_deadline_is_a_tool_error_naming_the_deadline(system: System) -> None:
    async with http_server(system) as url, http_session(url) as session:
        result = await session.call_tool("ask_user", {"question": "quick?", "timeout": 0.5})
    assert result.is_error
    assert "deadline" in result.content[0].text
    assert result.structured_content["deadline"]


async def test_a_cancelled_call_withdraws_the_question(system: System, store: EventStore) -> None:
    """The client cancels the call (notifications/cancelled): the question is pruned, gone from
    the inbox, and the log records its removal."""
    async with stdio_session(system) as session:
        call = asyncio.create_task(session.call_tool("ask_user", {"question": "cancel me", "timeout": 30}))
        iid = await pending_id(system, "cancel me")
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await wait_total(system, 0)

        async def removed() -> Any:
            last = await store.last(store.names.ix(iid))
            return last is not None and isinstance(last.event, InteractionRemoved)

        await eventually(removed, "the interaction removed on the log")


async def test_an_unknown_argument_is_refused_naming_it(system: System) -> None:
    async with http_server(system) as url, http_session(url) as session:
        with pytest.raises(MCPError) as raised:
            await session.call_tool("ask_user", {"question": "x", "colour": "red"})
    assert raised.value.error.code == types.INVALID_PARAMS
    assert "colour" in raised.value.error.message
    await wait_total(system, 0)


async def test_a_notify_url_that_is_not_https_is_a_tool_error_naming_it_and_nothing_is_asked(
    system: System,
) -> None:
    """The MCP ask takes ``notify_url`` as the SDK does, and the ask service's check refuses a
    plain-http URL naming the field (docs/webhooks.md)."""
    async with http_server(system) as url, http_session(url) as session:
        result = await session.call_tool(
            "ask_user", {"question": "x", "notify_url": "http://hooks.example.com/layby", "timeout": 5}
        )
    assert result.is_error
    assert "notify_url" in result.content[0].text
    await wait_total(system, 0)


async def test_notify_user_is_recorded_to_the_feed(system: System) -> None:
    async with http_server(system) as url, http_session(url) as session:
        result = await session.call_tool("notify_user", {"message": "deploy finished"})
    assert not result.is_error, result.content
    assert result.structured_content["outcome"] == "recorded"
    async with system.http() as http:
        feed = (await http.get("/api/notifications")).json()["data"]["notifications"]
    assert [n["message"] for n in feed] == ["deploy finished"]


async def test_http_sessions_act_with_their_own_bearer_token(system: System, store: EventStore) -> None:
    """Over streamable HTTP each session acts with its own bearer token's identity: alice's
    question is asked by alice, the operator's by the operator, on one server; each is answered
    at the answer door while its call waits."""
    async with (
        http_server(system) as url,
        http_session(url, ALICE) as alice,
        http_session(url, OPERATOR) as operator,
    ):
        for session, question, identity in ((alice, "from alice?", "alice"), (operator, "from ops?", "ops")):
            call = asyncio.create_task(session.call_tool("ask_user", {"question": question, "timeout": 30}))
            iid = await pending_id(system, question)
            asked = await store.last(store.names.ix(iid))
            assert asked is not None and isinstance(asked.event, InteractionAsked)
            assert asked.event.asked_by == identity
            async with system.http() as http:
                answered = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "yes"})
                assert answered.status_code == 200, answered.text
            result = await call
            assert not result.is_error, result.content
            assert result.structured_content == {"answer": "yes", "answered_by": "ops"}


async def test_http_without_or_with_a_wrong_bearer_token_is_401(system: System) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with http_server(system) as url, httpx.AsyncClient() as http:
        missing = await http.post(url, json=body)
        wrong = await http.post(url, json=body, headers={"Authorization": "Bearer not-a-token-0123456789"})
    assert missing.status_code == 401
    assert wrong.status_code == 401


@pytest.fixture
async def parking(system: System) -> AsyncIterator[layby.Worker]:
    """``tool`` asks its caller; ``agent`` calls it and ends, leaving the caller ask parked on its
    subject (docs/caller-asks.md)."""
    client = await system.sdk()
    w = layby.Worker(client, settings=system.settings)

    @w.flow("tool")
    async def tool(inp: dict[str, Any]) -> dict[str, Any]:
        expiry = datetime.now(UTC) + timedelta(hours=1)
        answer = await layby.ask_user("proceed?", answer_format="confirm", to="caller", expiry_at=expiry)
        return {"tool_got": answer}

    @w.flow("agent")
    async def agent(inp: dict[str, Any]) -> Any:
        return await layby.call("tool", {})

    async with serving(w):
        yield w


async def parked_entry(session: ClientSession, run_id: str) -> dict[str, Any]:
    async def listed() -> Any:
        result = await session.call_tool("list_parked", {"run_id": run_id})
        assert not result.is_error, result.content
        return result.structured_content["entries"]

    entries = await eventually(listed, "a parked caller ask", until=lambda e: len(e) == 1)
    return dict(entries[0])


async def test_parked_entries_are_listed_resumed_and_cancelled(system: System, parking: layby.Worker) -> None:
    """list_parked shows a caller ask parked on a run's subject; resume_parked answers it and
    returns the chain's outcome; cancel_parked ends another one."""
    first = await parking.start("agent", {})
    second = await parking.start("agent", {})
    await finished_run(system, first)
    await finished_run(system, second)
    async with http_server(system) as url, http_session(url) as session:
        entry = await parked_entry(session, first)
        assert entry["question"] == "proceed?"
        resumed = await session.call_tool(
            "resume_parked", {"run_id": first, "id": entry["id"], "payload": True}
        )
        assert not resumed.is_error, resumed.content
        assert resumed.structured_content["status"] == "finished"
        assert resumed.structured_content["result"] == {"tool_got": True}
        taken = await session.call_tool("list_parked", {"run_id": first})
        assert taken.structured_content["entries"] == [], "the outcome was taken, not left waiting"
        other = await parked_entry(session, second)
        cancelled = await session.call_tool("cancel_parked", {"run_id": second, "ids": [other["id"]]})
        assert not cancelled.is_error, cancelled.content
        assert cancelled.structured_content["cancelled"] == [other["id"]]
        after = await session.call_tool("list_parked", {"run_id": second})
        assert after.structured_content["entries"] == []
