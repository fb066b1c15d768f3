"""Shared fixtures: real NATS + PostgreSQL, per-test namespaces, and a running system."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
import uvicorn

from layby.connection import connect_nats
from layby.natskeys import client_inbox, client_seed, service_inbox
from layby.sdk import Client, connect
from layby_domain.clock import Clock, SystemClock
from layby_server.operations.embedded import EmbeddedNats, free_port
from layby_server.service import provision_patiently
from layby_server.settings import Settings, load_settings
from layby_server.store.eventstore import EventStore
from layby_server.store.sealing import Sealer, new_key
from tests.channel_plugins import BRIDGE_SECRET, Bridge, channels_json
from tests.infra import database_url, delete_streams, nats_url

OPERATOR = "op-token-0123456789abcdef"
ALICE = "alice-token-0123456789abcd"
BOB = "bob-token-0123456789abcdef"
SECRETS_KEY = new_key()
TOKENS = f"{OPERATOR}:ops:operator,{ALICE}:alice:user,{BOB}:bob:user"
TLS = ssl.create_default_context()
"""One TLS context for the test clients of the doors: httpx builds a new one for each client
otherwise (about 20 ms of CPU reading the CA bundle), and the doors here are plain HTTP."""


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pyproject's ``addopts`` name pytest-xdist's ``-n``; without xdist (``-p no:xdist``, or an
    environment without it) it is accepted and means nothing, and the suite runs in this process
    (docs/engineering.md#testing)."""
    if pluginmanager.has_plugin("xdist"):
        return
    group = parser.getgroup("xdist", "distributed testing (pytest-xdist is not loaded: ignored)")
    # ``_addoption``: a lowercase short option is reserved to pytest's own plugins, as xdist is.
    group._addoption("-n", "--numprocesses", dest="numprocesses", default=None, help="ignored")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
    """A fixture whose setup is cancelled (or exits) fails its one test, not every later test of
    the worker.

    pytest records a failed setup only for an ``Exception``: an ``asyncio.CancelledError`` or a
    ``SystemExit`` (``BaseException``s) left the fixture unrecorded with its teardown still
    registered, and every later test asking for that fixture then failed with a bare
    ``AssertionError`` in pytest's own fixture code. It is recorded here as the failure it is."""
    try:
        return (yield)
    except (asyncio.CancelledError, SystemExit) as cancelled:
        error = RuntimeError(f"the setup of fixture {fixturedef.argname!r} ended with {cancelled!r}")
        error.__cause__ = cancelled
        key = getattr(request, "param", None)
        fixturedef.cached_result = (None, key, (error, cancelled.__traceback__))
        raise error from cancelled


@pytest.fixture(autouse=True)
def _sdk_events_logged_as_the_sdk_logs_them() -> Iterator[None]:
    """A test that runs the ``layby`` command promotes some SDK events to info for the whole
    process (``layby.logs.promote``); the next test starts from the SDK's own levels."""
    yield
    from layby import logs

    logs.promote(frozenset())


@pytest.fixture(scope="session")
def nats_server() -> Iterator[tuple[str, EmbeddedNats | None]]:
    with nats_url() as found:
        yield found


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    with database_url() as url:
        yield url


@pytest.fixture
def settings(
    request: pytest.FixtureRequest, nats_server: tuple[str, EmbeddedNats | None], pg_url: str
) -> Settings:
    """Per-test namespace and schema; ``@pytest.mark.settings(field=value)`` overrides fields."""
    ns = "t" + uuid.uuid4().hex[:10]
    marker = request.node.get_closest_marker("settings")
    overrides = dict(marker.kwargs) if marker else {}
    return load_settings(
        {},
        nats_url=nats_server[0],
        database_url=pg_url,
        namespace=ns,
        db_schema=ns,
        api_tokens=TOKENS,
        http_port=free_port(),
        sweep_interval_seconds=0.1,
        secrets_key=SECRETS_KEY,
        **overrides,
    )


@pytest.fixture
async def store(settings: Settings) -> AsyncIterator[EventStore]:
    assert settings.nats_url
    nc = await connect_nats(settings.nats_url, name="test")
    es = EventStore(nc, settings.names, sealer=Sealer(SECRETS_KEY))
    # As the services do: a 5xx from a busy server (one CI run saw "error creating store for
    # stream") is tried again, a refusal is raised at once.
    await provision_patiently(es)
    yield es
    await delete_streams(es)
    await nc.close()


@pytest.fixture
async def db(settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    from layby_server.projection.db import create_pool

    assert settings.database_url
    pool = await create_pool(settings.database_url, settings.db_schema)
    yield pool
    async with pool.acquire() as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.db_schema}" CASCADE')
    await pool.close()


@dataclass
class System:
    """All five services running in this event loop against real NATS and PostgreSQL."""

    settings: Settings
    url: str
    tasks: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    stops: dict[str, asyncio.Event] = field(default_factory=dict)
    clients: list[Client] = field(default_factory=list)

    def http(self, token: str | None = OPERATOR) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10, verify=TLS)

    async def sdk(self, token: str = OPERATOR, *, public_base_url: str | None = None) -> Client:
        """An SDK client (closed with the system); ``public_base_url`` replaces the settings' own."""
        settings = self.settings
        if public_base_url is not None:
            settings = msgspec.structs.replace(settings, public_base_url=public_base_url)
        client = await connect(nats_url=settings.nats_url, token=token, settings=settings)
        self.clients.append(client)
        return client

    runners: dict[str, Any] = field(default_factory=dict)

    async def stop_service(self, name: str) -> None:
        self.stops[name].set()
        await asyncio.wait_for(self.tasks[name], timeout=15)

    async def start_service(self, name: str) -> None:
        """Start a stopped service again, as a restart would (the door: until it is ready)."""
        self.stops[name] = asyncio.Event()
        self.tasks[name] = asyncio.create_task(self.runners[name](self.stops[name]), name=name)
        if name == "door":
            from tests.helpers import eventually

            async with httpx.AsyncClient(verify=TLS) as http:

                async def ready() -> bool:
                    return (await http.get(f"{self.url}/readyz")).status_code == 200

                await eventually(
                    ready, "the door to be ready again", timeout=15, interval=0.05, retry=httpx.HTTPError
                )


async def _serve_door(settings: Settings, stop: asyncio.Event, clock: Clock) -> None:
    from layby_services.door.main import server_config

    config = server_config(settings, clock=clock)
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)

    async def serve() -> None:
        # uvicorn exits the process when it cannot bind; here that is this door's failure (its
        # start-up reports it), not a SystemExit escaping the test's event loop.
        try:
            await server.serve()
        except SystemExit as exc:
            raise RuntimeError(
                f"the door could not start on port {settings.http_port} (exit {exc.code})"
            ) from None

    task = asyncio.create_task(serve())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if task.done():
        task.result()  # the door stopped by itself: its failure is this task's
    server.should_exit = True
    await task


async def start_system(
    settings: Settings,
    clock: Clock | None = None,
    *,
    seeds: dict[str, str] | None = None,
    health_ports: dict[str, int] | None = None,
) -> System:
    """``seeds``: each service's NATS key, for a server that enforces authorization.
    ``health_ports``: each service's LAYBY_HEALTH_PORT (they share one process, so one port each)."""
    from layby_services.ask.main import serve as ask
    from layby_services.delivery.main import serve as delivery
    from layby_services.resume.main import serve as resume
    from layby_services.sweeper.main import serve as sweeper
    from tests.helpers import eventually

    clock = clock or SystemClock()
    system = System(settings=settings, url=f"http://127.0.0.1:{settings.http_port}")

    def own(role: str) -> Settings:
        mine = msgspec.structs.replace(settings, nats_seed=seeds[role]) if seeds else settings
        if health_ports:
            mine = msgspec.structs.replace(mine, health_port=health_ports[role])
        return mine

    runners = {
        "ask": lambda s: ask(own("ask"), s, clock=clock),
        "resume": lambda s: resume(own("resume"), s, clock=clock),
        "delivery": lambda s: delivery(own("delivery"), s, clock=clock),
        "sweeper": lambda s: sweeper(own("sweeper"), s, clock=clock),
        "door": lambda s: _serve_door(own("door"), s, clock),
    }
    system.runners = runners
    for name, run in runners.items():
        system.stops[name] = asyncio.Event()
        system.tasks[name] = asyncio.create_task(run(system.stops[name]), name=name)
    try:
        async with httpx.AsyncClient(verify=TLS) as http:

            async def ready() -> bool:
                for name, task in system.tasks.items():
                    if task.done():
                        raise RuntimeError(f"{name} stopped during start-up: {_ending(task)}")
                return (await http.get(f"{system.url}/readyz")).status_code == 200

            await eventually(ready, "the door to be ready", timeout=15, interval=0.05, retry=httpx.HTTPError)
        # The consumers of resume/delivery exist once their services logged ready; wait for them.
        await _wait_consumers(settings, seeds)
    except BaseException:
        # A start that fails leaves no service running into the next test.
        with contextlib.suppress(Exception):
            await stop_system(system)
        raise
    return system


def _ending(task: asyncio.Task[Any]) -> str:
    """How a service's task ended, for a start-up that lost it."""
    if task.cancelled():
        return "cancelled"
    exc = task.exception()
    return repr(exc) if exc is not None else "returned"


async def _wait_consumers(settings: Settings, seeds: dict[str, str] | None = None) -> None:
    """Under NATS authorization the consumers are read with the admin key and the ask service is
    asked as the operator token (the only keys allowed to do either)."""
    from tests.helpers import eventually

    assert settings.nats_url
    nc = await connect_nats(
        settings.nats_url,
        name="test-wait",
        seed=seeds["admin"] if seeds else None,
        inbox_prefix=service_inbox("admin") if seeds else None,
    )
    asker = nc
    if seeds:
        asker = await connect_nats(
            settings.nats_url,
            name="test-wait",
            seed=client_seed(OPERATOR),
            inbox_prefix=client_inbox(OPERATOR),
        )
    try:
        js = nc.jetstream()
        for role in ("resume", "delivery", "delivery-replies", "projector"):
            durable = settings.names.durable(role)
            await eventually(
                functools.partial(js.consumer_info, settings.names.events_stream, durable),
                f"the {role} consumer {durable} to exist",
                interval=0.05,
            )
        # The ask service subscribes to its commands once its resources are open: wait until it
        # answers (a malformed command gets a refusal), so no test meets "no responders".
        await eventually(
            lambda: asker.request(settings.names.cmd_ask, b"{}", timeout=1),
            "the ask service to answer its commands",
            timeout=20,
            interval=0.05,
        )
    finally:
        await nc.close()
        if asker is not nc:
            await asker.close()


async def stop_system(system: System) -> None:
    for client in system.clients:
        with contextlib.suppress(Exception):
            await client.close()
    for stop in system.stops.values():
        stop.set()
    for name, task in system.tasks.items():
        if not task.done():
            try:
                await asyncio.wait_for(task, timeout=15)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        elif not task.cancelled() and task.exception() is not None:
            raise RuntimeError(f"service {name} crashed") from task.exception()


@pytest.fixture
async def system(settings: Settings, store: EventStore, db: asyncpg.Pool) -> AsyncIterator[System]:
    sys_ = await start_system(settings)
    try:
        yield sys_
    finally:
        await stop_system(sys_)


@pytest.fixture
async def client(request: pytest.FixtureRequest) -> Client:
    """The operator's SDK client of the system the test runs: ``chan`` when the test uses it,
    else ``system``. Its public base URL is the door's, so external questions get callback links."""
    running: System = request.getfixturevalue("chan" if "chan" in request.fixturenames else "system")
    return await running.sdk(public_base_url=running.url)


@pytest.fixture
async def bridge() -> AsyncIterator[Bridge]:
    b = Bridge()
    server = await asyncio.start_server(b.handle, "127.0.0.1", 0)
    b.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/layby"
    yield b
    server.close()
    await server.wait_closed()


@pytest.fixture
async def chan(
    settings: Settings, store: EventStore, db: asyncpg.Pool, bridge: Bridge
) -> AsyncIterator[System]:
    configured = msgspec.structs.replace(
        settings,
        channels=channels_json(bridge.url),
        public_base_url=f"http://127.0.0.1:{settings.http_port}",
        webhook_secrets=f"bridge:{BRIDGE_SECRET}",
        delivery_backoff_seconds=0.02,
    )
    system = await start_system(configured)
    try:
        yield system
    finally:
        await stop_system(system)
