"""The workload every peer runs, and how it is timed and costed.

The method is written up in docs/performance.md#peers-side-by-side-benchpeers.

N askers each loop: start a run that asks a question, wait until the run has resumed with the
answer and finished, start the next. A pool of answerers (8 by default) takes each question as it
becomes visible to them and sends the answer "ok". A peer supplies four things:

- ``open(workload, n, answerers)``: clients and any background reader that makes questions visible;
- ``run(question, workload) -> answer``: one run, from ask to resumed-and-finished; whoever sees the
  question (the run itself, a stream reader, a callback) calls ``workload.seen(question, ref)``;
- ``answer(ref)``: send the answer to the question behind ``ref``; returns when the peer accepted it;
- ``close()``.

Timed, per cycle: **ask→seen** (the run starts → the answerer holds the question) and
**answer→resume** (the answer is sent → the asker holds the run's result). Costed: the CPU seconds
(user + system, psutil) of the system's own processes — servers, workers, services, and any
child they reaped — and, apart, of this load-generating process, which also hosts each system's
client library (and, for LangGraph, the graph itself: LangGraph is a library).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

ANSWER = "ok"


def pct(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` (seconds), in milliseconds."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 60, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout:.0f} s")


def stop_process(proc: subprocess.Popen[Any] | None) -> None:
    """SIGTERM, then SIGKILL after 30 s; a process already gone is left alone."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def tree_cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of each process and its descendants, including children they
    have already reaped (a PostgreSQL backend that exited still counts)."""
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
    return total


def own_cpu_seconds() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


class Workload:
    """What askers and answerers share: when each question was asked, seen and answered."""

    def __init__(self) -> None:
        self.asked_at: dict[str, float] = {}
        self.posted_at: dict[str, float] = {}
        self.seen_after: list[float] = []
        self.resumed_after: list[float] = []
        self.questions: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def seen(self, question: str, ref: Any) -> None:
        """The question reached the answerers; ``ref`` is what ``answer`` needs to answer it."""
        asked = self.asked_at.get(question)
        if asked is None:
            return  # not ours (a stream may carry other questions)
        self.seen_after.append(time.perf_counter() - asked)
        self.questions.put_nowait((question, ref))

    def reset(self) -> None:
        self.seen_after.clear()
        self.resumed_after.clear()


class Peer(Protocol):
    name: str

    async def open(self, workload: Workload, n: int, answerers: int) -> None: ...

    async def run(self, question: str, workload: Workload) -> str: ...

    async def answer(self, ref: Any) -> None: ...

    async def close(self) -> None: ...


@dataclass
class Point:
    """One measured level: N askers for a while."""

    system: str
    n: int
    seconds: float
    cycles: int
    failures: int
    rate: float
    seen_p50: float
    seen_p99: float
    resume_p50: float
    resume_p99: float
    system_cpu_ms: float  # per cycle: servers, workers, services
    client_cpu_ms: float  # per cycle: this process (load generator + the system's client library)
    system_cpu_by_process: dict[str, float] = field(default_factory=dict)  # per cycle, by label


@dataclass
class Report:
    system: str
    versions: dict[str, str] = field(default_factory=dict)
    setup: str = ""
    points: list[Point] = field(default_factory=list)
    missing: str | None = None


async def measure(
    peer: Peer,
    n: int,
    seconds: float,
    system_pids: Callable[[], dict[str, int]],
    answerers: int = 8,
    think: float = 0.0,
    run_timeout: float = 60,
) -> Point:
    workload = Workload()
    await peer.open(workload, n, answerers)

    # ``answerers`` answers in flight at most; each waits ``think`` seconds after it is seen.
    slots = asyncio.Semaphore(answerers)

    async def answer_one(question: str, ref: Any) -> None:
        if think:
            await asyncio.sleep(think)
        async with slots:
            workload.posted_at[question] = time.perf_counter()
            try:
                await peer.answer(ref)
            except Exception as exc:
                print(f"{peer.name}: answer failed: {exc!r}", file=sys.stderr)

    async def dispatcher() -> None:
        pending: set[asyncio.Task[None]] = set()
        try:
            while True:
                question, ref = await workload.questions.get()
                task = asyncio.create_task(answer_one(question, ref))
                pending.add(task)
                task.add_done_callback(pending.discard)
        finally:
            for task in pending:
                task.cancel()

    helpers = [asyncio.create_task(dispatcher())]
    stop = asyncio.Event()
    cycles = failures = 0

    async def one(question: str) -> bool:
        workload.asked_at[question] = time.perf_counter()
        try:
            got = await asyncio.wait_for(peer.run(question, workload), run_timeout)
        except Exception as exc:
            print(f"{peer.name}: run {question} failed: {exc!r}", file=sys.stderr)
            return False
        done = time.perf_counter()
        if got != ANSWER:
            print(f"{peer.name}: run {question} resumed with {got!r}", file=sys.stderr)
            return False
        workload.resumed_after.append(done - workload.posted_at.pop(question))
        workload.asked_at.pop(question, None)
        return True

    async def asker(k: int) -> None:
        nonlocal cycles, failures
        i = 0
        while not stop.is_set():
            ok = await one(f"peer-{n}-{k}-{i}")
            i += 1
            if ok:
                cycles += 1
            else:
                failures += 1

    try:
        for w in range(3):  # warm up: connections, caches, first-run code paths
            if not await one(f"warmup-{n}-{w}"):
                raise RuntimeError(f"{peer.name}: the warm-up cycle failed")
        workload.reset()
        pids = system_pids()
        by0 = {label: tree_cpu_seconds([pid]) for label, pid in pids.items()}
        own0, t0 = own_cpu_seconds(), time.perf_counter()
        askers = [asyncio.create_task(asker(k)) for k in range(n)]
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*askers)
        elapsed = time.perf_counter() - t0
        by = {label: tree_cpu_seconds([pid]) - by0[label] for label, pid in pids.items()}
        own_cpu = own_cpu_seconds() - own0
    finally:
        for h in helpers:
            h.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)
        await peer.close()
    per = 1000 / max(cycles, 1)
    return Point(
        system=peer.name,
        n=n,
        seconds=round(elapsed, 2),
        cycles=cycles,
        failures=failures,
        rate=cycles / elapsed,
        seen_p50=pct(workload.seen_after, 0.5),
        seen_p99=pct(workload.seen_after, 0.99),
        resume_p50=pct(workload.resumed_after, 0.5),
        resume_p99=pct(workload.resumed_after, 0.99),
        system_cpu_ms=sum(by.values()) * per,
        client_cpu_ms=own_cpu * per,
        system_cpu_by_process={label: round(cpu * per, 3) for label, cpu in by.items()},
    )


async def level(
    peer: Peer, n: int, system_pids: Callable[[], dict[str, int]], args: argparse.Namespace
) -> Point:
    """One level with the script's options (``--seconds``, ``--answerers``, ``--think-ms``)."""
    point = await measure(peer, n, args.seconds, system_pids, args.answerers, args.think_ms / 1000)
    print(f"{peer.name} N={n}: {point.rate:.0f} cycles/s", file=sys.stderr)
    return point


# --- running a peer's script -------------------------------------------------------------------


def parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.split("\n", maxsplit=1)[0])
    p.add_argument("--seconds", type=float, default=10, help="how long each level runs")
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 100], help="askers N, one level each")
    p.add_argument("--answerers", type=int, default=8, help="answers in flight at most")
    p.add_argument(
        "--think-ms", type=float, default=0, help="each answer waits this long after its question is seen"
    )
    p.add_argument("--json", type=Path, help="also write the report here (bench/peers/run.py reads it)")
    p.add_argument(
        "--no-netns",
        action="store_true",
        help="stay in this network namespace (default: a private one with loopback only, if root)",
    )
    return p


def enter_private_network(args: argparse.Namespace) -> None:
    """Re-run this script in a network namespace of its own that has only loopback, when we can.

    Everything a peer needs is on 127.0.0.1, and some servers reach out on their own at start
    (Restate asks for its latest release): inside, nothing can leave the machine, and the fixed
    ports cannot meet anyone else's. Children inherit it, so run.py enters once for all peers.
    """
    if args.no_netns or os.environ.get("LAYBY_BENCH_NETNS"):
        return
    if getattr(args, "database_url", None):
        return  # a server outside this namespace is to be reached
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        print("note: not root (or no unshare/ip): running in this network namespace", file=sys.stderr)
        return
    env = {**os.environ, "LAYBY_BENCH_NETNS": "1"}
    script = 'ip link set lo up && exec "$@"'
    os.execvpe(
        "unshare", ["unshare", "--net", "--", "sh", "-c", script, "sh", sys.executable, *sys.argv], env
    )


def emit(report: Report, args: argparse.Namespace) -> None:
    from _table import render, render_split

    if args.json:
        args.json.write_text(json.dumps(asdict(report), indent=1), encoding="utf-8")
    print()
    if report.missing:
        print(f"{report.system}: {report.missing}")
        return
    print(f"{report.system}: {report.setup}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in report.versions.items()))
    print()
    print(render([report]))
    print()
    print("System CPU per cycle, by process:")
    print(render_split([report]))


def main(
    doc: str,
    system: str,
    missing: Callable[[], str | None],
    run_all: Callable[[argparse.Namespace, Report], Coroutine[Any, Any, None]],
    extra_args: Callable[[argparse.ArgumentParser], object] | None = None,
) -> None:
    """The body of every peer script: arguments, the private network, 'not installed', the table."""
    p = parser(doc)
    if extra_args:
        extra_args(p)
    args = p.parse_args()
    enter_private_network(args)
    report = Report(system=system)
    report.missing = missing()
    if report.missing is None:
        import uvloop  # the event loop of Layby's services, used by every client process here

        uvloop.run(run_all(args, report))
    emit(report, args)


def not_installed(what: str, how: str) -> str:
    return f"not installed ({what} missing: {how})"


def pip_hint() -> str:
    return "pip install -e '.[bench]'"


def npm_hint() -> str:
    return "bash bench/peers/install.sh"


def module_missing(*modules: str) -> str | None:
    import importlib.util

    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    return ", ".join(absent) or None


def version_of(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def here() -> Path:
    return Path(__file__).resolve().parent
