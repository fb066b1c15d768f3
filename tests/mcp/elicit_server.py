"""A real MCP tool server whose tools elicit, run over stdio by the elicitation tests.

``book_table`` elicits through MCPServer's typed ``ctx.elicit``, ``sign_in`` in URL mode; ``ship_parcel`` sends a raw
``requestedSchema`` with a nested object (which the SDK's typed helper would refuse to build),
so the client's handler is what must refuse it. Each tool returns what it received as JSON.
"""

from __future__ import annotations

import json
from typing import Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

server = MCPServer("elicit-test-server")


class Booking(BaseModel):
    guests: int = Field(title="Guests", description="How many people", ge=1, le=12)
    day: str = Field(title="Day", min_length=3, max_length=20)
    vegetarian: bool = Field(default=False, title="Vegetarian menu")
    seating: Literal["inside", "terrace"] = Field(default="inside", title="Seating")
    budget: float | None = Field(default=None, title="Budget per head", ge=0)


@server.tool()
async def book_table(ctx: Context) -> str:
    result = await ctx.elicit("Book a table for the team dinner?", Booking)
    if result.action == "accept":
        return json.dumps({"action": "accept", "data": result.data.model_dump(mode="json")})
    return json.dumps({"action": result.action})


@server.tool()
async def ship_parcel(ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "address": {"type": "object", "properties": {"street": {"type": "string"}}},
        },
        "required": ["name"],
    }
    try:
        result = await ctx.request_context.session.elicit_form(
            "Where should the parcel go?", schema, related_request_id=ctx.request_id
        )
    except MCPError as exc:
        return json.dumps({"error": exc.error.message, "code": exc.error.code, "data": exc.error.data})
    return json.dumps({"action": result.action, "content": result.content})


@server.tool()
async def sign_in(ctx: Context) -> str:
    result = await ctx.elicit_url("Sign in to the booking site", "https://booking.example/sign-in", "e-1")
    return json.dumps({"action": result.action})


if __name__ == "__main__":
    server.run()
