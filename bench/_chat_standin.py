"""A provider stand-in with an automatic person, in a process of its own (bench/chat_channels.py).

``serve(channel, target, people, client, think, conn)`` runs in a child process
(``multiprocessing``, spawn). It serves the stand-in from ``tests/standins``, every API call
validated as in the tests, and for each question message it stores (Slack: ``chat.postMessage``
without ``thread_ts`` with buttons; Telegram: ``sendMessage`` with an inline keyboard; WhatsApp:
an interactive message with reply buttons;
Twilio: a message ending "Reply yes or no.", answered by texting "yes") records
the wall-clock time and queues a tap on "Yes", at once or ``think`` seconds later: the signed
request is built exactly as the tests build it and one of ``people`` workers POSTs it to
``target`` (the door's inbound webhook) on a keep-alive connection (``client``: ``lean``, a raw
HTTP/1.1 connection per person; ``httpx``, an ``httpx.AsyncClient`` per person; ``httpx-pool``,
one ``httpx.AsyncClient`` with a pool of ``people`` connections), recording the POST's start,
the door's answer and its status.

Over ``conn``: the child sends ``("ready", api_url, file_url)``; ``"mark"`` starts the measured
window; ``"records"`` is answered with ``{"records": {question: {"posted", "tap", "ack",
"status"}}, "lag": [...]}`` (``time.time()`` seconds; ``status`` -1 and ``error`` when the POST
raised; ``lag``: how late this event loop woke a 5 ms sleep since the mark); ``"stop"`` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PERSON = 424242
WA_PERSON = "491512345678"
HOOK = "bench-hook_secret"
PHONES = 1000
"""Twilio: the people (one number per conversation; a text answers the last question sent to its
number, so two conversations must not share one)."""


def phone(n: int) -> str:
    """The number of Twilio person ``n``."""
    return f"+1555{n:07d}"


Tap = tuple[str, bytes, dict[str, str]]


_LOOP: list[asyncio.AbstractEventLoop] = []
"""The stand-in's event loop: a stand-in handler may run in a worker thread, so a tap is queued
through the loop, thread-safely."""


def _queue(taps: asyncio.Queue[Tap], tap: Tap, think: float) -> None:
    """The person taps at once, or after ``think`` seconds."""
    loop = _LOOP[0]
    if think > 0:
        loop.call_soon_threadsafe(loop.call_later, think, taps.put_nowait, tap)
    else:
        loop.call_soon_threadsafe(taps.put_nowait, tap)


def _slack(records: dict[str, dict[str, Any]], taps: asyncio.Queue[Tap], think: float) -> Any:
    from tests.standins import slack as sl

    class Standin(sl.SlackStandin):
        def _post(self, params: dict[str, Any]) -> dict[str, Any]:
            result = super()._post(params)
            if not params.get("thread_ts"):
                msg = self.message(str(result["channel"]), str(result["ts"]))
                if msg.buttons():
                    text = str(params.get("text") or "")
                    records[text] = {"posted": time.time()}
                    signed = self.build_tap(msg.channel, msg.ts, "Yes")
                    _queue(taps, (text, signed.body, signed.headers), think)
            return result

    return Standin()


def _telegram(records: dict[str, dict[str, Any]], taps: asyncio.Queue[Tap], think: float) -> Any:
    from tests.standins import telegram as tg

    class Standin(tg.TelegramStandin):
        def call(self, method: str, params: dict[str, Any]) -> Any:
            result = super().call(method, params)
            if method == "sendMessage" and params.get("reply_markup"):
                text = str(params.get("text") or "")
                records[text] = {"posted": time.time()}
                update = self.tap_update(result["chat"]["id"], result["message_id"], "Yes")
                headers = {"Content-Type": "application/json", tg.SECRET_HEADER: HOOK}
                _queue(taps, (text, json.dumps(update).encode(), headers), think)
            return result

    standin = Standin()
    standin.add_person(PERSON)
    return standin


def _whatsapp(records: dict[str, dict[str, Any]], taps: asyncio.Queue[Tap], think: float) -> Any:
    from tests.standins import whatsapp as wa

    class Standin(wa.WhatsAppStandin):
        def send_message(self, body: dict[str, Any]) -> dict[str, Any]:
            result = super().send_message(body)
            if body.get("type") == "interactive" and body["interactive"].get("type") == "button":
                text = str(body["interactive"]["body"]["text"])
                records[text] = {"posted": time.time()}
                wamid = str(result["messages"][0]["id"])
                signed = self.body_of(self.tap_notification(wamid, "Yes"))
                headers = {"Content-Type": "application/json", "X-Hub-Signature-256": self.sign(signed)}
                _queue(taps, (text, signed, headers), think)
            return result

    standin = Standin()
    standin.add_person(WA_PERSON)


def _twilio(records: dict[str, dict[str, Any]], taps: asyncio.Queue[Tap], think: float, target: str) -> Any:
    from urllib.parse import urlencode

    from tests.standins import twilio as tw

    class Standin(tw.TwilioStandin):
        def create(
            self, authorization: str | None, account: str, params: list[tuple[str, str]]
        ) -> dict[str, Any]:
            result = super().create(authorization, account, params)
            body = str(result["body"])
            if body.endswith("Reply yes or no."):
                text = body.partition("\n\n")[0]
                records[text] = {"posted": time.time()}
                form = self.form(str(result["to"]), "yes")
                headers = {
                    "Content-Type": "application/x-www-form-urlencoded",
                    tw.SIGNATURE_HEADER: self.sign(form, url=target),
                }
                _queue(taps, (text, urlencode(form).encode(), headers), think)
            return result

    standin = Standin()
    for n in range(PHONES):
        standin.add_person(phone(n))
    return standin


async def _main(channel: str, target: str, people: int, client: str, think: float, conn: Connection) -> None:
    import httpx

    from tests.standins.serving import serve

    records: dict[str, dict[str, Any]] = {}
    taps: asyncio.Queue[Tap] = asyncio.Queue()
    _LOOP[:] = [asyncio.get_running_loop()]
    if channel == "slack":
        standin = _slack(records, taps, think)
        app = standin.app
    elif channel == "whatsapp":
        from tests.standins import whatsapp as wa

        standin = _whatsapp(records, taps, think)
        app = wa.app(standin)
    elif channel == "twilio":
        from tests.standins import twilio as tw

        standin = _twilio(records, taps, think, target)
        app = tw.app(standin)
    else:
        from tests.standins import telegram as tg

        standin = _telegram(records, taps, think)
        app = tg.app(standin)

    async def person(post: Any) -> None:
        while True:
            text, body, headers = await taps.get()
            record = records[text]
            record["tap"] = time.time()
            try:
                status, answer = await post(body, headers)
                record["ack"] = time.time()
                record["status"] = status
                if status != 200:
                    record["error"] = answer[:200].decode(errors="replace")
            except Exception as exc:  # recorded and reported by the measuring process
                record["ack"] = time.time()
                record["status"] = -1
                record["error"] = repr(exc)[:200]

    async with contextlib.AsyncExitStack() as stack:
        standin.url = await stack.enter_async_context(serve(app, "the stand-in"))
        if client == "httpx-pool":  # one client, a pool of ``people`` keep-alive connections
            limits = httpx.Limits(max_connections=people, max_keepalive_connections=people)
            shared = await stack.enter_async_context(
                httpx.AsyncClient(timeout=30, limits=limits, trust_env=False)
            )
            posts = [_httpx_post(shared, target)] * people
        elif client == "httpx":  # a keep-alive client (one connection) per person
            posts = [
                _httpx_post(
                    await stack.enter_async_context(
                        httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=1), trust_env=False)
                    ),
                    target,
                )
                for _ in range(people)
            ]
        else:  # "lean": a raw keep-alive HTTP/1.1 connection per person
            posts = [_Lean(target).post for _ in range(people)]
        workers = [asyncio.create_task(person(post)) for post in posts]
        lags: list[float] = []
        workers.append(asyncio.create_task(_lag(lags)))
        api_url = standin.api_url
        file_url = getattr(standin, "file_url", "")
        conn.send(("ready", api_url, file_url))
        while True:
            command = await asyncio.to_thread(conn.recv)
            if command == "records":
                conn.send({"records": records, "lag": lags})
            elif command == "mark":
                lags.clear()
            elif command == "stop":
                break
        for worker in workers:
            worker.cancel()


def _httpx_post(http: Any, target: str) -> Any:
    async def post(body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        response = await http.post(target, content=body, headers=headers)
        return response.status_code, response.content

    return post


class _Lean:
    """One keep-alive HTTP/1.1 connection to ``target``, opened on first use: the request as
    given (its own headers, Content-Length), a response read by its Content-Length."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        try:
            status = int((await self.reader.readline()).split()[1])
            length, close = 0, False
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "connection" and "close" in value.lower():
                    close = True
            answer = await self.reader.readexactly(length)
        except BaseException:
            self.writer.close()
            self.reader = self.writer = None
            raise
        if close:
            self.writer.close()
            self.reader = self.writer = None
        return status, answer


async def _lag(lags: list[float], every: float = 0.005) -> None:
    """How late this event loop wakes a 5 ms sleep: its queueing, not the door's."""
    while True:
        t = time.perf_counter()
        await asyncio.sleep(every)
        lags.append(time.perf_counter() - t - every)


def serve(channel: str, target: str, people: int, client: str, think: float, conn: Connection) -> None:
    """The child process's entry point."""
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    profile = os.environ.get("BENCH_STANDIN_PROFILE")  # a path: cProfile the stand-in into it
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(channel, target, people, client, think, conn))
    else:
        uvloop.run(_main(channel, target, people, client, think, conn))
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    with contextlib.suppress(OSError):
        conn.close()
