"""The shape Layby ships for, started on this machine, and the faults injected into it.

``Shape`` runs a JetStream cluster (``EmbeddedNatsCluster``, three nodes; one node for the single-node
comparison), its own embedded PostgreSQL, ``REPLICAS`` processes of every service (each door replica
on its own port) and one worker process for parked runs. ``Faults`` injects one fault at a time
into it and records when each began and ended (``FaultRecord``); the checker (``history.py``)
judges the operations against those windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx

from layby.connection import connect_nats
from layby_server.operations.embedded import EmbeddedNats, EmbeddedNatsCluster, EmbeddedPostgres, free_port
from layby_server.settings import Settings, load_settings
from tests.conftest import OPERATOR, SECRETS_KEY, TOKENS
from tests.faults.flows import SCHEMA_SQL

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("ask", "door", "delivery", "resume", "sweeper")
REPLICAS = 2
PYTHONPATH = os.pathsep.join(
    str(ROOT / part) for part in ("libs/layby", "libs", "contracts", "services", ".")
)
"""This checkout's code first, for the services and the worker (the venv may hold another's)."""
PAUSE_SECONDS = 7.0
"""A paused node stays frozen longer than JetStream's election timeout (a few seconds)."""
KILLED_NODE_DOWN_SECONDS = 3.0
"""How long a killed node stays down before it is restarted."""


@dataclass
class FaultRecord:
    """One injected fault: its kind, what it hit, and when it began and ended (``time.time()``)."""

    kind: str
    target: str
    start: float
    end: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class Crash:
    """A process that exited without the suite killing it: a service bug the harness survives."""

    name: str
    replica: int
    returncode: int | None
    at: float


@dataclass
class Shape:
    """Everything the suite runs, in ``root``. ``nodes`` 3 is the production shape (streams at 3
    replicas); 1 is the single-node comparison."""

    root: Path
    nodes: int = 3
    replicas: int = REPLICAS
    worker: bool = True
    cluster: EmbeddedNatsCluster | None = None
    pg: EmbeddedPostgres | None = None
    settings: Settings | None = None
    door_ports: list[int] = field(default_factory=list)
    procs: dict[tuple[str, int], subprocess.Popen[bytes]] = field(default_factory=dict)
    crashes: list[Crash] = field(default_factory=list)
    """Processes that exited on their own (restarted by the supervisor)."""
    _down: set[tuple[str, int]] = field(default_factory=set)
    _supervisor: asyncio.Task[None] | None = None

    @property
    def door_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.door_ports]

    @property
    def config(self) -> Settings:
        assert self.settings is not None, "the shape is not started"
        return self.settings

    @property
    def nats(self) -> EmbeddedNatsCluster:
        assert self.cluster is not None, "the shape is not started"
        return self.cluster

    @property
    def postgres(self) -> EmbeddedPostgres:
        assert self.pg is not None, "the shape is not started"
        return self.pg

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        self.cluster = EmbeddedNatsCluster(self.root / "nats", size=self.nodes)
        if self.nodes == 1:
            # nats-server refuses a cluster block without routes: one plain JetStream node.
            self.cluster.nodes = [
                EmbeddedNats(self.root / "nats" / "n0", server_name="layby-n0", monitor_port=free_port())
            ]
        await asyncio.to_thread(self.cluster.start)
        self.pg = EmbeddedPostgres(self.root / "pg" / "data")
        await asyncio.to_thread(self.pg.start)
        ns = "f" + uuid.uuid4().hex[:10]
        self.door_ports = [free_port() for _ in range(self.replicas)]
        self.settings = load_settings(
            {},
            nats_url=self.cluster.url,
            database_url=self.pg.url,
            namespace=ns,
            db_schema=ns,
            api_tokens=TOKENS,
            http_port=self.door_ports[0],
            stream_replicas=self.nodes,
            secrets_key=SECRETS_KEY,
            public_base_url=self.door_urls[0],
        )
        await self._wait_cluster_ready()
        conn = await asyncpg.connect(self.pg.url)
        try:
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{ns}"')
            await conn.execute(f'SET search_path TO "{ns}"')
            await conn.execute(SCHEMA_SQL)
        finally:
            await conn.close()
        for name in SERVICES:
            for i in range(self.replicas):
                self.spawn(name, i)
        if self.worker:
            self.spawn_worker()
        self._supervisor = asyncio.create_task(self._supervise())
        await self.wait_doors()
        await self._wait_services()

    async def _supervise(self) -> None:
        """Restart a process that exited on its own, as Kubernetes would, and record it."""
        while True:
            await asyncio.sleep(0.5)
            for (name, replica), proc in list(self.procs.items()):
                if proc.poll() is not None and (name, replica) not in self._down:
                    self.crashes.append(Crash(name, replica, proc.returncode, time.time()))
                    if name == "worker":
                        self.spawn_worker()
                    else:
                        self.spawn(name, replica)

    def env(self, name: str, replica: int) -> dict[str, str]:
        s = self.config
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAYBY_", "INTERACTIONS_"))}
        env.update(
            LAYBY_NATS_URL=self.nats.url,
            LAYBY_DATABASE_URL=self.postgres.url,
            LAYBY_NAMESPACE=s.namespace,
            LAYBY_DB_SCHEMA=s.db_schema,
            LAYBY_API_TOKENS=TOKENS,
            LAYBY_HTTP_PORT=str(self.door_ports[replica] if name == "door" else free_port()),
            LAYBY_LOG_FORMAT="json",
            LAYBY_LOG_LEVEL="info",
            LAYBY_SECRETS_KEY=str(s.secrets_key),
            LAYBY_STREAM_REPLICAS=str(self.nodes),
            INTERACTIONS_PUBLIC_BASE_URL=self.door_urls[0],
            PYTHONPATH=PYTHONPATH,
        )
        return env

    def _log(self, name: str, replica: int) -> int:
        path = self.root / "logs" / f"{name}-{replica}.log"
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def spawn(self, name: str, replica: int) -> None:
        fd = self._log(name, replica)
        try:
            self.procs[(name, replica)] = subprocess.Popen(
                [sys.executable, "-m", "layby.cli", "serve", name],
                env=self.env(name, replica),
                cwd=ROOT,
                stdout=fd,
                stderr=fd,
            )
        finally:
            os.close(fd)

    def spawn_worker(self) -> None:
        env = self.env("worker", 0)
        env.update(
            LAYBY_TOKEN=OPERATOR,
            LAYBY_CONTINUATION_ACK_WAIT_SECONDS="5",
            PARKS_DSN=self.postgres.url,
            PARKS_SCHEMA=self.config.db_schema,
        )
        fd = self._log("worker", 0)
        try:
            self.procs[("worker", 0)] = subprocess.Popen(
                [sys.executable, "-m", "layby.cli", "worker", "tests.faults.flows:worker"],
                env=env,
                cwd=ROOT,
                stdout=fd,
                stderr=fd,
            )
        finally:
            os.close(fd)

    async def wait_doors(self, timeout: float = 90) -> None:
        for url in self.door_urls:
            await wait_ready(url, timeout)

    async def _wait_cluster_ready(self, timeout: float = 60) -> None:
        """Every node's JetStream is current (``/healthz``) and a meta leader is elected."""
        deadline = time.monotonic() + timeout
        while True:
            led = self.nodes == 1 or self.nats.meta_leader() is not None
            if all(_node_healthy(n) for n in self.nats.nodes) and led:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the NATS cluster was not ready within {timeout:.0f}s")
            await asyncio.sleep(0.2)

    async def _wait_services(self, timeout: float = 90) -> None:
        """The ask service answers its commands, the consumers exist, the worker serves its flow."""
        nc = await connect_nats(self.nats.url, name="faults-wait")
        try:
            js = nc.jetstream()
            names = self.config.names
            deadline = time.monotonic() + timeout
            for role in ("resume", "delivery", "projector"):
                while True:
                    try:
                        await js.consumer_info(names.events_stream, names.durable(role))
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.2)
            while True:
                try:
                    await nc.request(names.cmd_ask, b"{}", timeout=1)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            if self.worker:
                while True:
                    try:
                        await js.consumer_info(names.continuations_stream, names.flow_durable("faulty"))
                        break
                    except Exception:
                        if time.monotonic() > deadline:
                            raise
                        await asyncio.sleep(0.2)
        finally:
            await nc.close()

    async def stop(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                await asyncio.to_thread(proc.wait, 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.cluster is not None:
            await asyncio.to_thread(self.cluster.stop)
        if self.pg is not None:
            await asyncio.to_thread(self.pg.stop)

    # -- one replica of a service ---------------------------------------------------------------

    def kill_replica(self, name: str, replica: int) -> None:
        """SIGKILL one replica; it stays down (the supervisor leaves it) until restarted."""
        self._down.add((name, replica))
        proc = self.procs[(name, replica)]
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    async def restart_replica(self, name: str, replica: int) -> None:
        self.kill_replica(name, replica)
        self._down.discard((name, replica))
        if name == "worker":
            self.spawn_worker()
        else:
            self.spawn(name, replica)
        if name == "door":
            await wait_ready(self.door_urls[replica], 60)


def _node_healthy(node: EmbeddedNats) -> bool:
    """The node's JetStream is up and current with its groups (nats-server's ``/healthz``)."""
    if not node.running or node.monitor_port is None:
        return False
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{node.monitor_port}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, ValueError):
        return False


async def wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2) as http:
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{url}/readyz")).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} was not ready within {timeout:.0f}s")
            await asyncio.sleep(0.1)


class Faults:
    """The faults, each injected into ``shape`` and recorded in ``records`` with its start and end.
    A fault ends when what it broke is back: the node current again, the replica ready again."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.records: list[FaultRecord] = []

    @property
    def kinds(self) -> dict[str, Callable[[], Awaitable[FaultRecord]]]:
        return {
            "kill_stream_leader": self.kill_stream_leader,
            "kill_follower": self.kill_follower,
            "kill_meta_leader": self.kill_meta_leader,
            "pause_node": self.pause_node,
            "rolling_restart": self.rolling_restart,
            "kill_service_replicas": self.kill_service_replicas,
            "restart_postgres": self.restart_postgres,
        }

    async def inject(self, kind: str) -> FaultRecord:
        return await self.kinds[kind]()

    def _begin(self, kind: str, target: str) -> FaultRecord:
        record = FaultRecord(kind=kind, target=target, start=time.time())
        self.records.append(record)
        return record

    async def stream_leader(self) -> EmbeddedNats:
        nc = await connect_nats(self.shape.nats.url, name="faults-leader")
        try:
            info = await nc.jetstream().stream_info(self.shape.config.names.events_stream)
        finally:
            await nc.close()
        assert info.cluster is not None and info.cluster.leader, "the event stream has no leader"
        return self.shape.nats.node_named(info.cluster.leader)

    async def wait_current(self, timeout: float = 60) -> None:
        """Every node runs and is current, a meta leader and the event stream's leader are elected
        and each of its replicas is current."""
        deadline = time.monotonic() + timeout
        stream = self.shape.config.names.events_stream
        while True:
            ok = all(_node_healthy(n) for n in self.shape.nats.nodes) and self.shape.nats.meta_leader()
            if ok:
                with contextlib.suppress(Exception):
                    nc = await connect_nats(self.shape.nats.url, name="faults-current")
                    try:
                        info = await nc.jetstream().stream_info(stream)
                    finally:
                        await nc.close()
                    cluster = info.cluster
                    replicas = cluster.replicas or [] if cluster else []
                    if (
                        cluster is not None
                        and cluster.leader
                        and len(replicas) == self.shape.nodes - 1
                        and all(r.current for r in replicas)
                    ):
                        return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster was not current again within {timeout:.0f}s")
            await asyncio.sleep(0.2)

    async def _kill_node(self, kind: str, node: EmbeddedNats) -> FaultRecord:
        record = self._begin(kind, str(node.server_name))
        node.kill()
        await asyncio.sleep(KILLED_NODE_DOWN_SECONDS)
        await asyncio.to_thread(node.start)
        await self.wait_current()
        record.end = time.time()
        return record

    async def kill_stream_leader(self) -> FaultRecord:
        return await self._kill_node("kill_stream_leader", await self.stream_leader())

    async def kill_follower(self) -> FaultRecord:
        leader = await self.stream_leader()
        follower = random.choice([n for n in self.shape.nats.nodes if n is not leader])
        return await self._kill_node("kill_follower", follower)

    async def kill_meta_leader(self) -> FaultRecord:
        node = self.shape.nats.meta_leader()
        assert node is not None, "no meta leader"
        return await self._kill_node("kill_meta_leader", node)

    async def pause_node(self) -> FaultRecord:
        """SIGSTOP the event stream's leader (the worst node to freeze) past the election timeout."""
        node = await self.stream_leader()
        record = self._begin("pause_node", f"{node.server_name} for {PAUSE_SECONDS:g}s")
        node.pause()
        await asyncio.sleep(PAUSE_SECONDS)
        node.resume()
        await self.wait_current()
        record.end = time.time()
        return record

    async def rolling_restart(self) -> FaultRecord:
        """Each node in turn: SIGTERM, start again, wait until it is current before the next."""
        record = self._begin("rolling_restart", "every node")
        for node in self.shape.nats.nodes:
            await asyncio.to_thread(node.stop)
            await asyncio.to_thread(node.start)
            await self.wait_current()
        record.end = time.time()
        return record

    async def kill_service_replicas(self) -> FaultRecord:
        """SIGKILL one replica of each service (and the worker) at once, then start them again."""
        replica = random.randrange(self.shape.replicas)
        record = self._begin("kill_service_replicas", f"replica {replica} of each service and the worker")
        victims = [(name, replica) for name in SERVICES]
        if self.shape.worker:
            victims.append(("worker", 0))
        for name, i in victims:
            self.shape.kill_replica(name, i)
        await asyncio.sleep(1.0)
        await asyncio.gather(*(self.shape.restart_replica(name, i) for name, i in victims))
        record.end = time.time()
        return record

    async def kill_one_replica(self, name: str) -> FaultRecord:
        """SIGKILL one replica of one service, then start it again."""
        replica = random.randrange(self.shape.replicas)
        record = self._begin(f"kill_{name}_replica", f"{name}-{replica}")
        self.shape.kill_replica(name, replica)
        await asyncio.sleep(1.0)
        await self.shape.restart_replica(name, replica)
        record.end = time.time()
        return record

    async def restart_postgres(self) -> FaultRecord:
        record = self._begin("restart_postgres", "postgres")
        await asyncio.to_thread(self.shape.postgres.stop)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(self.shape.postgres.start)
        await self.shape.wait_doors()
        record.end = time.time()
        return record
