"""Benchmark: one door process's SSE fan-out ("SSE fan-out" in docs/performance.md).

    python bench/sse_fanout.py [--subscribers 10000] [--events 20] [--gap 1.0] [--processes 2]
                               [--reconnect 0.05]

Starts `layby up` (embedded NATS and PostgreSQL, a temporary data dir) with the door's stream cap
raised above N, then opens N `GET /api/interactions/stream` connections over raw sockets from
``--processes`` client processes (a lean reader each, so the clients cost little). With every
subscriber connected it reads the door process's resident memory, then asks ``--events``
questions ``--gap`` seconds apart and measures, per question, the time from the ask to its
``interaction.add`` frame at the first and at the last of the N subscribers, and the door's CPU
time per question. Then ``--reconnect`` of the subscribers drop their connection and reconnect
with ``Last-Event-ID`` while five more questions come 0.1 s apart; at the end every subscriber
must hold every question's frame exactly once. Prints a table. ``--profile`` cProfiles the door.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import random
import re
import resource
import sys
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _up import pct, profiled, start_up, table_head

FRAME = re.compile(rb"id: (\d+)\nevent: ([\w.]+)\ndata: ([^\n]*)\n\n")
QUESTION = re.compile(rb'"question":"([^"]*)"')
WAVE = 500
"""Connections opened at once (the door's listen backlog is finite)."""


@dataclass
class Sub:
    host: str
    port: int
    token: str
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    last_id: int | None = None
    got: dict[str, float] = field(default_factory=dict)
    """Question → when its add frame arrived (time.monotonic, comparable across processes)."""
    duplicates: int = 0
    dropped: bool = False
    reconnects: int = 0
    ended_by_door: int = 0

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        resume = f"Last-Event-ID: {self.last_id}\r\n" if self.last_id is not None else ""
        self.writer.write(
            f"GET /api/interactions/stream HTTP/1.1\r\nHost: door\r\nAuthorization: Bearer {self.token}\r\n"
            f"{resume}\r\n".encode()
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(head[:200].decode(errors="replace"))

    def drop(self) -> None:
        """Leave as a client whose network blinked: the read loop reconnects from its last id."""
        self.dropped = True
        assert self.writer is not None
        self.writer.transport.abort()

    async def read(self) -> None:
        buf = b""
        while True:
            assert self.reader is not None
            try:
                data = await self.reader.read(65536)
            except (ConnectionError, OSError):
                data = b""
            if not data:
                if not self.dropped:
                    self.ended_by_door += 1  # an eviction or a failed tail: resume all the same
                self.dropped = False
                self.reconnects += 1
                buf = b""
                await self.connect()
                continue
            now = time.monotonic()
            buf += data
            cut = buf.rfind(b"\n\n")
            if cut < 0:
                continue
            block, buf = buf[: cut + 2], buf[cut + 2 :]
            for m in FRAME.finditer(block):
                self.last_id = int(m[1])
                if m[2] == b"interaction.add":
                    q = QUESTION.search(m[3])
                    if q is not None:
                        name = q[1].decode()
                        if name in self.got:
                            self.duplicates += 1
                        else:
                            self.got[name] = now


async def _subscribers(host: str, port: int, token: str, n: int, pipe: Connection) -> None:
    subs = [Sub(host, port, token) for _ in range(n)]
    for start in range(0, n, WAVE):
        await asyncio.gather(*(s.connect() for s in subs[start : start + WAVE]))
    readers = [asyncio.create_task(s.read()) for s in subs]
    pipe.send(("connected", n))
    loop = asyncio.get_running_loop()
    while True:
        command, arg = await loop.run_in_executor(None, pipe.recv)
        if command == "reconnect":
            for s in random.sample(subs, int(len(subs) * arg)):
                s.drop()
            pipe.send(("dropped", int(len(subs) * arg)))
        elif command == "stop":
            questions: list[str] = arg
            for t in readers:
                t.cancel()
            pipe.send(
                (
                    "result",
                    {
                        "times": {q: [s.got[q] for s in subs if q in s.got] for q in questions},
                        "missing": sum(1 for s in subs for q in questions if q not in s.got),
                        "incomplete": sum(1 for s in subs if any(q not in s.got for q in questions)),
                        "duplicates": sum(s.duplicates for s in subs),
                        "reconnects": sum(s.reconnects for s in subs),
                        "ended_by_door": sum(s.ended_by_door for s in subs),
                    },
                )
            )
            return


def _subscriber_process(host: str, port: int, token: str, n: int, pipe: Connection) -> None:
    _raise_fd_limit()
    uvloop.run(_subscribers(host, port, token, n, pipe))


def _raise_fd_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _door_pid(root: int) -> int:
    for p in psutil.Process(root).children(recursive=True):
        if p.cmdline()[-2:] == ["serve", "door"]:
            return int(p.pid)
    raise RuntimeError("no door process under layby up")


def _cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _rss_mb(pid: int) -> float:
    return float(psutil.Process(pid).memory_info().rss) / 1024 / 1024


@dataclass
class Phases:
    fanout: dict[str, float]
    """Question → when it was asked, for the fan-out phase."""
    reconnect: dict[str, float]
    """The same for the questions asked while subscribers reconnected."""
    door_cpu: float
    """Door CPU seconds during the fan-out phase."""
    rss_after: float


async def _ask(args: argparse.Namespace, up: Any, door: int, pipes: list[Connection]) -> Phases:
    """The fan-out phase (questions ``gap`` apart, every subscriber connected), then the reconnect
    phase: ``reconnect`` of the subscribers drop their connections and questions keep coming
    while they resume. Every question stays pending until the end."""
    from layby.sdk import connect
    from layby_server.settings import load_settings

    client = await connect(
        nats_url=up.nats_url, token=up.token, settings=load_settings({}, max_concurrent=None)
    )
    tasks: list[asyncio.Task[Any]] = []

    async def ask(q: str, into: dict[str, float]) -> None:
        into[q] = time.monotonic()
        tasks.append(asyncio.create_task(client.ask_user(q, timeout=3600)))

    fanout: dict[str, float] = {}
    cpu_before = _cpu_seconds(door)
    for i in range(args.events):
        await ask(f"fanout-{i}", fanout)
        await asyncio.sleep(args.gap)
    door_cpu = _cpu_seconds(door) - cpu_before
    reconnect: dict[str, float] = {}
    if args.reconnect > 0:
        for pipe in pipes:
            pipe.send(("reconnect", args.reconnect))
        for i in range(5):
            await ask(f"reconnect-{i}", reconnect)
            await asyncio.sleep(0.1)
    await asyncio.sleep(args.settle)
    rss_after = _rss_mb(door)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await client.close()
    return Phases(fanout, reconnect, door_cpu, rss_after)


def _latencies(asked: dict[str, float], results: list[dict[str, Any]], n: int) -> dict[str, list[float]]:
    """Per question: ask → first and → last subscriber (only questions every subscriber got);
    and every single delivery."""
    out: dict[str, list[float]] = {"first": [], "all": [], "deliveries": []}
    for q, t0 in asked.items():
        times = [t for r in results for t in r["times"][q]]
        if times:
            out["first"].append(min(times) - t0)
            out["deliveries"] += [t - t0 for t in times]
        if len(times) == n:
            out["all"].append(max(times) - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=10000)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between questions")
    parser.add_argument("--processes", type=int, default=2, help="client processes holding the subscribers")
    parser.add_argument("--reconnect", type=float, default=0.05, help="fraction that reconnects under load")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait after the last question")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the door to /tmp/layby-bench-sse.prof"
    )
    args = parser.parse_args()

    _raise_fd_limit()  # inherited by `layby up` and its door
    profiling = profiled("door" if args.profile else None, "/tmp/layby-bench-sse.prof")
    up = start_up(LAYBY_SSE_MAX_CLIENTS=str(args.subscribers + 1000), **profiling)
    results: list[dict[str, Any]] = []
    try:
        door = _door_pid(up.proc.pid)
        rss_idle = _rss_mb(door)
        parts = urlsplit(up.url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        ctx = mp.get_context("spawn")
        pipes, procs = [], []
        share = [args.subscribers // args.processes] * args.processes
        share[0] += args.subscribers - sum(share)
        started = time.monotonic()
        for n in share:
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_subscriber_process, args=(host, port, up.token, n, theirs))
            proc.start()
            pipes.append(mine)
            procs.append(proc)
        for pipe in pipes:
            assert pipe.recv()[0] == "connected"
        connect_s = time.monotonic() - started
        time.sleep(1)
        rss_connected = _rss_mb(door)
        phases = uvloop.run(_ask(args, up, door, pipes))
        questions = [*phases.fanout, *phases.reconnect]
        for pipe in pipes:
            pipe.send(("stop", questions))
        for pipe in pipes:
            reply = pipe.recv()
            while reply[0] != "result":  # the reconnect's acknowledgement
                reply = pipe.recv()
            results.append(reply[1])
        for proc in procs:
            proc.join(30)
    finally:
        up.stop()

    fan = _latencies(phases.fanout, results, args.subscribers)
    again = _latencies(phases.reconnect, results, args.subscribers)
    missing = sum(r["missing"] for r in results)
    duplicates = sum(r["duplicates"] for r in results)
    reconnects = sum(r["reconnects"] for r in results)
    ended = sum(r["ended_by_door"] for r in results)
    print()
    print(
        f"{args.subscribers} subscribers in {args.processes} client processes, "
        f"connected in {connect_s:.1f} s; {args.events} questions {args.gap:g} s apart"
    )
    table_head(
        "| subscribers | door RSS idle | door RSS connected | per subscriber | door RSS at the end "
        "| ask→first p50 | ask→all p50 | ask→all p99 | delivery p99 | door CPU per event |",
        first="---:",
    )
    print(
        f"| {args.subscribers} | {rss_idle:.0f} MB | {rss_connected:.0f} MB "
        f"| {(rss_connected - rss_idle) * 1024 / args.subscribers:.1f} KB | {phases.rss_after:.0f} MB "
        f"| {pct(fan['first'], 0.5):.0f} ms | {pct(fan['all'], 0.5):.0f} ms | {pct(fan['all'], 0.99):.0f} ms "
        f"| {pct(fan['deliveries'], 0.99):.0f} ms | {phases.door_cpu * 1000 / max(args.events, 1):.0f} ms |"
    )
    if len(fan["all"]) < len(phases.fanout):
        print(f"\n{len(phases.fanout) - len(fan['all'])} questions did not reach every subscriber")
    print()
    print(
        f"Reconnect under load: {reconnects} reconnects with Last-Event-ID while {len(phases.reconnect)} "
        f"questions were asked ({ended} streams ended by the door); ask→all of those: "
        f"{pct(again['all'], 1.0):.0f} ms at most. Frames lost: {missing}; duplicated: {duplicates}."
    )


if __name__ == "__main__":
    main()
