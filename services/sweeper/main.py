"""The sweeper: prunes abandoned sync questions past their deadline. ``layby serve sweeper``.

A sync waiter prunes its own question when its budget runs out. When the waiter died (a
SIGKILL, a lost pod) nobody would, so the sweeper appends ``interaction.removed`` once the
deadline plus ``INTERACTIONS_BLOCKING_GRACE_SECONDS`` has passed. The append expects the
Asked event's sequence, so it loses cleanly to an answer and replicas never double-prune.
"""

from __future__ import annotations

import asyncio

import asyncpg

from layby.clock import Clock
from layby.errors import Transient
from layby.logs import get_logger
from layby.prune import prune_abandoned
from layby.service import open_resources, run_main
from layby.settings import Settings, load_settings

log = get_logger("layby.sweeper")


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    async with open_resources(settings, name="sweeper", clock=clock) as res:
        assert res.pool is not None
        log.info("sweeper.ready", interval=settings.sweep_interval_seconds)
        while not stop.is_set():
            try:
                await prune_abandoned(
                    res.pool, res.store, res.clock, grace_seconds=settings.blocking_grace_seconds
                )
            except (Transient, asyncpg.PostgresError, OSError) as exc:
                log.warning("sweeper.pass_failed", error=repr(exc))
            try:
                await asyncio.wait_for(stop.wait(), timeout=settings.sweep_interval_seconds)
            except TimeoutError:
                pass


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
