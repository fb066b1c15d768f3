"""The Restate service of the peer workload: a handler that asks through an awakeable.

    python bench/peers/_restate_service.py PORT CALLBACK_PORT

Run by bench/peers/peer_restate.py as a process of its own (its CPU is the system's), served by
Hypercorn with the settings Restate's serving docs give (HTTP/2 streams and keep-alive unbounded).
``Asker/ask`` makes an awakeable, publishes its id with the question to the answerers inside
``ctx.run`` (a journaled side effect: a POST to the load generator's callback port on a kept-alive
connection), and returns whatever the awakeable is resolved with. Prints ``ready`` once listening.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import restate
from hypercorn.asyncio import serve
from hypercorn.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _http import Conn

asker = restate.Service("Asker")
_idle: list[Conn] = []
CALLBACK_PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 0


async def publish(question: str, awakeable_id: str) -> None:
    """Tell the answerers: the question and the id that resolves it."""
    conn = _idle.pop() if _idle else await Conn("127.0.0.1", CALLBACK_PORT, "").open()
    try:
        status, _ = await conn.request("POST", "/question", {"question": question, "id": awakeable_id})
    except (OSError, IndexError, asyncio.IncompleteReadError):
        await conn.close()
        raise
    _idle.append(conn)
    if status != 200:
        raise RuntimeError(f"the callback said {status}")


@asker.handler()
async def ask(ctx: restate.Context, question: str) -> str:
    awakeable_id, answer = ctx.awakeable(type_hint=str)
    await ctx.run_typed("publish", publish, question=question, awakeable_id=awakeable_id)
    return await answer


app = restate.app([asker])


async def served(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The app, answering the ASGI lifespan messages it has no use for (Hypercorn sends them)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await app(scope, receive, send)


async def main(port: int) -> None:
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.h2_max_concurrent_streams = 2147483647
    config.keep_alive_max_requests = 2147483647
    config.keep_alive_timeout = 2147483647
    config.accesslog = None
    config.loglevel = "WARNING"
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.call_soon(lambda: print("ready", flush=True))
    await serve(served, config, shutdown_trigger=stop.wait)  # type: ignore[arg-type]


if __name__ == "__main__":
    import uvloop  # like the load generator and Layby's services

    uvloop.run(main(int(sys.argv[1])))
