"""Restate in the peer workload: a handler waiting on an awakeable resolved over the ingress API.

    .venv/bin/python bench/peers/peer_restate.py [--seconds 10] [--concurrency 1 100]

Starts ``restate-server`` (the native binary of the ``@restatedev/restate-server`` npm package,
installed by bench/peers/install.sh into bench/peers/.node/; default options, telemetry off, state
in a temporary directory) and the Python service (bench/peers/_restate_service.py, the
``restate-sdk`` package on Hypercorn), registered through the admin API (``POST /deployments``).
A run is one ``POST /Asker/ask`` on the ingress, which returns the handler's result. The handler
makes an awakeable and, inside ``ctx.run``, posts its id with the question to a callback port of
this process: that is when the question is seen. The answer is
``POST /restate/awakeables/{id}/resolve`` on the ingress; the run has resumed when the ask request
returns the answer. Requests go over the lean keep-alive client of bench/_http.py. How it is
timed: bench/peers/_harness.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
import _harness as h
from _http import Conn

SYSTEM = "Restate"


def server_binary() -> str | None:
    """The platform package's binary under bench/peers/.node/, else ``restate-server`` on PATH."""
    arch = {"x86_64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    plat = {"linux": "linux", "darwin": "darwin"}.get(sys.platform, sys.platform)
    candidate = (
        h.here()
        / ".node"
        / "node_modules"
        / "@restatedev"
        / f"restate-server-{plat}-{arch}"
        / "bin"
        / "restate-server"
    )
    return str(candidate) if candidate.exists() else shutil.which("restate-server")


class ConnPool:
    """Keep-alive connections to one port, opened on demand and reused."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.idle: list[Conn] = []

    async def request(self, path: str, body: bytes) -> tuple[int, bytes]:
        conn = self.idle.pop() if self.idle else await Conn("127.0.0.1", self.port, "").open()
        try:
            status, out = await conn.request("POST", path, body, raw=True)
        except BaseException:
            await conn.close()
            raise
        self.idle.append(conn)
        return status, out

    async def close(self) -> None:
        while self.idle:
            await self.idle.pop().close()


class Callbacks:
    """The load generator's callback port: the handler posts each question and awakeable id here."""

    def __init__(self) -> None:
        self.workload: h.Workload | None = None
        self.server: asyncio.Server | None = None

    async def start(self, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                if not await reader.readline():
                    return
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length))
                if self.workload is not None:
                    self.workload.seen(body["question"], body["id"])
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


class RestatePeer:
    name = SYSTEM

    def __init__(self, ingress_port: int, callbacks: Callbacks) -> None:
        self.asks = ConnPool(ingress_port)
        self.answers = ConnPool(ingress_port)
        self.callbacks = callbacks

    async def open(self, workload: h.Workload, n: int, answerers: int) -> None:
        self.callbacks.workload = workload

    async def run(self, question: str, workload: h.Workload) -> str:
        status, body = await self.asks.request("/Asker/ask", json.dumps(question).encode())
        if status != 200:
            raise RuntimeError(f"the ingress said {status}: {body[:200]!r}")
        return str(json.loads(body))

    async def answer(self, ref: Any) -> None:
        status, body = await self.answers.request(
            f"/restate/awakeables/{ref}/resolve", json.dumps(h.ANSWER).encode()
        )
        if status not in (200, 202):
            raise RuntimeError(f"resolve said {status}: {body[:200]!r}")

    async def close(self) -> None:
        self.callbacks.workload = None
        await self.asks.close()
        await self.answers.close()


def missing() -> str | None:
    absent = h.module_missing("restate", "hypercorn")
    if absent:
        return h.not_installed(absent, h.pip_hint())
    if server_binary() is None:
        return h.not_installed("restate-server", h.npm_hint())
    return None


def write_config(base: Path, ingress: int, admin: int, fabric: int) -> Path:
    path = base / "restate.toml"
    path.write_text(
        "disable-telemetry = true\n"
        'log-filter = "warn"\n'
        'listen-mode = "tcp"\n'
        'bind-ip = "127.0.0.1"\n'
        f"bind-port = {fabric}\n"
        f"[ingress]\nbind-port = {ingress}\n"
        f"[admin]\nbind-port = {admin}\ndisable-web-ui = true\n",
        encoding="utf-8",
    )
    return path


def register(admin: int, service: int) -> None:
    import urllib.request

    request = urllib.request.Request(
        f"http://127.0.0.1:{admin}/deployments",
        data=json.dumps({"uri": f"http://127.0.0.1:{service}"}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # loopback only
        if response.status not in (200, 201):
            raise RuntimeError(f"registering the deployment: {response.status}")


class Processes:
    """restate-server and the service, started (blocking, before anything is measured) and stopped."""

    def __init__(self, callback_port: int) -> None:
        binary = server_binary()
        assert binary is not None
        self.tmp = tempfile.TemporaryDirectory(prefix="peers-restate-")
        base = Path(self.tmp.name)
        self.ingress, self.admin, fabric, self.service_port = (h.free_port() for _ in range(4))
        config = write_config(base, self.ingress, self.admin, fabric)
        self.log_path = base / "restate.log"
        self.log = self.log_path.open("wb")
        self.server: subprocess.Popen[Any] = subprocess.Popen(
            [binary, "--config-file", str(config), "--base-dir", str(base / "data"), "--no-logo"],
            stdout=self.log,
            stderr=self.log,
        )
        self.service: subprocess.Popen[Any] = subprocess.Popen(
            [
                sys.executable,
                str(h.here() / "_restate_service.py"),
                str(self.service_port),
                str(callback_port),
            ],
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, check=False
        ).stdout

    def register(self) -> None:
        for port in (self.ingress, self.admin, self.service_port):
            h.wait_port(port)
        for attempt in range(50):
            try:
                register(self.admin, self.service_port)
                return
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.2)

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        h.stop_process(self.service)
        h.stop_process(self.server)
        self.log.close()
        self.tmp.cleanup()


async def run_all(args: argparse.Namespace, report: h.Report) -> None:
    callbacks = Callbacks()
    callback_port = h.free_port()
    await callbacks.start(callback_port)
    procs = Processes(callback_port)
    try:
        procs.register()
        report.versions = {
            "restate-server": procs.version.replace("restate-server", "").strip() or "?",
            "restate-sdk": h.version_of("restate-sdk"),
            "hypercorn": h.version_of("hypercorn"),
        }
        report.setup = "restate-server (default options), one service process (restate-sdk on Hypercorn)"
        pids = {"restate-server": procs.server.pid, "service": procs.service.pid}
        for n in args.concurrency:
            point = await h.level(RestatePeer(procs.ingress, callbacks), n, lambda: pids, args)
            report.points.append(point)
    except Exception:
        print(procs.tail(), file=sys.stderr)
        raise
    finally:
        callbacks.close()
        procs.stop()


if __name__ == "__main__":
    h.main(__doc__ or "", SYSTEM, missing, run_all)
