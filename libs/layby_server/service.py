"""What every service's composition root shares: connect, provision, run, drain on a signal."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import asyncpg
import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from layby.connection import connect_nats
from layby.natskeys import service_inbox
from layby_contracts.commands import PROTOCOL
from layby_contracts.doctor import ServiceSeen
from layby_contracts.errors import Permanent, Transient
from layby_contracts.http import ReadyChecks
from layby_domain.clock import Clock, SystemClock
from layby_server.observability import tracing
from layby_server.observability.health import serve_health
from layby_server.observability.logs import configure_logging, get_logger
from layby_server.observability.metrics import ServiceMetrics
from layby_server.operations.natsauth import SERVICE_ROLES
from layby_server.operations.runtime import resolve_seed, resolve_urls
from layby_server.projection.db import open_pool
from layby_server.settings import Settings
from layby_server.store.eventstore import TRIED_AGAIN, EventStore, wait_for_jetstream
from layby_server.store.limits import ownership
from layby_server.store.sealing import Sealer

log = get_logger("layby_server.service")
_SERVED = ("door", "ask", "delivery", "resume", "sweeper")
"""Services that serve the health port (the door for its metrics: its probes answer on its own
port too). A one-off command run inside a service's pod (``layby projections rebuild``) must not
take the service's port."""
_opening: set[asyncio.Future[None]] = set()
"""Service tasks still connecting to NATS or PostgreSQL (a stop signal cancels them)."""


@dataclass
class Resources:
    settings: Settings
    nc: NATS
    store: EventStore
    pool: asyncpg.Pool | None
    clock: Clock
    metrics: ServiceMetrics


@contextlib.asynccontextmanager
async def open_resources(
    settings: Settings,
    *,
    name: str,
    clock: Clock | None = None,
    database: bool = True,
    pool_size: int = 10,
    secrets: bool = False,
    metrics: ServiceMetrics | None = None,
) -> AsyncIterator[Resources]:
    """Open the NATS connection, the event store and (optionally) the pool, in one place.
    ``pool_size``: the most PostgreSQL connections the service's pool opens (each is a server
    process of its own, about 13 MB while idle; docs/performance.md#what-a-process-loads).
    ``secrets``: this service keeps or reads sensitive answers, so it needs LAYBY_SECRETS_KEY.
    ``metrics``: the service's registry, when the caller counts into it before this opens (the
    door's requests); the store counts every event it appends into it, and the health port
    serves it."""
    nats_url, db_url = resolve_urls(settings)
    if nats_url is None:
        raise Permanent("LAYBY_NATS_URL is not set and no `layby up` runtime file was found")
    if database and db_url is None:
        raise Permanent("LAYBY_DATABASE_URL is not set and no `layby up` runtime file was found")
    if secrets and not settings.secrets_key:
        raise Permanent(
            f"LAYBY_SECRETS_KEY is not set: the {name} service keeps sensitive answers only sealed "
            "(make a key with `layby secrets-key`; docs/security.md#sensitive-answers-at-rest)"
        )
    if settings.tracing:
        # One tracer provider per process (the first service opened names it); off: nothing at all.
        tracing.configure(f"layby-{name}", settings.traces_exporter)
    me = asyncio.current_task()
    if me is not None:
        _opening.add(me)  # a stop signal while connecting cancels the wait (run_main)
    try:
        role = name if name in SERVICE_ROLES else "admin"
        nc = await connect_nats(
            nats_url,
            name=f"layby-{name}",
            seed=resolve_seed(settings, role),
            inbox_prefix=service_inbox(role),
            ca_file=settings.nats_ca_file,
        )
    except BaseException:
        _opening.discard(me)
        raise
    pool: asyncpg.Pool | None = None
    try:
        try:
            await wait_for_jetstream(nc)
            store = EventStore(
                nc,
                settings.names,
                replicas=settings.stream_replicas,
                idle_ttl_seconds=settings.idle_ttl_seconds,
                media_retention_seconds=settings.media_retention_seconds,
                events_max_age_seconds=settings.events_max_age_seconds,
                events_max_bytes=settings.events_max_bytes,
                tickets_max_age_seconds=settings.tickets_max_age_seconds,
                owns=ownership(settings.explicit),
                sealer=Sealer(settings.secrets_key) if settings.secrets_key else None,
                feed_max=settings.notifications_feed_max,
            )
            await provision_patiently(store)
            if database:
                assert db_url is not None
                pool = await open_pool(db_url, settings.db_schema, max_size=pool_size)
        finally:
            _opening.discard(me)
        res = Resources(settings, nc, store, pool, clock or SystemClock(), metrics or ServiceMetrics())
        store.on_appended = res.metrics.appended
        if name in _SERVED:
            await answer_pings(nc, settings, name)
        if settings.health_port is None or name not in _SERVED:
            yield res
        else:
            checks = functools.partial(_checks, res)
            async with serve_health(settings.http_host, settings.health_port, checks, res.metrics.render):
                yield res
    finally:
        if pool is not None:
            await pool.close()
        try:
            await asyncio.wait_for(nc.drain(), timeout=3)
        except Exception:  # noqa: BLE001 - a pull subscription can stall drain; close regardless
            with contextlib.suppress(Exception):
                await nc.close()


async def answer_pings(nc: NATS, settings: Settings, name: str) -> None:
    """Answer ``layby doctor``'s ping with who this process is and what its clock says
    (docs/operations.md#layby-doctor). The wall clock, not the service's injectable one: the check
    is about the machine's clock."""
    instance = f"{socket.gethostname()}:{os.getpid()}"

    async def pong(msg: Msg) -> None:
        if msg.reply:
            seen = ServiceSeen(service=name, instance=instance, clock=time.time(), protocol=PROTOCOL)
            await nc.publish(msg.reply, msgspec.json.encode(seen))

    await nc.subscribe(settings.names.doctor_ping, cb=pong)


_PROVISION_RETRY = (Transient, nats.errors.ConnectionClosedError, *TRIED_AGAIN)


async def provision_patiently(store: EventStore, *, pause_max: float = 2.0) -> None:
    """Provision the streams, trying again while JetStream cannot answer yet: a cluster that is
    starting has no meta leader for a few seconds, and many replicas provisioning at once can
    outlast a request's timeout (docs/reliability.md#starting-on-a-cluster). A refusal that
    waiting cannot heal (a log a newer build wrote, a bad configuration) is raised at once."""
    pause = 0.2
    while True:
        try:
            await store.provision()
            return
        except _PROVISION_RETRY as exc:
            failure: Exception = exc
        except nats.js.errors.APIError as exc:
            if (exc.code or 0) < 500:
                raise
            failure = exc
        log.warning("jetstream.provision_retry", error=f"{type(failure).__name__}: {failure}", pause=pause)
        await asyncio.sleep(pause)
        pause = min(pause * 2, pause_max)


async def _checks(res: Resources) -> ReadyChecks:
    """What readiness asks: JetStream answers, and PostgreSQL does when the service uses it."""
    nats = postgres = False
    try:
        await res.store.bounds()
        nats = True
    except Exception:  # noqa: BLE001, S110 - readiness reports the failure instead of raising it
        pass
    try:
        postgres = res.pool is None or await res.pool.fetchval("SELECT 1") == 1
    except Exception:  # noqa: BLE001, S110
        pass
    return ReadyChecks(nats=nats, postgres=postgres)


def run_main(main: Callable[[Settings, asyncio.Event], Awaitable[None]], settings: Settings) -> None:
    """Run a service until SIGINT/SIGTERM; a crashed task exits non-zero (Kubernetes restarts it).

    A signal stops a running service (it drains) and a service still connecting at once."""
    configure_logging(settings.log_format, settings.log_level)

    async def _runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(main(settings, stop))

        def _signalled() -> None:
            stop.set()
            for opening in list(_opening):  # still connecting (the service's task or the door's lifespan)
                opening.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, _signalled)
        try:
            await task
        except asyncio.CancelledError:
            if not stop.is_set():
                raise
            log.info("service.stopped_while_connecting")

    if sys.platform != "win32":
        import uvloop  # the services spend most of their time in the event loop and sockets

        uvloop.run(_runner())
    else:
        asyncio.run(_runner())
