"""Benchmark: durable async parks through `layby up` ("How fast").

    python bench/parks.py [--runs 10000] [--expiries 1000] [--fanout 1000] [--answerers 16] [--json PATH]

Starts `layby up` (embedded NATS and PostgreSQL, a temporary data dir) and one worker process
(`layby worker park_flows:worker`), then:

1. parks ``--runs`` runs at once (each asks one async question) and reports parks/s and the
   resident memory of the system and of the worker with every run parked;
2. answers them all at full speed over ``--answerers`` keep-alive connections and reports
   resumes/s, answer→continuation-start p50/p99 and park+resume cycles/s;
3. parks ``--expiries`` runs whose deadlines fall over a few seconds and reports how late the
   continuation started after ``expiry_at`` (p50/p99);
4. runs ``--fanout`` runs that each park on three asks raised together, answers all three
   and reports fan-out runs/s (start → finished).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import psutil
import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _http import Conn, sse
from _result import Result, add_json_option
from _up import Up, flow_worker, free_port, layby_up, pct, table_head, tree_rss_mb

from layby.sdk import connect
from layby_server.settings import load_settings


class Bench:
    def __init__(self, up: Up, answerers: int) -> None:
        self.up = up
        self.host = urlsplit(up.url).hostname or "127.0.0.1"
        self.port = urlsplit(up.url).port or 80
        self.answerers = answerers
        self.asks: dict[str, list[str]] = {}  # run key -> interaction ids seen on the stream
        self.added = asyncio.Event()
        self.reports: dict[str, tuple[float, bool]] = {}
        self.reported = asyncio.Event()
        self.expect_adds = 0
        self.expect_reports = 0

    async def open(self) -> None:
        settings = load_settings({}, max_concurrent=None)
        self.client = await connect(nats_url=self.up.nats_url, token=self.up.token, settings=settings)
        # The flows report over a local TCP line channel: NATS admits only Layby's own keys.
        self.reports_server = await asyncio.start_server(
            self._on_reporter, "127.0.0.1", int(os.environ["BENCH_REPORT_PORT"])
        )
        self.reader = asyncio.create_task(self._read())
        await asyncio.sleep(0.5)

    async def _on_reporter(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                body = msgspec.json.decode(line)
                self.reports[body["key"]] = (body["t"], body["expired"])
                if len(self.reports) >= self.expect_reports:
                    self.reported.set()
        finally:
            writer.close()

    async def _read(self) -> None:
        count = 0
        async for frame in sse(self.host, self.port, self.up.token):
            if frame["event"] == "interaction.add":
                key = frame["data"]["question"].removeprefix("bench ").split("/")[0]
                self.asks.setdefault(key, []).append(frame["data"]["interaction_id"])
                count += 1
                if count >= self.expect_adds:
                    self.added.set()

    async def start_runs(self, flow: str, keys: list[str], expiry: list[datetime]) -> float:
        """Start one run per key; returns the seconds until every ask reached the inbox."""
        self.expect_adds = sum(len(v) for v in self.asks.values()) + len(keys) * (
            3 if flow == "bench_fan" else 1
        )
        self.added.clear()
        slots = asyncio.Semaphore(200)

        async def start(key: str, at: datetime) -> None:
            async with slots:
                await self.client.start_run(flow, {"key": key, "expiry_at": at.isoformat()})

        t0 = time.perf_counter()
        await asyncio.gather(*(start(k, e) for k, e in zip(keys, expiry, strict=True)))
        await asyncio.wait_for(self.added.wait(), 600)
        return time.perf_counter() - t0

    async def wait_parked(self, total: int) -> float:
        t0 = time.perf_counter()
        conn = await Conn(self.host, self.port, self.up.token).open()
        try:
            while True:
                status, body = await conn.request("GET", "/api/runs?status=parked&pageSize=1")
                if status == 200 and msgspec.json.decode(body)["data"]["total"] >= total:
                    return time.perf_counter() - t0
                await asyncio.sleep(0.1)
        finally:
            await conn.close()

    async def answer(self, keys: list[str], rate: float | None = None) -> dict[str, float]:
        """Answer every ask of ``keys`` (at full speed, or ``rate`` answers/s); returns key ->
        the moment its last answer was sent."""
        queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        for key in keys:
            for ix in self.asks[key]:
                queue.put_nowait((key, ix))
        sent: dict[str, float] = {}

        start = time.perf_counter()
        issued = 0

        async def answerer() -> None:
            nonlocal issued
            conn = await Conn(self.host, self.port, self.up.token).open()
            try:
                while not queue.empty():
                    key, ix = queue.get_nowait()
                    if rate:
                        issued += 1
                        delay = start + issued / rate - time.perf_counter()
                        if delay > 0:
                            await asyncio.sleep(delay)
                    sent[key] = time.time()
                    status, _ = await conn.request("POST", f"/api/interactions/{ix}/answer", {"answer": "ok"})
                    assert status == 200, status
            finally:
                await conn.close()

        await asyncio.gather(*(answerer() for _ in range(self.answerers)))
        return sent

    async def wait_reports(self, total: int) -> None:
        self.expect_reports = total
        if len(self.reports) >= total:
            return
        self.reported.clear()
        await asyncio.wait_for(self.reported.wait(), 600)


def cpu_by_process(up: Up, worker: subprocess.Popen[bytes]) -> dict[str, float]:
    """CPU seconds used so far by each process of the system, the worker and this benchmark."""
    out: dict[str, float] = {}
    procs = [psutil.Process(up.proc.pid), *psutil.Process(up.proc.pid).children(recursive=True)]
    for p in [*procs, psutil.Process(worker.pid), psutil.Process()]:
        try:
            cmd = p.cmdline()
            t = p.cpu_times()
        except psutil.Error:
            continue
        if p.pid == os.getpid():
            name = "benchmark client"
        elif p.pid == worker.pid:
            name = "worker"
        elif "serve" in cmd:
            name = cmd[cmd.index("serve") + 1]
        elif cmd and cmd[0].startswith("postgres"):
            name = "postgres"
        else:
            name = Path(cmd[0]).name if cmd else str(p.pid)
        out[name] = out.get(name, 0.0) + t.user + t.system
    return out


async def bench(args: argparse.Namespace, up: Up, worker: subprocess.Popen[bytes]) -> dict[str, Any]:
    b = Bench(up, args.answerers)
    await b.open()
    out: dict[str, Any] = {}
    worker_proc = psutil.Process(worker.pid)
    out["idle_system_mb"] = tree_rss_mb(up.proc.pid)
    out["idle_worker_mb"] = worker_proc.memory_info().rss / 1024 / 1024

    # 1. park N runs at once
    cpu0 = cpu_by_process(up, worker)
    far = datetime.now(UTC) + timedelta(hours=2)
    keys = [f"p{i}" for i in range(args.runs)]
    t0 = time.perf_counter()
    await b.start_runs("bench_one", keys, [far] * len(keys))
    await b.wait_parked(args.runs)
    park_s = time.perf_counter() - t0
    out["parks_per_s"] = args.runs / park_s
    await asyncio.sleep(2)
    out["parked_system_mb"] = tree_rss_mb(up.proc.pid)
    out["parked_worker_mb"] = worker_proc.memory_info().rss / 1024 / 1024

    # 2. answer them all
    t0 = time.perf_counter()
    sent = await b.answer(keys)
    await b.wait_reports(len(keys))
    resume_s = time.perf_counter() - t0
    lat = [b.reports[k][0] - sent[k] for k in keys]
    out["resumes_per_s"] = args.runs / resume_s
    out["cycles_per_s"] = args.runs / (park_s + resume_s)
    out["cont_p50"], out["cont_p99"] = pct(lat, 0.5), pct(lat, 0.99)
    cpu1 = cpu_by_process(up, worker)
    out["cpu_ms_per_cycle"] = {k: (cpu1[k] - cpu0.get(k, 0.0)) * 1000 / args.runs for k in cpu1}

    # 2b. the same at a steady rate well below capacity: latency without a backlog
    pkeys = [f"q{i}" for i in range(args.paced)]
    await b.start_runs("bench_one", pkeys, [far] * len(pkeys))
    await b.wait_parked(args.paced)
    sent = await b.answer(pkeys, rate=args.rate)
    await b.wait_reports(len(keys) + len(pkeys))
    lat = [b.reports[k][0] - sent[k] for k in pkeys]
    out["paced_p50"], out["paced_p99"] = pct(lat, 0.5), pct(lat, 0.99)
    done = len(keys) + len(pkeys)

    # 3. expiries spread over a few seconds
    base = datetime.now(UTC) + timedelta(seconds=8)
    ekeys = [f"e{i}" for i in range(args.expiries)]
    deadlines = [
        base + timedelta(milliseconds=3000 * i / max(args.expiries, 1)) for i in range(args.expiries)
    ]
    await b.start_runs("bench_one", ekeys, deadlines)
    await b.wait_reports(done + len(ekeys))
    late = [b.reports[k][0] - d.timestamp() for k, d in zip(ekeys, deadlines, strict=True)]
    assert all(b.reports[k][1] for k in ekeys), "an expiry resumed without the marker"
    out["late_p50"], out["late_p99"] = pct(late, 0.5), pct(late, 0.99)

    # 4. fan-out of three
    fkeys = [f"f{i}" for i in range(args.fanout)]
    t0 = time.perf_counter()
    await b.start_runs("bench_fan", fkeys, [far] * len(fkeys))
    await b.answer(fkeys)
    await b.wait_reports(done + len(ekeys) + len(fkeys))
    out["fan_runs_per_s"] = args.fanout / (time.perf_counter() - t0)
    b.reader.cancel()
    await b.client.close()
    b.reports_server.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10000)
    parser.add_argument("--expiries", type=int, default=1000)
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--answerers", type=int, default=16)
    parser.add_argument("--paced", type=int, default=2000, help="runs answered at a steady --rate")
    parser.add_argument("--rate", type=float, default=300.0, help="answers/s of the paced phase")
    add_json_option(parser)
    args = parser.parse_args()

    os.environ["BENCH_REPORT_PORT"] = str(free_port())
    with layby_up() as up, flow_worker(up, "park_flows:worker") as worker:  # BENCH_REPORT_PORT inherited
        r = uvloop.run(bench(args, up, worker))
    n = args.runs
    rows = [
        (f"parks/s ({n} started at once, until all parked)", f"{r['parks_per_s']:.0f}"),
        (
            "resumes/s (all answered at full speed, until every continuation started)",
            f"{r['resumes_per_s']:.0f}",
        ),
        ("park+resume cycles/s", f"{r['cycles_per_s']:.0f}"),
        ("answer→continuation-start p50 / p99, full speed", f"{r['cont_p50']:.0f} / {r['cont_p99']:.0f} ms"),
        (
            f"answer→continuation-start p50 / p99, {args.rate:.0f} answers/s",
            f"{r['paced_p50']:.0f} / {r['paced_p99']:.0f} ms",
        ),
        (
            "expiry lateness (expiry_at→continuation-start) p50 / p99",
            f"{r['late_p50']:.0f} / {r['late_p99']:.0f} ms",
        ),
        ("fan-out of 3: runs/s (start→3 parked→3 answered→resumed)", f"{r['fan_runs_per_s']:.0f}"),
        (
            f"resident memory, system: idle → {n} parked",
            f"{r['idle_system_mb']:.0f} → {r['parked_system_mb']:.0f} MB",
        ),
        (
            f"resident memory, worker: idle → {n} parked",
            f"{r['idle_worker_mb']:.0f} → {r['parked_worker_mb']:.0f} MB",
        ),
    ]
    print()
    print("CPU per park+resume cycle, by process:")
    for name, ms in sorted(r["cpu_ms_per_cycle"].items(), key=lambda kv: -kv[1]):
        if ms >= 0.01:
            print(f"  {name:<20} {ms:.2f} ms")
    table_head(
        f"| measure ({n} parked runs, {args.expiries} expiries, {args.fanout} fan-outs of 3) | value |"
    )
    for label, value in rows:
        print(f"| {label} | {value} |")
    out = Result("parks")
    out.higher("parks/s", r["parks_per_s"])
    out.higher("resumes/s", r["resumes_per_s"])
    out.higher("park+resume cycles/s", r["cycles_per_s"])
    out.lower("answer→continuation p50, full speed, ms", r["cont_p50"])
    out.lower("answer→continuation p99, full speed, ms", r["cont_p99"])
    out.lower(f"answer→continuation p50, {args.rate:.0f}/s, ms", r["paced_p50"])
    out.lower(f"answer→continuation p99, {args.rate:.0f}/s, ms", r["paced_p99"])
    out.lower("expiry lateness p50, ms", r["late_p50"])
    out.lower("expiry lateness p99, ms", r["late_p99"])
    out.higher("fan-out of 3, runs/s", r["fan_runs_per_s"])
    cpu = r["cpu_ms_per_cycle"]
    system = sum(ms for name, ms in cpu.items() if name not in ("worker", "benchmark client"))
    out.lower("system CPU per park+resume cycle, ms", system)
    out.lower("worker CPU per park+resume cycle, ms", cpu.get("worker", float("nan")))
    out.lower(f"system memory, {n} parked, MB", r["parked_system_mb"])
    out.lower(f"worker memory, {n} parked, MB", r["parked_worker_mb"])
    out.write(args.json)


if __name__ == "__main__":
    main()
