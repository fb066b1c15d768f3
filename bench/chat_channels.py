"""Benchmark: Slack and Telegram channels over their provider stand-ins (docs/channels.md).

    python bench/chat_channels.py [--channel slack telegram] [--questions 1000] [--conversations 50]

For each channel: starts the provider's stand-in (the one the tests use, from ``tests/standins``)
and `layby up` with the channel's plugin pointed at it, then runs ``--conversations`` concurrent
conversations: each asks a confirm question over the channel with the SDK's blocking
`ask_user`; as soon as the stand-in records the posted message, a person taps Yes — the stand-in
builds and signs the provider's inbound request and it is POSTed to the door's inbound webhook.
Prints: questions delivered per second (ask → the provider's API receives the message), the door's
acknowledgement of the inbound webhook p50/p99 (Slack wants it under 3 s), reply → the asker
returns p50/p99, and full cycles per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from _up import free_port, pct, start_up

from layby.sdk import connect
from layby_server.settings import load_settings
from tests.standins import slack as sl
from tests.standins import telegram as tg

PERSON = 424242
HOOK = "bench-hook_secret"


class Posted:
    """The messages a stand-in received, announced as they arrive: (question, tap request)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, bytes, dict[str, str]]] = asyncio.Queue()
        self.at: dict[str, float] = {}


def slack_standin(posted: Posted) -> sl.SlackStandin:
    class Standin(sl.SlackStandin):
        def _post(self, params: dict[str, Any]) -> dict[str, Any]:
            result = super()._post(params)
            if not params.get("thread_ts"):
                text = str(params.get("text") or "")
                posted.at[text] = time.perf_counter()
                signed = self.build_tap(str(result["channel"]), str(result["ts"]), "Yes")
                posted.queue.put_nowait((text, signed.body, signed.headers))
            return result

    return Standin()


def telegram_standin(posted: Posted) -> tg.TelegramStandin:
    class Standin(tg.TelegramStandin):
        def call(self, method: str, params: dict[str, Any]) -> Any:
            result = super().call(method, params)
            if method == "sendMessage" and params.get("reply_markup"):
                text = str(params.get("text") or "")
                posted.at[text] = time.perf_counter()
                update = self.tap_update(result["chat"]["id"], result["message_id"], "Yes")
                headers = {"Content-Type": "application/json", tg.SECRET_HEADER: HOOK}
                posted.queue.put_nowait((text, json.dumps(update).encode(), headers))
            return result

    standin = Standin()
    standin.add_person(PERSON)
    return standin


async def run_channel(name: str, args: argparse.Namespace) -> dict[str, Any]:
    posted = Posted()
    port = free_port()
    door = f"http://127.0.0.1:{port}"
    target = f"{door}/api/channels/{name}/events"
    if name == "slack":
        standin: Any = slack_standin(posted)
        serving: Any = sl.serve_slack_standin
        config = {
            "plugin": "slack",
            "bot_token": "bot",
            "signing_secret": "signing",
            "api_url": "",
            "default_recipient": sl.CHANNEL,
        }
        secrets = f"bot:{sl.BOT_TOKEN},signing:{sl.SIGNING_SECRET}"
    else:
        standin = telegram_standin(posted)
        serving = tg.serve_telegram_standin
        config = {
            "plugin": "telegram",
            "bot_token": "bot",
            "secret_token": "hook",
            "api_url": "",
            "file_url": "",
            "default_recipient": str(PERSON),
        }
        secrets = f"bot:{tg.TOKEN},hook:{HOOK}"
    async with serving(standin) if name == "telegram" else _slack(standin) as running:
        config["api_url"] = running.api_url
        if name == "telegram":
            config["file_url"] = running.file_url
        up = start_up(
            LAYBY_HTTP_PORT=str(port),
            INTERACTIONS_PUBLIC_BASE_URL=door,
            LAYBY_WEBHOOK_SECRETS=secrets,
            LAYBY_CHANNELS=json.dumps({name: config}),
        )
        acks: list[float] = []
        replied: dict[str, float] = {}
        try:
            settings = load_settings({}, max_concurrent=None, public_base_url=door)
            client = await connect(nats_url=up.nats_url, token=up.token, settings=settings)
            async with httpx.AsyncClient(
                timeout=30, limits=httpx.Limits(max_connections=args.conversations)
            ) as http:

                async def person() -> None:
                    while True:
                        question, body, headers = await posted.queue.get()
                        t = time.perf_counter()
                        replied[question] = t
                        resp = await http.post(target, content=body, headers=headers)
                        acks.append(time.perf_counter() - t)
                        assert resp.status_code == 200, (resp.status_code, resp.text[:200])

                people = [asyncio.create_task(person()) for _ in range(args.conversations)]
                for i in range(10):  # warm-up
                    await client.ask_user(f"warm {i}?", answer_format="confirm", channel=name, timeout=60)
                acks.clear()
                asked: dict[str, float] = {}
                wake: list[float] = []
                todo: asyncio.Queue[int] = asyncio.Queue()
                for i in range(args.questions):
                    todo.put_nowait(i)

                async def conversation() -> None:
                    while not todo.empty():
                        q = f"Deploy build {todo.get_nowait()}?"
                        asked[q] = time.perf_counter()
                        assert await client.ask_user(q, answer_format="confirm", channel=name, timeout=600) is True
                        wake.append(time.perf_counter() - replied[q])

                t0 = time.perf_counter()
                await asyncio.gather(*(conversation() for _ in range(args.conversations)))
                elapsed = time.perf_counter() - t0
                last_posted = max(posted.at[q] for q in asked)
                for task in people:
                    task.cancel()
                await client.close()
        finally:
            up.stop()
    deliver = [posted.at[q] - asked[q] for q in asked]
    return {
        "deliveries/s": args.questions / (last_posted - t0),
        "deliver": (pct(deliver, 0.5), pct(deliver, 0.99)),
        "ack": (pct(acks, 0.5), pct(acks, 0.99)),
        "wake": (pct(wake, 0.5), pct(wake, 0.99)),
        "cycles/s": args.questions / elapsed,
    }


def _slack(standin: sl.SlackStandin) -> Any:
    """``serve_slack_standin`` builds its own stand-in; serve this one the same way."""
    import contextlib
    import socket

    import uvicorn

    @contextlib.asynccontextmanager
    async def serving() -> Any:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        standin.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(standin.app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            yield standin
        finally:
            server.should_exit = True
            await task
            sock.close()

    return serving()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--channel", nargs="+", default=["slack", "telegram"], choices=["slack", "telegram"])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--conversations", type=int, default=50)
    args = parser.parse_args()
    rows = {name: asyncio.run(run_channel(name, args)) for name in args.channel}
    print()
    print(f"| channel ({args.questions} questions, {args.conversations} conversations) | " + " | ".join(rows) + " |")
    print("|---|" + "---:|" * len(rows))
    print("| deliveries/s | " + " | ".join(f"{r['deliveries/s']:.0f}" for r in rows.values()) + " |")
    for key, label in (
        ("deliver", "ask → posted p50 / p99"),
        ("ack", "inbound webhook acknowledged p50 / p99"),
        ("wake", "reply → asker returns p50 / p99"),
    ):
        print(f"| {label} | " + " | ".join(f"{r[key][0]:.1f} / {r[key][1]:.1f} ms" for r in rows.values()) + " |")
    print("| full cycles/s | " + " | ".join(f"{r['cycles/s']:.0f}" for r in rows.values()) + " |")


if __name__ == "__main__":
    main()
