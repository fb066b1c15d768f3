"""The sweeper: expires async parks and prunes abandoned sync questions. ``layby serve sweeper``.

Async parks are expired within ``LAYBY_EXPIRY_POLL_SECONDS`` of their ``expiry_at``
(services/sweeper/expiry.py).

A sync waiter prunes its own question when its budget runs out. When the waiter died (a
SIGKILL, a lost pod) nobody would, so the sweeper appends ``interaction.removed`` once the
deadline plus ``INTERACTIONS_BLOCKING_GRACE_SECONDS`` has passed. The append expects the
Asked event's sequence, so it loses cleanly to an answer and replicas never double-prune.

Once a minute, ended rows past their retention leave the read models (retention.py).
"""

from __future__ import annotations

import asyncio

import asyncpg

from layby_contracts.errors import Transient
from layby_domain.clock import Clock
from layby_server.consumer import pause
from layby_server.gauges import ReadModelGauges
from layby_server.jqrun import LazyJq
from layby_server.logs import get_logger
from layby_server.parked import Entries
from layby_server.prune import prune_abandoned
from layby_server.service import open_resources, run_main
from layby_server.settings import Settings, load_settings
from layby_server.visits import Visitor
from layby_server.workers import WorkerRegistry
from layby_services.sweeper.expiry import EXPIRY_BATCH, expire_due
from layby_services.sweeper.parked import drop_waiting_outcomes, expire_caller_asks
from layby_services.sweeper.retention import Retention, trim_read_models
from layby_services.sweeper.schedules import Schedules

log = get_logger("layby.sweeper")
RETENTION_PASS_SECONDS = 60.0


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    async with open_resources(settings, name="sweeper", clock=clock) as res:
        assert res.pool is not None
        log.info(
            "sweeper.ready",
            interval=settings.sweep_interval_seconds,
            expiry_poll=settings.expiry_poll_seconds,
        )
        pool = res.pool
        clock = res.clock

        async def prune_loop() -> None:
            while not stop.is_set():
                try:
                    await prune_abandoned(
                        pool, res.store, clock, grace_seconds=settings.blocking_grace_seconds
                    )
                except (Transient, asyncpg.PostgresError, OSError) as exc:
                    log.warning("sweeper.pass_failed", error=repr(exc))
                await pause(stop, settings.sweep_interval_seconds)

        async def expiry_loop() -> None:
            while not stop.is_set():
                try:
                    while await expire_due(pool, res.store, clock) >= EXPIRY_BATCH and not stop.is_set():
                        pass  # a full batch: look again at once
                except (Transient, asyncpg.PostgresError, OSError) as exc:
                    log.warning("sweeper.expiry_failed", error=repr(exc))
                await pause(stop, settings.expiry_poll_seconds)

        entries = Entries(res.store, clock.now)

        async def parked_loop() -> None:
            """Caller asks at their deadline, and waiting outcomes past their retention."""
            while not stop.is_set():
                try:
                    await expire_caller_asks(pool, res.store, entries, clock)
                    await drop_waiting_outcomes(
                        pool, res.store, entries, clock, settings.waiting_outcome_retention_seconds
                    )
                except (Transient, asyncpg.PostgresError, OSError) as exc:
                    log.warning("sweeper.parked_failed", error=repr(exc))
                await pause(stop, settings.expiry_poll_seconds)

        retention = Retention(
            resolved_seconds=settings.resolved_retention_seconds,
            runs_seconds=settings.run_retention_seconds,
            gone_entries_seconds=settings.gone_entry_retention_seconds,
        )

        async def retention_loop() -> None:
            """Ended rows past their retention leave the read models (the log keeps them)."""
            while not stop.is_set():
                try:
                    await trim_read_models(pool, clock, retention)
                except (asyncpg.PostgresError, OSError) as exc:
                    log.warning("sweeper.trim_failed", error=repr(exc))
                # Retention is counted in days: once a sweep interval (at least a minute) is plenty.
                await pause(stop, max(settings.sweep_interval_seconds, RETENTION_PASS_SECONDS))

        programs = LazyJq(processes=1, timeout_seconds=settings.jq_timeout_seconds)
        visitor = Visitor(
            res.store,
            entries,
            clock.now,
            programs=programs,
            extras_of=WorkerRegistry(pool).extras,
        )
        schedules = Schedules(pool, res.store, visitor, clock)

        async def schedule_loop() -> None:
            """Schedule doors, each tick fired by exactly one replica."""
            while not stop.is_set():
                try:
                    await schedules.run_once()
                except (Transient, asyncpg.PostgresError, OSError) as exc:
                    log.warning("sweeper.schedules_failed", error=repr(exc))
                await pause(stop, settings.expiry_poll_seconds)

        # One place counts open questions and parked runs, on an interval of the service's clock.
        gauges = ReadModelGauges(pool, res.metrics.registry, clock, settings.metrics_interval_seconds)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(gauges.run(stop))
                tg.create_task(prune_loop())
                tg.create_task(expiry_loop())
                tg.create_task(parked_loop())
                tg.create_task(schedule_loop())
                tg.create_task(retention_loop())
        finally:
            await programs.aclose()


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
