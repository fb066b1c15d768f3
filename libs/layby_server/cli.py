"""The server's commands of the ``layby`` CLI: ``up``, ``serve`` and ``projections rebuild``.

The SDK's CLI finds them through the ``layby.cli`` entry-point group, so an SDK-only install has
the client commands only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
from typing import Any

from layby.settings import ClientSettings
from layby_server.settings import load_settings

SERVICES = ("ask", "door", "delivery", "resume", "sweeper")


def cmd_serve(_client: ClientSettings, args: argparse.Namespace) -> int:
    module = importlib.import_module(f"layby_services.{args.service}.main")
    module.main()
    return 0


def cmd_up(_client: ClientSettings, _args: argparse.Namespace) -> int:
    from layby_server.up import up

    return up(load_settings())


def cmd_rebuild(_client: ClientSettings, _args: argparse.Namespace) -> int:
    from layby_server.projector import rebuild
    from layby_server.service import open_resources

    settings = load_settings()

    async def run() -> int:
        async with open_resources(settings, name="rebuild") as res:
            assert res.pool is not None
            return await rebuild(res.pool, res.store)

    count = asyncio.run(run())
    print(f"projections rebuilt from {count} events")
    return 0


def register(sub: Any) -> dict[tuple[str, str | None], Any]:
    """Add the server's sub-commands to the CLI's parser; return their handlers."""
    sub.add_parser("up", help="run the whole system (embedded NATS and PostgreSQL when no URLs are set)")
    serve = sub.add_parser("serve", help="run one service")
    serve.add_argument("service", choices=SERVICES)
    proj = sub.add_parser("projections", help="maintain the PostgreSQL read models").add_subparsers(
        dest="action", required=True
    )
    proj.add_parser("rebuild", help="drop the projections and replay them from the event log")
    return {("up", None): cmd_up, ("serve", None): cmd_serve, ("projections", "rebuild"): cmd_rebuild}
