"""``layby up``: the whole system on one machine.

With no ``LAYBY_NATS_URL`` / ``LAYBY_DATABASE_URL`` it starts an embedded NATS server with
JetStream and an embedded PostgreSQL under the data directory, then runs each of the five
services in its own process (the same code that runs as separate pods on Kubernetes),
restarting one that crashes. It prints the inbox URL and the operator token and writes them,
with the NATS URL, to the runtime file that the CLI and the SDK read. Ctrl-C stops everything.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from layby.runtime import TOKEN_FILE, Runtime, data_dir, read_runtime
from layby_server.auth import new_token
from layby_server.channels import missing_extras
from layby_server.operations.embedded import (
    EmbeddedNats,
    EmbeddedNatsCluster,
    EmbeddedPostgres,
    die_with_parent,
    free_port,
    missing_embedded,
)
from layby_server.operations.natsauth import authorization_for
from layby_server.operations.runtime import remove_runtime, write_runtime
from layby_server.settings import Settings
from layby_server.store.sealing import new_key

SECRETS_KEY_FILE = "secrets.key"
SERVICES = ("ask", "door", "delivery", "resume", "sweeper")


def _kept(path: Path, make: Callable[[], str], *, min_length: int) -> str:
    """A value kept in the data dir (0600), made on first use."""
    if path.exists():
        value = path.read_text(encoding="utf-8").strip()
        if len(value) >= min_length:
            return value
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(value + "\n")
    return value


def _operator_token(directory: Path) -> str:
    return _kept(directory / TOKEN_FILE, new_token, min_length=16)


class _Stop(Exception):
    pass


def _raise_stop(_sig: int, _frame: FrameType | None) -> None:
    raise _Stop


def _wait_ready(url: str, procs: dict[str, subprocess.Popen[bytes]], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"the {name} service exited with code {proc.returncode} during start-up")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as resp:  # noqa: S310 - our own loopback URL
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the door did not become ready at {url}/readyz within {timeout:.0f}s")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the server will: connections of a previous run in TIME_WAIT do not block the port.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _restart_budget(what: str, restarts: list[float]) -> int | None:
    """Record a restart of ``what``; how many came before it within a minute, or None (and a
    line saying so) when that makes five: it keeps crashing and ``layby up`` stops."""
    now = time.monotonic()
    restarts[:] = [t for t in restarts if now - t < 60]
    if len(restarts) >= 5:
        print(f"the {what} keeps crashing; stopping", file=sys.stderr)
        return None
    restarts.append(now)
    return len(restarts) - 1


def _revive(label: str, server: EmbeddedNats | EmbeddedPostgres, restarts: list[float]) -> bool:
    """Restart an embedded server that exited, on its own port and data (the services reconnect
    by themselves). False when it keeps crashing: five restarts within a minute."""
    if server.proc is None or server.proc.poll() is None:
        return True
    recent = _restart_budget(f"embedded {label} server", restarts)
    if recent is None:
        return False
    pause = min(0.25 * 2**recent, 8.0)
    print(
        f"the embedded {label} server exited ({server.proc.returncode}); restarting in {pause:g}s",
        file=sys.stderr,
        flush=True,
    )
    time.sleep(pause)
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"the embedded {label} server did not come back: {exc}; trying again", file=sys.stderr)
    else:
        print(f"the embedded {label} server is back", file=sys.stderr, flush=True)
    return True


@dataclass(frozen=True)
class Shape:
    """How many embedded NATS nodes and how many processes of each service ``layby up`` runs
    (docs/reliability.md#the-cluster-on-one-machine)."""

    nats_nodes: int = 1
    replicas: int = 1

    def names(self) -> list[tuple[str, str]]:
        """(process name, service) for every service process: ``ask`` with one replica, ``ask-2``
        for the second, and so on."""
        return [
            (name if i == 0 else f"{name}-{i + 1}", name) for name in SERVICES for i in range(self.replicas)
        ]


@dataclass
class _System:
    """What `layby up` started and stops on the way out: the embedded servers (when no URL was
    configured) and the service processes."""

    shape: Shape = field(default_factory=Shape)
    nats: EmbeddedNats | None = None
    cluster: EmbeddedNatsCluster | None = None
    postgres: EmbeddedPostgres | None = None
    env: dict[str, str] = field(default_factory=dict)
    seeds: dict[str, str] = field(default_factory=dict)  # each service's NATS key (embedded NATS)
    services: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)  # process name -> service
    health_ports: dict[str, int] = field(default_factory=dict)  # process name -> its own side port

    def start_embedded(self, settings: Settings, directory: Path, tokens: str) -> tuple[str, str]:
        """The NATS and PostgreSQL URLs: the configured ones, else those of servers started here."""
        nats_url = settings.nats_url
        if nats_url is None:
            # Embedded NATS admits only Layby's own keys (docs/security.md#nats-authorization).
            authorization, self.seeds = authorization_for(settings.names, directory / "nats" / "keys", tokens)
            if self.shape.nats_nodes > 1:
                # Its own data: a single node's streams are not a cluster member's.
                self.cluster = EmbeddedNatsCluster(
                    directory / "nats-cluster", self.shape.nats_nodes, authorization=authorization
                ).start()
                nats_url = self.cluster.url
            else:
                self.nats = EmbeddedNats(
                    directory / "nats", authorization=authorization, monitor_port=free_port()
                ).start()
                nats_url = self.nats.url
        db_url = settings.database_url
        if db_url is None:
            self.postgres = EmbeddedPostgres(directory / "postgres").start()
            db_url = self.postgres.url
        return nats_url, db_url

    @property
    def monitor_url(self) -> str | None:
        """The embedded NATS's monitoring endpoints, comma-separated (``layby doctor`` reads
        them); None when NATS is not ours."""
        nodes = self.cluster.nodes if self.cluster is not None else [self.nats] if self.nats else []
        ports = [node.monitor_port for node in nodes if node.monitor_port is not None]
        return ",".join(f"http://127.0.0.1:{port}" for port in ports) or None

    def spawn(self, name: str) -> None:
        """Start the process ``name`` (a service, or one of its replicas: ``door-2``)."""
        role = self.roles.setdefault(name, name)
        # Own session: Ctrl-C reaches `layby up` only, which stops the services in order.
        own = {**self.env, "LAYBY_NATS_SEED": self.seeds[role]} if role in self.seeds else self.env
        if name in self.health_ports:
            # One machine, one port each: every process serves /metrics on its own side port.
            own = {**own, "LAYBY_HEALTH_PORT": str(self.health_ports[name])}
        self.services[name] = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "layby.cli", "serve", role],
            env=own,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - async-signal-safe: one prctl call
        )

    def supervise(self) -> int:
        """Restart whatever exits, servers first; 1 when one keeps crashing. Returns only then."""
        restarts: dict[str, list[float]] = {n: [] for n in (*self.services, "PostgreSQL")}
        embedded: dict[str, EmbeddedNats | EmbeddedPostgres | None] = {
            "NATS": self.nats,
            "PostgreSQL": self.postgres,
        }
        for node in self.cluster.nodes if self.cluster else []:
            embedded[f"NATS ({node.server_name})"] = node
        for label in embedded:
            restarts.setdefault(label, [])
        while True:
            time.sleep(0.5)
            for label, server in embedded.items():
                if server is not None and not _revive(label, server, restarts[label]):
                    return 1
            for name, proc in list(self.services.items()):
                if proc.poll() is None:
                    continue
                if _restart_budget(f"{name} service", restarts[name]) is None:
                    return 1
                print(f"the {name} service exited ({proc.returncode}); restarting", file=sys.stderr)
                self.spawn(name)

    def stop(self) -> None:
        """The services first (each drains, or is killed after 10 s), then the servers."""
        for proc in self.services.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.services.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.postgres is not None:
            self.postgres.stop()
        if self.nats is not None:
            self.nats.stop()
        if self.cluster is not None:
            self.cluster.stop()


def _refusal(settings: Settings, directory: Path) -> str | None:
    """Why `layby up` cannot start here: an embedded server it needs is not installed, nor the SDK
    of a configured channel, another one runs on this data dir, or the port is taken."""
    missing = missing_embedded(nats=settings.nats_url is None, postgres=settings.database_url is None)
    if missing is not None:
        return missing
    extras = missing_extras(settings.channels)
    if extras:
        return "error: " + "; ".join(extras)
    existing = read_runtime(directory)
    if existing is not None and existing.pid != os.getpid():
        return f"layby is already running (pid {existing.pid}) at {existing.url}"
    if not _port_free(settings.http_host, settings.http_port):
        return (
            f"error: {settings.http_host}:{settings.http_port} is already in use; "
            "set LAYBY_HTTP_PORT to a free port"
        )
    return None


def _tokens(settings: Settings, directory: Path) -> tuple[str | None, str]:
    """The operator token to print (one kept in the data dir, when ``LAYBY_API_TOKENS`` is not set)
    and the tokens the services accept."""
    if settings.api_tokens is not None:
        return None, settings.api_tokens
    token = _operator_token(directory)
    return token, f"{token}:operator:operator"


def _service_env(
    settings: Settings, directory: Path, *, nats_url: str, db_url: str, tokens: str, shape: Shape
) -> dict[str, str]:
    """The services' environment: ours, plus where everything is."""
    env = dict(os.environ)
    # People read `layby up`'s terminal: console lines unless the user chose otherwise.
    env.setdefault("LAYBY_LOG_FORMAT", "console")
    if not settings.secrets_key:
        # Sensitive answers are sealed with a key kept beside the data (docs/security.md).
        env["LAYBY_SECRETS_KEY"] = _kept(directory / SECRETS_KEY_FILE, new_key, min_length=43)
    env.update(
        LAYBY_NATS_URL=nats_url,
        LAYBY_DATABASE_URL=db_url,
        LAYBY_API_TOKENS=tokens,
        LAYBY_DATA_DIR=str(directory),
        LAYBY_HTTP_PORT=str(settings.http_port),
        LAYBY_HTTP_HOST=settings.http_host,
    )
    if shape.nats_nodes > 1:
        # Every stream on three nodes (or on each, on a smaller cluster): the shipped shape.
        env.setdefault("LAYBY_STREAM_REPLICAS", str(min(shape.nats_nodes, 3)))
    if shape.replicas > 1:
        env["LAYBY_HTTP_REUSE_PORT"] = "on"  # the door replicas share the port
    return env


def health_ports_of(settings: Settings, shape: Shape) -> dict[str, int]:
    """Under `layby up` every process runs on one machine, so ``LAYBY_HEALTH_PORT`` is where the
    ports start: each process (in ``Shape.names`` order) gets the next one (docs/observability.md)."""
    if settings.health_port is None:
        return {}
    return {name: settings.health_port + i for i, (name, _) in enumerate(shape.names())}


def _announce(
    out: object, url: str, token: str | None, directory: Path, health_ports: dict[str, int] | None = None
) -> None:
    print(f"Layby is up.\n  inbox:  {url}/\n  API:    {url}/api/interactions", file=out)  # type: ignore[call-overload]
    if token:
        print(f"  token:  {token}", file=out)  # type: ignore[call-overload]
    for name, port in (health_ports or {}).items():
        print(f"  metrics {name}: http://127.0.0.1:{port}/metrics", file=out)  # type: ignore[call-overload]
    print(f"  data:   {directory}\nPress Ctrl-C to stop.", file=out, flush=True)  # type: ignore[call-overload]


def up(settings: Settings, *, out: object = sys.stdout, shape: Shape | None = None) -> int:
    """Start everything, print where it is, supervise until Ctrl-C (0) or a crash loop (1)."""
    shape = shape or Shape()
    directory = data_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    refusal = _refusal(settings, directory)
    if refusal is None and shape.nats_nodes > 1 and settings.nats_url is not None:
        refusal = (
            "error: --nats-cluster runs an embedded NATS cluster, and LAYBY_NATS_URL names a NATS "
            "already; unset LAYBY_NATS_URL, or leave out --nats-cluster"
        )
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 1
    # Handle both explicitly: a shell that starts us in the background ignores SIGINT otherwise.
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    system = _System(shape=shape)
    try:
        token, tokens = _tokens(settings, directory)
        nats_url, db_url = system.start_embedded(settings, directory, tokens)
        system.env = _service_env(
            settings, directory, nats_url=nats_url, db_url=db_url, tokens=tokens, shape=shape
        )
        monitor_url = settings.nats_monitor_url or system.monitor_url
        if monitor_url is not None:
            system.env["LAYBY_NATS_MONITOR_URL"] = monitor_url
        url = f"http://{settings.http_host}:{settings.http_port}"
        system.health_ports = health_ports_of(settings, shape)
        for name, role in shape.names():
            system.roles[name] = role
            system.spawn(name)
        _wait_ready(url, system.services)
        write_runtime(
            directory,
            Runtime(
                url=url,
                token=token,
                nats_url=nats_url,
                database_url=db_url,
                pid=os.getpid(),
                public_base_url=settings.public_base_url,
                nats_monitor_url=monitor_url,
            ),
        )
        _announce(out, url, token, directory, system.health_ports)
        return system.supervise()
    except (KeyboardInterrupt, _Stop):
        print("\nstopping...", file=sys.stderr)
        return 0
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        system.stop()
        current = read_runtime(directory)
        if current is not None and current.pid == os.getpid():
            remove_runtime(directory)
        signal.signal(signal.SIGINT, signal.default_int_handler)
