"""Composition root of the door service: ``layby serve door``."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from layby_domain.clock import Clock
from layby_server.observability.metrics import ServiceMetrics
from layby_server.service import run_main
from layby_server.settings import Settings, load_settings
from layby_services.door.access import AccessMiddleware
from layby_services.door.app import create_app
from layby_services.door.fast import FastAnswers
from layby_services.door.paths import EncodedSlashMiddleware
from layby_services.door.protocol import Limits, protocol_with


def server_config(
    settings: Settings,
    *,
    clock: Clock | None = None,
    metrics: ServiceMetrics | None = None,
    fast_answers: bool = True,
) -> uvicorn.Config:
    """The door's HTTP server: our connection limits (protocol.py), no banner, our own access log
    (access.py) instead of the server's, and the metrics the health port serves. ``fast_answers``
    off routes the answer door through the application too (fast.py; its tests compare the two)."""
    limits = Limits(
        header_timeout=settings.http_header_timeout_seconds,
        max_headers=settings.http_max_headers,
        max_header_bytes=settings.http_max_header_bytes,
        max_query_bytes=settings.max_body_bytes,
    )
    metrics = metrics or ServiceMetrics()
    application = create_app(settings, clock=clock, metrics=metrics)
    # The answer door's fast path sees the path as routing would (encoded slashes kept).
    fast = FastAnswers(application, application, enabled=fast_answers and not settings.rate_limits)
    app = EncodedSlashMiddleware(fast)  # before routing
    return uvicorn.Config(
        AccessMiddleware(app, metrics, access_log=settings.access_log),
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing reads the client address; skip the per-request middleware
        lifespan="on",
        server_header=False,  # no banner: the door does not say what runs it
        http=protocol_with(limits),
        timeout_graceful_shutdown=3,
    )


def shared_socket(settings: Settings) -> socket.socket:
    """The door's listening socket bound with SO_REUSEPORT, so the replicas ``layby up
    --replicas`` runs on one host share LAYBY_HTTP_PORT (the kernel spreads connections)."""
    family = socket.AF_INET6 if ":" in settings.http_host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((settings.http_host, settings.http_port))
    sock.set_inheritable(True)
    return sock


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    server = uvicorn.Server(server_config(settings, clock=clock))
    sockets = [shared_socket(settings)] if settings.http_reuse_port else None
    task = asyncio.create_task(server.serve(sockets=sockets))
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    await task
    stopper.cancel()


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
