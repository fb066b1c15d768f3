"""The sweeper: expires async parks, prunes abandoned sync questions, and takes routed questions'
escalations and reminders when due (services/sweeper/routing.py). ``layby serve sweeper``.

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
from collections.abc import Awaitable, Callable, Coroutine

import asyncpg

from layby_contracts.errors import Transient
from layby_domain.clock import Clock
from layby_server.observability.gauges import ReadModelGauges
from layby_server.observability.logs import get_logger
from layby_server.projection.workers import WorkerRegistry
from layby_server.service import open_resources, run_main
from layby_server.settings import Settings, load_settings
from layby_server.store.consumer import every
from layby_server.write.jqrun import LazyJq
from layby_server.write.parked import Entries
from layby_server.write.prune import prune_abandoned
from layby_server.write.visits import Visitor
from layby_services.sweeper.expiry import EXPIRY_BATCH, expire_due
from layby_services.sweeper.parked import drop_waiting_outcomes, expire_caller_asks
from layby_services.sweeper.retention import Retention, trim_read_models
from layby_services.sweeper.routing import ROUTE_BATCH, route_due
from layby_services.sweeper.schedules import Schedules

log = get_logger("layby.sweeper")
RETENTION_PASS_SECONDS = 60.0
SWEEPER_CONNECTIONS = 1
"""The sweeper's loops are periodic background work of short statements in batches: they take
turns on one PostgreSQL connection instead of each keeping an idle server process of its own
(docs/performance.md#what-a-process-loads)."""


async def serve(settings: Settings, stop: asyncio.Event, *, clock: Clock | None = None) -> None:
    async with open_resources(settings, name="sweeper", clock=clock, pool_size=SWEEPER_CONNECTIONS) as res:
        assert res.pool is not None
        log.info(
            "sweeper.ready",
            interval=settings.sweep_interval_seconds,
            expiry_poll=settings.expiry_poll_seconds,
        )
        pool = res.pool
        clock = res.clock

        def loop(
            seconds: float,
            one_pass: Callable[[], Awaitable[object]],
            failed: str,
            errors: tuple[type[BaseException], ...] = (Transient, asyncpg.PostgresError, OSError),
        ) -> Coroutine[None, None, None]:
            """A pass every ``seconds``; a failed pass is logged as ``failed``, the next tries again."""
            return every(
                stop,
                seconds,
                one_pass,
                failed=lambda exc: log.warning(failed, error=repr(exc)),
                errors=errors,
            )

        expiry_poll = settings.expiry_poll_seconds

        async def prune() -> None:
            await prune_abandoned(pool, res.store, clock, grace_seconds=settings.blocking_grace_seconds)

        async def expire() -> None:
            while await expire_due(pool, res.store, clock) >= EXPIRY_BATCH and not stop.is_set():
                pass  # a full batch: look again at once

        async def route() -> None:
            while await route_due(pool, res.store, clock) >= ROUTE_BATCH and not stop.is_set():
                pass  # a full batch: look again at once

        entries = Entries(res.store, clock.now)

        async def parked() -> None:
            """Caller asks at their deadline, and waiting outcomes past their retention."""
            await expire_caller_asks(pool, res.store, entries, clock)
            await drop_waiting_outcomes(
                pool, res.store, entries, clock, settings.waiting_outcome_retention_seconds
            )

        retention = Retention(
            resolved_seconds=settings.resolved_retention_seconds,
            runs_seconds=settings.run_retention_seconds,
            gone_entries_seconds=settings.gone_entry_retention_seconds,
        )

        async def trim() -> None:
            """Ended rows past their retention leave the read models (the log keeps them)."""
            await trim_read_models(pool, clock, retention)

        programs = LazyJq(processes=1, timeout_seconds=settings.jq_timeout_seconds)
        visitor = Visitor(
            res.store,
            entries,
            clock.now,
            programs=programs,
            extras_of=WorkerRegistry(pool).extras,
        )
        schedules = Schedules(pool, res.store, visitor, clock)
        # Retention is counted in days: once a sweep interval (at least a minute) is plenty.
        trim_every = max(settings.sweep_interval_seconds, RETENTION_PASS_SECONDS)
        loops = [
            loop(settings.sweep_interval_seconds, prune, "sweeper.pass_failed"),
            loop(expiry_poll, expire, "sweeper.expiry_failed"),
            # Escalations and reminders of routed questions (docs/routing.md#escalation).
            loop(expiry_poll, route, "sweeper.routing_failed"),
            loop(expiry_poll, parked, "sweeper.parked_failed"),
            # Schedule doors, each tick fired by exactly one replica.
            loop(expiry_poll, schedules.run_once, "sweeper.schedules_failed"),
            loop(trim_every, trim, "sweeper.trim_failed", (asyncpg.PostgresError, OSError)),
        ]

        # One place counts open questions and parked runs, on an interval of the service's clock.
        gauges = ReadModelGauges(pool, res.metrics.registry, clock, settings.metrics_interval_seconds)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(gauges.run(stop))
                for each in loops:
                    tg.create_task(each)
        finally:
            await programs.aclose()


def main() -> None:
    run_main(serve, load_settings())


if __name__ == "__main__":
    main()
