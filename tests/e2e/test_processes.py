"""End to end: the five services as separate processes, and ``layby up`` with the CLI (README.md)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from layby_server.operations.embedded import free_port
from layby_server.settings import Settings
from tests.conftest import OPERATOR, TOKENS
from tests.helpers import SSE, eventually, eventually_sync

pytestmark = pytest.mark.e2e
SERVICES = ("ask", "door", "delivery", "resume", "sweeper")


def service_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        LAYBY_NATS_URL=str(settings.nats_url),
        LAYBY_DATABASE_URL=str(settings.database_url),
        LAYBY_NAMESPACE=settings.namespace,
        LAYBY_DB_SCHEMA=settings.db_schema,
        LAYBY_API_TOKENS=TOKENS,
        LAYBY_HTTP_PORT=str(settings.http_port),
        LAYBY_LOG_FORMAT="json",
        LAYBY_SECRETS_KEY=str(settings.secrets_key),
    )
    return env


def spawn(name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "layby.cli", "serve", name],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def services(env: dict[str, str]) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """The five services as processes in ``env``, by name, stopped after the block."""
    procs = {name: spawn(name, env) for name in SERVICES}
    try:
        yield procs
    finally:
        stop_processes(procs)


@pytest.fixture
def processes(settings: Settings) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    with services(service_env(settings)) as procs:
        yield procs


def stop_processes(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM every service (they drain), SIGKILL any that is still there after 15 s."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs.values():
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


async def wait_ready(url: str, timeout: float = 30) -> None:
    async with httpx.AsyncClient() as http:
        await eventually(
            lambda: http.get(f"{url}/readyz"),
            f"{url} to be ready",
            until=lambda resp: resp.status_code == 200,
            timeout=timeout,
            interval=0.1,
            retry=httpx.HTTPError,
        )


async def test_killing_the_door_mid_stream_loses_no_answer(
    settings: Settings, processes: dict[str, subprocess.Popen[bytes]], store: object, db: object
) -> None:
    """SIGKILL the door while a client streams: on restart the client resumes with Last-Event-ID,
    the answer given through the new door reaches the blocked asker, and no frame is lost."""
    from layby.sdk import connect

    url = f"http://127.0.0.1:{settings.http_port}"
    await wait_ready(url)
    client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
    headers = {"Authorization": f"Bearer {OPERATOR}"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=None) as http:
            async with http.stream("GET", "/api/interactions/stream") as resp:
                stream = SSE(resp)  # its start point was taken before the door sent the headers
                ask = asyncio.create_task(
                    client.ask_user("Survive a crash?", answer_format="confirm", timeout=60)
                )
                add = await stream.next(timeout=15)
                processes["door"].kill()  # mid-stream, no goodbye
                processes["door"].wait()
                await stream.close()
            ask2 = asyncio.create_task(client.ask_user("Asked while the door is down", timeout=60))
            processes["door"] = spawn("door", service_env(settings))
            await wait_ready(url)
            async with http.stream(
                "GET", "/api/interactions/stream", headers={"Last-Event-ID": add.id}
            ) as resp:
                stream = SSE(resp)
                missed = await stream.next(timeout=15)
                assert missed.event == "interaction.add"
                assert missed.data["question"] == "Asked while the door is down"
                answer = await http.post(
                    f"/api/interactions/{add.data['interaction_id']}/answer", json={"answer": True}
                )
                assert answer.status_code == 200
                done = await stream.until("interaction.answered", add.data["interaction_id"], timeout=15)
                assert int(done.id) > int(missed.id)
                await stream.close()
        assert await asyncio.wait_for(ask, 15) is True
        ask2.cancel()
    finally:
        await client.close()


async def test_answer_survives_a_restart_of_the_resume_service(
    settings: Settings, processes: dict[str, subprocess.Popen[bytes]], store: object, db: object
) -> None:
    """With the resume service killed, an answer is kept in the log and wakes the asker once the
    service is back (durable consumer)."""
    from layby.sdk import connect

    url = f"http://127.0.0.1:{settings.http_port}"
    await wait_ready(url)
    client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
    try:
        ask = asyncio.create_task(client.ask_user("Still there?", timeout=60))
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {OPERATOR}"}) as http:

            async def listed() -> list[dict[str, str]]:
                return (await http.get("/api/interactions")).json()["data"]["items"]  # type: ignore[no-any-return]

            items = await eventually(listed, "the question in the list door", timeout=15)
            processes["resume"].kill()
            processes["resume"].wait()
            resp = await http.post(
                f"/api/interactions/{items[0]['interaction_id']}/answer", json={"answer": "yes"}
            )
            assert resp.status_code == 200
            await asyncio.sleep(0.3)  # a time window on purpose: no wake may arrive while resume is down
            assert not ask.done()
            processes["resume"] = spawn("resume", service_env(settings))
        assert await asyncio.wait_for(ask, 20) == "yes"
    finally:
        await client.close()


def _log_consumers(env: dict[str, str]) -> int:
    """How many consumers read the event log of the `layby up` in ``env`` (an open stream has one),
    read with the admin key its embedded NATS admits."""
    from layby.connection import connect_nats
    from layby.natskeys import service_inbox
    from layby.runtime import read_runtime
    from layby_server.operations.natsauth import ensure_service_seeds
    from layby_server.settings import load_settings

    data = Path(env["LAYBY_DATA_DIR"])
    runtime = read_runtime(data)
    assert runtime is not None, "layby up wrote no runtime file"
    admin = ensure_service_seeds(data / "nats" / "keys")["admin"]
    stream = load_settings({}).names.events_stream

    async def count() -> int:
        nc = await connect_nats(
            runtime.nats_url, name="test", seed=admin, inbox_prefix=service_inbox("admin")
        )
        try:
            return (await nc.jetstream().stream_info(stream)).state.consumer_count
        finally:
            await nc.close()

    return asyncio.run(count())


def spawn_up(env: dict[str, str]) -> subprocess.Popen[str]:
    """`layby up` in the background, its standard output readable line by line."""
    return subprocess.Popen(
        [sys.executable, "-m", "layby.cli", "up"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def start_up(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """Start `layby up`; return it with the token it printed."""
    up = spawn_up(env)
    lines = []
    assert up.stdout is not None
    for line in up.stdout:
        lines.append(line)
        if "Press Ctrl-C" in line:
            break
    token_line = next(ln for ln in lines if "token:" in ln)
    return up, token_line.split("token:")[1].strip()


def stop_up(up: subprocess.Popen[str]) -> None:
    up.send_signal(signal.SIGINT)
    up.wait(60)
    if up.stdout is not None:
        up.stdout.close()


def cli(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "layby.cli", *args], env=env, capture_output=True, text=True, check=check
    )


def up_env(data: Path, port: int, **more: str) -> dict[str, str]:
    """This process's environment without its LAYBY_ variables, for a `layby up` on ``data`` and
    the HTTP ``port`` (``more``: other variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYBY_")}
    env.update(LAYBY_DATA_DIR=str(data), LAYBY_HTTP_PORT=str(port), **more)
    return env


def in_background(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """``python *args`` running beside the test, its output kept for ``communicate``."""
    return subprocess.Popen(
        [sys.executable, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def listed(env: dict[str, str], what: str, **patience: Any) -> list[dict[str, Any]]:
    """The questions `layby interactions list --json` shows, once it shows any."""
    return eventually_sync(  # type: ignore[no-any-return]
        lambda: json.loads(cli(env, "interactions", "list", "--json").stdout)["items"], what, **patience
    )


def kill_and_see_it_restarted(
    up: subprocess.Popen[str],
    victims: Callable[[], list[int]],
    url: str,
    *,
    restarted: str,
    ready: str,
    timeout: float,
) -> None:
    """kill -9 the one process ``victims()`` finds under ``up``: another takes its place within
    ``timeout`` s, the door at ``url`` is ready again and `layby up` is still running (``restarted``,
    ``ready``: what a timeout says was awaited)."""
    [victim] = victims()
    os.kill(victim, signal.SIGKILL)
    eventually_sync(lambda: victims() not in ([], [victim]), restarted, timeout=timeout, interval=0.2)
    eventually_sync(lambda: _ready(url), ready, timeout=90, interval=0.2)
    assert up.poll() is None


def test_layby_up_then_ask_and_answer_from_another_terminal(tmp_path: Path) -> None:
    """The README tour: `layby up`; `layby ask` blocks in one terminal, `layby interactions answer`
    in another wakes it; the CLI stream shows both frames; `layby projections rebuild` works; a
    second `layby up` finds the data (and the token) of the first."""
    env = up_env(tmp_path / "data", free_port(), LAYBY_LOG_LEVEL="warning")
    up, token = start_up(env)
    try:
        assert len(token) >= 40
        # Beside `layby up` the doctor needs no settings, and finds the embedded installation
        # healthy: NATS with keys and sync always, every service, the clocks (docs/operations.md).
        doctor = cli(env, "doctor", "--json", check=False)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        report = json.loads(doctor.stdout)
        assert report["ok"] is True
        found = {c["name"]: c["status"] for c in report["checks"]}
        for name in (
            "nats.authorization",
            "nats.sync",
            "nats.replicas",
            "postgres.migrations",
            "services",
            "clocks",
        ):
            assert found[name] == "ok", report
        before = _log_consumers(env)
        stream = subprocess.Popen(
            [sys.executable, "-m", "layby.cli", "interactions", "stream", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        eventually_sync(  # the stream's start point is taken when it connects
            lambda: _log_consumers(env), "the CLI's stream to connect", until=lambda n: n > before, timeout=30
        )
        ask = in_background(
            env,
            "-m",
            "layby.cli",
            "ask",
            "Ship it?",
            "--format",
            "select",
            "--option",
            "yes",
            "--option",
            "no",
            "--timeout",
            "60",
        )
        items = listed(env, "the question in `layby interactions list`", timeout=60)
        iid = items[0]["interaction_id"]
        assert iid, "the question never appeared"
        assert "Ship it?" in cli(env, "interactions", "list").stdout
        bad = cli(env, "interactions", "answer", iid, "--answer", '"maybe"', check=False)
        assert bad.returncode == 1
        assert "answer must be one of ['yes', 'no']" in bad.stderr
        cli(env, "interactions", "answer", iid, "--answer", '"yes"')
        out, err = ask.communicate(timeout=30)
        assert ask.returncode == 0, err
        assert json.loads(out) == "yes"
        assert stream.stdout is not None
        frames = [json.loads(stream.stdout.readline()) for _ in range(2)]
        assert [f["event"] for f in frames] == ["interaction.add", "interaction.answered"]
        assert frames[1]["data"]["interaction_id"] == iid
        stream.terminate()
        stream.wait(10)
        stream.stdout.close()
        assert "projections rebuilt from 2 events" in cli(env, "projections", "rebuild").stdout
    finally:
        stop_up(up)
    assert up.returncode == 0
    assert not (tmp_path / "data" / "runtime.json").exists()
    again, token_again = start_up(env)
    try:
        assert token_again == token
        assert json.loads(cli(env, "interactions", "list", "--json").stdout)["total"] == 0
    finally:
        stop_up(again)


async def test_services_survive_a_restart_of_the_nats_server(
    settings: Settings, tmp_path: Path, db: object
) -> None:
    """Stop NATS under the five running services and start it again on the same store: the
    services reconnect and the next ask is answered end to end (nothing needs a restart)."""
    from layby.sdk import connect
    from layby_server.operations.embedded import EmbeddedNats

    server = EmbeddedNats(tmp_path / "nats").start()
    own = msgspec.structs.replace(settings, nats_url=server.url)
    env = service_env(own)
    procs = {name: spawn(name, env) for name in SERVICES}
    url = f"http://127.0.0.1:{own.http_port}"
    try:
        await wait_ready(url)
        server.stop()
        await asyncio.sleep(1.0)  # a time window on purpose: the services live through a 1 s outage
        server.start()
        await wait_ready(url)
        client = await connect(nats_url=own.nats_url, token=OPERATOR, settings=own)
        try:
            ask = asyncio.create_task(
                client.ask_user("After the restart?", answer_format="confirm", timeout=60)
            )
            async with httpx.AsyncClient(
                base_url=url, headers={"Authorization": f"Bearer {OPERATOR}"}
            ) as http:

                async def listed() -> list[dict[str, str]]:
                    return (await http.get("/api/interactions")).json()["data"]["items"]  # type: ignore[no-any-return]

                items = await eventually(listed, "the question in the inbox after the restart", timeout=20)
                assert items, "the question never reached the inbox after the restart"
                resp = await http.post(
                    f"/api/interactions/{items[0]['interaction_id']}/answer", json={"answer": True}
                )
                assert resp.status_code == 200
            assert await asyncio.wait_for(ask, 30) is True
        finally:
            await client.close()
        assert all(p.poll() is None for p in procs.values()), "a service died with NATS"
    finally:
        stop_processes(procs)
        server.stop()


def _children(pid: int, name: str) -> list[int]:
    """Direct children of ``pid`` called ``name`` (the embedded servers; not their backends)."""
    import psutil

    return [p.pid for p in psutil.Process(pid).children() if p.name().startswith(name)]


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("server", ["nats-server", "postgres"])
def test_layby_up_restarts_an_embedded_server_killed_under_it(tmp_path: Path, server: str) -> None:
    """kill -9 of embedded NATS (or PostgreSQL) under `layby up`: it is restarted on its own
    port and data, readiness comes back, and a question asked before the crash is still there
    and answerable after it."""
    port = free_port()
    env = up_env(tmp_path / "data", port, LAYBY_LOG_LEVEL="warning")
    url = f"http://127.0.0.1:{port}"
    up, _token = start_up(env)
    try:
        ask = in_background(
            env, "-m", "layby.cli", "ask", "Still there?", "--format", "confirm", "--timeout", "120"
        )
        items = listed(env, "the question to be listed", timeout=60, interval=0.2)
        kill_and_see_it_restarted(
            up,
            lambda: _children(up.pid, server),
            url,
            restarted=f"{server} to be restarted",
            ready="the system to be ready again",
            timeout=60,
        )
        answered = cli(
            env, "interactions", "answer", str(items[0]["interaction_id"]), "--answer", "true", check=False
        )
        assert answered.returncode == 0, answered.stderr
        out, err = ask.communicate(timeout=60)
        assert ask.returncode == 0, err
        assert json.loads(out) is True, (out, err)
    finally:
        stop_up(up)
    assert up.returncode == 0


def test_a_sensitive_answer_is_nowhere_in_plaintext_under_the_data_dir(tmp_path: Path) -> None:
    """`layby up`, a sensitive question answered with a unique value: the asker gets it, and no
    file under the data dir (NATS's streams, PostgreSQL's tables and WAL, logs) holds it."""
    data = tmp_path / "data"
    env = up_env(data, free_port(), LAYBY_LOG_LEVEL="warning")
    canary = "canary-" + os.urandom(12).hex()
    up, _token = start_up(env)
    try:
        ask = in_background(
            env,
            "-c",
            "import asyncio, layby\n"
            "print(asyncio.run(layby.ask_user('PIN?', sensitive=True, timeout=60)).reveal())",
        )
        items = listed(env, "the question to be listed", timeout=60, interval=0.2)
        cli(env, "interactions", "answer", str(items[0]["interaction_id"]), "--answer", json.dumps(canary))
        out, err = ask.communicate(timeout=60)
        assert ask.returncode == 0, err
        assert out.strip() == canary
    finally:
        stop_up(up)
    needle = canary.encode()
    files = [p for p in data.rglob("*") if p.is_file()]
    assert any("jetstream" in str(p) for p in files) and any("postgres" in str(p) for p in files)
    holding = [str(p) for p in files if needle in p.read_bytes()]
    assert holding == []


def test_layby_up_refuses_to_start_beside_a_running_one(tmp_path: Path) -> None:
    """`layby up` whose data dir names another live `layby up` says so and exits 1, starting nothing."""
    data = tmp_path / "data"
    data.mkdir()
    runtime = {
        "url": "http://127.0.0.1:9",
        "nats_url": "nats://x",
        "database_url": "postgresql://x",
        "pid": os.getpid(),
    }
    (data / "runtime.json").write_bytes(msgspec.json.encode(runtime))
    result = cli(up_env(data, free_port()), "up", check=False)
    assert result.returncode == 1
    assert result.stderr == f"layby is already running (pid {os.getpid()}) at http://127.0.0.1:9\n"
    assert sorted(p.name for p in data.iterdir()) == ["runtime.json"]


def test_layby_up_refuses_a_port_in_use(tmp_path: Path) -> None:
    """`layby up` on a taken HTTP port names it and the variable to change, exits 1, starting nothing."""
    data = tmp_path / "data"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli(up_env(data, port), "up", check=False)
    assert result.returncode == 1
    assert result.stderr == (
        f"error: 127.0.0.1:{port} is already in use; set LAYBY_HTTP_PORT to a free port\n"
    )
    assert list(data.iterdir()) == []


def _service(pid: int, name: str) -> list[int]:
    """Live direct children of ``pid`` running ``layby serve <name>`` (a killed one not yet reaped
    is a zombie without a command line)."""
    import psutil

    found = []
    for child in psutil.Process(pid).children():
        with contextlib.suppress(psutil.ZombieProcess, psutil.NoSuchProcess):
            if child.cmdline()[-2:] == ["serve", name]:
                found.append(child.pid)
    return found


def test_layby_up_restarts_a_service_killed_under_it(tmp_path: Path) -> None:
    """kill -9 of a service under `layby up`: it is started again and the door becomes ready again."""
    port = free_port()
    up, _token = start_up(up_env(tmp_path / "data", port, LAYBY_LOG_LEVEL="warning"))
    try:
        kill_and_see_it_restarted(
            up,
            lambda: _service(up.pid, "door"),
            f"http://127.0.0.1:{port}",
            restarted="the door to be started again",
            ready="the door to be ready again",
            timeout=90,
        )
    finally:
        stop_up(up)
    assert up.returncode == 0


def _free_run(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    for _ in range(50):
        base = free_port()
        if base + count > 65535:
            continue
        try:
            with contextlib.ExitStack() as held:
                for port in range(base, base + count):
                    sock = held.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {count} consecutive free ports")


def test_layby_up_serves_every_process_s_metrics_on_its_own_port(tmp_path: Path) -> None:
    """docs/observability.md#under-layby-up: with LAYBY_HEALTH_PORT set, each process of `layby up`
    serves /metrics on its own port, from that one up, in the order it prints them."""
    from layby_server.operations.up import SERVICES

    base = _free_run(len(SERVICES))
    env = up_env(tmp_path / "data", free_port(), LAYBY_LOG_LEVEL="warning", LAYBY_HEALTH_PORT=str(base))
    up = spawn_up(env)
    try:
        printed = []
        assert up.stdout is not None
        for line in up.stdout:
            printed.append(line.strip())
            if "Press Ctrl-C" in line:
                break
        shown = dict(
            line.removeprefix("metrics ").split(": ", 1) for line in printed if line.startswith("metrics ")
        )
        assert shown == {name: f"http://127.0.0.1:{base + i}/metrics" for i, name in enumerate(SERVICES)}
        for name, url in shown.items():
            resp = eventually_sync(lambda url=url: httpx.get(url, timeout=5), f"{name}'s metrics", timeout=30)
            assert resp.status_code == 200, (name, resp.text[:200])
            assert "# TYPE layby_" in resp.text, name
    finally:
        stop_up(up)
