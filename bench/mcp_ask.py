"""ask_user over MCP stdio against the SDK's own ask_user: the latency MCP adds (docs/mcp.md).

Starts `layby up` (embedded NATS and PostgreSQL), a bench answerer that follows the stream door
and answers each new question at once (POST /api/interactions/{id}/answer), then asks N questions
through ``Client.ask_user`` and N through ``layby mcp``, alternately, (spawned over stdio,
called with the SDK's ``ClientSession``). Prints the p50/p99 of each cycle and the p50/p99 added.

    .venv/bin/python bench/mcp_ask.py --questions 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from typing import Any

import httpx
from _up import free_port, layby_up, pct
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from layby.sdk import connect


async def answerer(url: str, token: str, ready: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as http,
        http.stream("GET", "/api/interactions/stream") as resp,
    ):
        ready.set()
        event = None
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "interaction.add":
                iid = json.loads(line[5:])["interaction_id"]
                await http.post(f"/api/interactions/{iid}/answer", json={"answer": "yes"})


async def run(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    out: dict[str, Any] = {}
    with layby_up(LAYBY_HTTP_PORT=str(port)) as up:
        ready = asyncio.Event()
        answering = asyncio.create_task(answerer(f"http://127.0.0.1:{port}", up.token, ready))
        await ready.wait()
        client = await connect(nats_url=up.nats_url, token=up.token)
        env = {**os.environ, "LAYBY_NATS_URL": up.nats_url, "LAYBY_TOKEN": up.token}
        params = StdioServerParameters(command=sys.executable, args=["-m", "layby.cli", "mcp"], env=env)
        sdk: list[float] = []
        over: list[float] = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            # Alternate the two, so the machine's other load weighs on both alike.
            for i in range(args.warmup + args.questions):
                t0 = time.perf_counter()
                assert await client.ask_user(f"sdk {i}", timeout=30) == "yes"
                t1 = time.perf_counter()
                result = await session.call_tool("ask_user", {"question": f"mcp {i}", "timeout": 30})
                t2 = time.perf_counter()
                assert result.structured_content["answer"] == "yes", result.content
                if i >= args.warmup:
                    sdk.append(t1 - t0)
                    over.append(t2 - t1)
        out = {
            "questions": args.questions,
            "sdk_p50_ms": round(pct(sdk, 0.5), 2),
            "sdk_p99_ms": round(pct(sdk, 0.99), 2),
            "mcp_p50_ms": round(pct(over, 0.5), 2),
            "mcp_p99_ms": round(pct(over, 0.99), 2),
            "added_p50_ms": round(pct(over, 0.5) - pct(sdk, 0.5), 2),
            "added_p99_ms": round(pct(over, 0.99) - pct(sdk, 0.99), 2),
        }
        answering.cancel()
        await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=2))


if __name__ == "__main__":
    main()
