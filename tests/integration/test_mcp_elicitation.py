"""MCP elicitation answered by people (docs/mcp-elicitation.md): a real MCP tool server elicits (over
stdio as a subprocess for the accept, the decline and the cancelled call; in-process over the SDK's
memory streams otherwise), a real ClientSession runs Layby's handler, and a person answers
through the answer door or a channel's callback."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

pytest.importorskip("mcp")

from mcp.client._memory import InMemoryTransport
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ElicitRequestFormParams

from layby.mcp import elicitation_handler
from layby.mcp.elicitation import ElicitationCallback
from layby.sdk import Client
from mcp import ClientSession
from tests.channel_plugins import Bridge
from tests.conftest import OPERATOR, System
from tests.helpers import eventually
from tests.mcp import elicit_server

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def tool_server(handler: ElicitationCallback, *, stdio: bool = False) -> AsyncIterator[ClientSession]:
    """The elicitation test server (tests/mcp/elicit_server.py): a subprocess over stdio, or the
    same MCPServer in this process over the SDK's in-memory streams (no interpreter start-up)."""
    transport: Any
    if stdio:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "tests.mcp.elicit_server"], cwd=ROOT
        )
        transport = stdio_client(params)
    else:
        transport = InMemoryTransport(elicit_server.server)
    async with (
        transport as (read, write),
        ClientSession(read, write, elicitation_callback=handler) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str) -> dict[str, Any]:
    result = await session.call_tool(tool, {})
    assert not result.is_error, result.content
    text = result.content[0].text  # type: ignore[union-attr]
    return json.loads(text)  # type: ignore[no-any-return]


async def pending(system: System, token: str = OPERATOR) -> list[dict[str, Any]]:
    async with system.http(token) as http:

        async def listed() -> dict[str, Any]:
            return (await http.get("/api/interactions")).json()["data"]  # type: ignore[no-any-return]

        data = await eventually(listed, "the elicitation in the inbox", until=lambda d: d["total"] >= 1)
    return data["items"]  # type: ignore[no-any-return]


async def answer(system: System, interaction_id: str, value: Any) -> None:
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{interaction_id}/answer", json={"answer": value})
    assert resp.status_code == 200, resp.text


async def total(system: System) -> int:
    async with system.http() as http:
        return (await http.get("/api/interactions")).json()["data"]["total"]  # type: ignore[no-any-return]


async def test_an_elicitation_is_a_form_question_and_the_answer_is_accept_with_typed_content(
    system: System,
) -> None:
    """The request's message is the question, its schema the form; the person's values come back
    as accept, typed as requested (docs/mcp-elicitation.md#accept-decline-cancel)."""
    handler = elicitation_handler(await system.sdk(), timeout=30)
    async with tool_server(handler, stdio=True) as session:
        task = asyncio.create_task(call(session, "book_table"))
        [item] = await pending(system)
        assert item["question"] == "Book a table for the team dinner?"
        assert item["answer_format"] == "form"
        await answer(
            system,
            item["interaction_id"],
            {"guests": 4, "day": "Friday", "vegetarian": True, "seating": "terrace", "budget": 35},
        )
        result = await asyncio.wait_for(task, 20)
    assert result == {
        "action": "accept",
        "data": {"guests": 4, "day": "Friday", "vegetarian": True, "seating": "terrace", "budget": 35.0},
    }


async def test_the_form_carries_titles_constraints_defaults_and_the_decline_box(system: System) -> None:
    """Titles, bounds and enums carry over; defaults prefill data.values; required holds unless
    declined (docs/mcp-elicitation.md#schema-mapping)."""
    handler = elicitation_handler(await system.sdk(), timeout=30)
    async with tool_server(handler) as session:
        task = asyncio.create_task(call(session, "book_table"))
        [item] = await pending(system)
        schema, data = item["format_payload"]["schema"], item["format_payload"]["data"]
        assert schema["properties"]["guests"] == {
            "type": "integer",
            "title": "Guests",
            "description": "How many people",
            "minimum": 1,
            "maximum": 12,
        }
        assert schema["properties"]["seating"]["enum"] == ["inside", "terrace"]
        assert schema["properties"]["layby_decline"]["type"] == "boolean"
        assert schema["else"] == {"required": ["guests", "day"]}
        assert data["values"] == {"vegetarian": False, "seating": "inside"}
        async with system.http() as http:
            missing = await http.post(
                f"/api/interactions/{item['interaction_id']}/answer", json={"answer": {"guests": 2}}
            )
        assert missing.status_code == 400, missing.text
        await answer(system, item["interaction_id"], {"guests": 2, "day": "Monday"})
        result = await asyncio.wait_for(task, 20)
    assert result["action"] == "accept"


async def test_ticking_decline_answers_decline(system: System) -> None:
    """A person's refusal is the decline box; the required fields may stay empty
    (docs/mcp-elicitation.md#accept-decline-cancel). The handler connects from ClientSettings."""
    # The settings path: the handler connects on the first elicitation.
    settings = msgspec.structs.replace(system.settings, token=OPERATOR)
    async with (
        elicitation_handler(settings, timeout=30) as handler,
        tool_server(handler, stdio=True) as session,
    ):
        task = asyncio.create_task(call(session, "book_table"))
        [item] = await pending(system)
        await answer(system, item["interaction_id"], {"layby_decline": True})
        assert await asyncio.wait_for(task, 20) == {"action": "decline"}


async def test_the_deadline_answers_on_timeout_and_removes_the_question(system: System) -> None:
    """No answer within the timeout: cancel (or decline with on_timeout), and the question is
    pruned (docs/mcp-elicitation.md#accept-decline-cancel)."""
    client = await system.sdk()
    for on_timeout in ("cancel", "decline"):
        handler = elicitation_handler(client, timeout=0.5, on_timeout=on_timeout)  # type: ignore[arg-type]
        async with tool_server(handler) as session:
            assert await call(session, "book_table") == {"action": on_timeout}
        assert await total(system) == 0


async def test_a_url_elicitation_is_a_confirm_question_showing_the_url(system: System) -> None:
    """URL mode: yes is accept, no is decline (docs/mcp-elicitation.md#url-mode)."""
    handler = elicitation_handler(await system.sdk(), timeout=30)
    async with tool_server(handler) as session:
        for reply, action in ((True, "accept"), (False, "decline")):
            task = asyncio.create_task(call(session, "sign_in"))
            [item] = await pending(system)
            assert item["answer_format"] == "confirm"
            assert item["question"] == "Sign in to the booking site\n\nhttps://booking.example/sign-in"
            await answer(system, item["interaction_id"], reply)
            assert await asyncio.wait_for(task, 20) == {"action": action}
            await eventually(lambda: total(system), "the question answered", until=lambda n: n == 0)


async def test_an_elicitation_on_a_channel_is_answered_at_its_callback(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """channel= delivers the form to the chat channel, whose callback page renders the mapped
    fields and the decline box; the reply there is the accept (docs/mcp-elicitation.md#installing-the-handler)."""
    handler = elicitation_handler(client, channel="ops", timeout=30)
    async with tool_server(handler) as session:
        task = asyncio.create_task(call(session, "book_table"))
        delivery = await bridge.next_delivery(1)
        assert delivery["question"] == "Book a table for the team dinner?"
        assert delivery["answer_format"] == "form"
        async with httpx.AsyncClient() as http:
            page = await http.get(delivery["callback_url"])
            assert "Guests" in page.text and "Decline this request" in page.text
            reply = {"answer": {"guests": 3, "day": "Sunday"}}
            assert (await http.post(delivery["callback_url"], json=reply)).status_code == 200
        result = await asyncio.wait_for(task, 20)
    assert result["action"] == "accept"
    assert result["data"]["guests"] == 3


async def test_a_nested_object_is_refused_naming_the_property_and_nothing_is_asked(system: System) -> None:
    """A property outside the form subset is an MCP error naming it, before anything is recorded
    (docs/mcp-elicitation.md#schema-mapping)."""
    handler = elicitation_handler(await system.sdk(), timeout=30)
    async with tool_server(handler) as session:
        result = await call(session, "ship_parcel")
    assert result["code"] == -32602
    assert "requestedSchema.properties.address" in result["error"]
    assert result["data"] == {"field": "requestedSchema.properties.address"}
    assert await total(system) == 0


async def test_a_cancelled_elicitation_prunes_its_question(system: System) -> None:
    """When the session cancels the request, the handler's wait is cancelled and the question is
    pruned (docs/mcp-elicitation.md#accept-decline-cancel)."""
    handler = elicitation_handler(await system.sdk(), timeout=30)
    params = ElicitRequestFormParams(
        message="Still there?",
        requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    )
    task = asyncio.create_task(handler(None, params))  # type: ignore[arg-type]
    await pending(system)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: total(system), "the question pruned", until=lambda n: n == 0)


async def test_a_tool_call_cancelled_by_the_client_prunes_the_elicitation_question(system: System) -> None:
    """The client gives up on the tool call; the server cancels its elicitation, the handler's
    wait is cancelled and the question pruned (docs/mcp-elicitation.md#accept-decline-cancel)."""
    handler = elicitation_handler(await system.sdk(), timeout=30)
    async with tool_server(handler, stdio=True) as session:
        task = asyncio.create_task(call(session, "book_table"))
        await pending(system)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await eventually(lambda: total(system), "the question pruned", until=lambda n: n == 0)
