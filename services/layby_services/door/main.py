"""Composition root of the door service: ``layby serve door``."""

from __future__ import annotations

import asyncio

import uvicorn

from layby_domain.clock import Clock
from layby_server.service import run_main
from layby_server.settings import Settings, load_settings
from layby_services.door.app import create_app


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    config = uvicorn.Config(
        create_app(settings, clock=clock),
        host=settings.http_host,
        port=settings.http_port,
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # nothing reads the client address; skip the per-request middleware
        lifespan="on",
        server_header=False,  # no banner: the door does not say what runs it
        http="httptools" if _has_httptools() else "h11",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    await task
    stopper.cancel()


def _has_httptools() -> bool:
    try:
        import httptools  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
