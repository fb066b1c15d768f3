"""Start and stop `layby up` for a benchmark, and measure process-tree memory."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


def pct(values: list[float], q: float) -> float:
    """The q-quantile of ``values`` (seconds), in milliseconds."""
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


def tree_rss_mb(pid: int) -> float:
    root = psutil.Process(pid)
    total = 0
    for p in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total / 1024 / 1024


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by a process and its children (`layby up`: the
    services, NATS and PostgreSQL) — a cost measure that a busy machine disturbs less than rates."""
    root = psutil.Process(pid)
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def _label(proc: psutil.Process) -> str:
    """Which part of `layby up` a process is: a service's name, NATS, PostgreSQL, or `up` itself."""
    try:
        cmd = proc.cmdline()
    except psutil.Error:
        return "gone"
    if "serve" in cmd and cmd.index("serve") + 1 < len(cmd):
        return cmd[cmd.index("serve") + 1]
    text = " ".join(cmd[:2])
    if "nats-server" in text:
        return "nats"
    if "postgres" in text or proc.name().startswith("postgres"):
        return "postgres"
    if "jqchild" in " ".join(cmd):
        return "jq"
    return "up"


def tree_cpu_by_process(pid: int) -> dict[str, float]:
    """User + system CPU seconds used so far by each part of `layby up` (its services by name,
    NATS, PostgreSQL with all its backends, the supervisor): where a cycle's CPU goes."""
    root = psutil.Process(pid)
    out: dict[str, float] = {}
    for p in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            label = _label(p)
            out[label] = out.get(label, 0.0) + times.user + times.system
    return out


def cpu_split(before: dict[str, float], after: dict[str, float], cycles: int) -> dict[str, float]:
    """Milliseconds of CPU per cycle by part, between two ``tree_cpu_by_process`` readings."""
    return {k: (after[k] - before.get(k, 0.0)) * 1000 / max(cycles, 1) for k in after}


def add_level_options(parser: argparse.ArgumentParser) -> None:
    """``--seconds`` each load level runs and ``--concurrency``: the levels (N clients), one each."""
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 100])


@dataclass(frozen=True)
class Level:
    """A load level's wall time and the CPU seconds `layby up` used meanwhile: in all (NaN when its
    pid was not known) and, when asked for, by part (``tree_cpu_by_process``)."""

    elapsed: float
    cpu: float
    parts_before: dict[str, float]
    parts_after: dict[str, float]

    def cpu_ms(self, count: int) -> float:
        """`layby up`'s CPU milliseconds per one of ``count`` operations."""
        return self.cpu * 1000 / max(count, 1)

    def split_ms(self, count: int) -> dict[str, float]:
        """`layby up`'s CPU milliseconds per operation by part (none unless measured)."""
        return cpu_split(self.parts_before, self.parts_after, count) if self.parts_after else {}

    def figures(self, count: int, latencies: list[float]) -> dict[str, float]:
        """Operations per second, the latencies' p50 and p99 (ms), the server's CPU ms per operation."""
        return {
            "rate": count / self.elapsed,
            "p50": pct(latencies, 0.5),
            "p99": pct(latencies, 0.99),
            "cpu_ms": self.cpu_ms(count),
        }


async def load_level(
    clients: Iterable[Coroutine[Any, Any, None]],
    stop: asyncio.Event,
    seconds: float,
    server_pid: int | None,
    *,
    by_part: bool = False,
) -> Level:
    """Run ``clients`` for ``seconds``, then set ``stop`` and wait for them to return; the CPU is
    `layby up`'s (``server_pid``), by part too when ``by_part``."""
    cpu_before = tree_cpu_seconds(server_pid) if server_pid else float("nan")
    parts_before = tree_cpu_by_process(server_pid) if server_pid and by_part else {}
    started = time.perf_counter()
    tasks = [asyncio.create_task(c) for c in clients]
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    cpu = tree_cpu_seconds(server_pid) - cpu_before if server_pid else float("nan")
    parts_after = tree_cpu_by_process(server_pid) if server_pid and by_part else {}
    return Level(elapsed, cpu, parts_before, parts_after)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Up:
    proc: subprocess.Popen[str]
    tmp: tempfile.TemporaryDirectory[str]
    url: str
    token: str
    nats_url: str
    data_dir: str

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(60)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.tmp.cleanup()


def layby_python() -> str:
    """The interpreter whose `layby up` a bench starts: its own, unless ``BENCH_LAYBY_PYTHON``
    names another build's (bench/compare.py runs the same bench client against an older build,
    docs/performance.md#before-and-after-in-one-run-benchcomparepy)."""
    return os.environ.get("BENCH_LAYBY_PYTHON") or sys.executable


def start_up(**extra_env: str) -> Up:
    """`layby up` on embedded NATS and PostgreSQL in a temporary data dir, ready to use."""
    tmp = tempfile.TemporaryDirectory(prefix="layby-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYBY_", "INTERACTIONS_"))}
    env.update(
        {
            "LAYBY_DATA_DIR": tmp.name,
            "LAYBY_HTTP_PORT": str(free_port()),
            "LAYBY_LOG_LEVEL": "warning",
            "INTERACTIONS_MAX_CONCURRENT": "none",
            **extra_env,
        }
    )
    proc = subprocess.Popen(
        [layby_python(), "-m", "layby.cli", "up"], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    token = url = ""
    for line in proc.stdout:
        if "token:" in line:
            token = line.split("token:")[1].strip()
        if "inbox:" in line:
            url = line.split("inbox:")[1].strip().rstrip("/")
        if "Press Ctrl-C" in line:
            break
    from layby.runtime import read_runtime

    runtime = read_runtime(Path(tmp.name))
    if not token and extra_env.get("LAYBY_API_TOKENS"):
        # Tokens of its own (TOKEN:IDENTITY:ROLE,...): `layby up` prints none; the first is the asker.
        token = extra_env["LAYBY_API_TOKENS"].split(",")[0].split(":")[0]
    assert runtime is not None and token and url
    time.sleep(3)
    return Up(proc, tmp, url, token, runtime.nats_url, tmp.name)


@contextlib.contextmanager
def layby_up(**extra_env: str) -> Iterator[Up]:
    """`layby up` (``start_up``) for the block's length, stopped after it whatever happens."""
    up = start_up(**extra_env)
    try:
        yield up
    finally:
        up.stop()


@contextlib.contextmanager
def up_unless_given(url: str | None, **extra_env: str) -> Iterator[Up | None]:
    """`layby up` (``layby_up``) for the block's length, unless the bench was pointed at a running
    system's ``url`` (then None: nothing to start or stop)."""
    if url:
        yield None
        return
    with layby_up(**extra_env) as up:
        yield up


def add_system_options(parser: argparse.ArgumentParser, *, nats: bool = True) -> None:
    """``--url`` and ``--token`` (and ``--nats``) of a running system to measure instead of starting
    `layby up` (see ``up_unless_given``)."""
    parser.add_argument("--url")
    parser.add_argument("--token")
    if nats:
        parser.add_argument("--nats")


def profiled(service: str | None, out: str) -> dict[str, str]:
    """The environment under which bench/_profile/sitecustomize.py cProfiles ``service`` of `layby up`
    into the file ``out``; none when no service is named."""
    if not service:
        return {}
    path = [str(Path(__file__).resolve().parent / "_profile"), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(path), "BENCH_PROFILE_SERVICE": service, "BENCH_PROFILE_OUT": out}


def print_profile(heading: str, out: str, rows: int) -> None:
    """The ``rows`` functions of the profile ``out`` with the most time of their own."""
    import pstats

    print(f"\n{heading}: the most time of its own")
    pstats.Stats(out).sort_stats("tottime").print_stats(rows)


def table_head(header: str, *, first: str = "---") -> None:
    """A blank line, then a Markdown table's ``header`` row and its alignment row: the first column
    aligned as ``first`` says ("---" left, "---:" right), the figures in the others to the right."""
    print()
    print(header)
    print("|" + "|".join([first] + ["---:"] * (header.count("|") - 2)) + "|")


@contextlib.contextmanager
def flow_worker(up: Up, target: str, **extra_env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A `layby worker` process serving ``target`` (``module:worker`` in bench/) against ``up``,
    given two seconds to bind its flows, and terminated after the block."""
    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYBY_", "INTERACTIONS_"))}
    env.update(
        LAYBY_DATA_DIR=up.data_dir,
        LAYBY_LOG_LEVEL="warning",
        **extra_env,
        PYTHONPATH=os.pathsep.join([str(here), env.get("PYTHONPATH", "")]),
    )
    worker = subprocess.Popen([sys.executable, "-m", "layby.cli", "worker", target], env=env, cwd=here)
    try:
        time.sleep(2)
        yield worker
    finally:
        worker.terminate()
        worker.wait(30)
