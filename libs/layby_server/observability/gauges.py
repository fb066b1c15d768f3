"""Gauges read from somewhere else on an interval: JetStream consumer info and the read models
(docs/observability.md#the-metrics).

A scrape never causes a NATS or PostgreSQL round trip: each gauge set is refreshed by one loop of
its service, at most once per ``interval`` of the service's clock (tests move the clock, and a
scrape storm costs nothing). The values are as fresh as the last refresh.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

import asyncpg
import nats.errors
import nats.js.errors
from prometheus_client import CollectorRegistry, Gauge

from layby_contracts.errors import Transient
from layby_domain.clock import Clock
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore

__all__ = ["ConsumerGauges", "ReadModelGauges"]

log = get_logger("layby_server.observability.gauges")
MODES = ("sync", "park")
_PASSING = (Transient, asyncpg.PostgresError, OSError, nats.errors.Error, nats.js.errors.Error)
"""Failures a later refresh may not meet: logged, never fatal to the service."""


class _Interval:
    """Refreshes at most once per ``interval`` seconds of ``clock``; ``run`` looks every tick."""

    def __init__(self, clock: Clock, interval: float) -> None:
        self._clock = clock
        self.interval = interval
        self._last: float | None = None

    async def refresh(self) -> None:
        raise NotImplementedError

    async def refresh_if_due(self) -> bool:
        """Refresh when the interval has passed since the last refresh (or there was none)."""
        now = self._clock.monotonic()
        if self._last is not None and now - self._last < self.interval:
            return False
        self._last = now
        await self.refresh()
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the gauges fresh until ``stop``; a failed refresh is logged and tried next time."""
        tick = min(self.interval, 1.0)
        while not stop.is_set():
            try:
                await self.refresh_if_due()
            except _PASSING as exc:
                log.warning("metrics.refresh_failed", gauges=type(self).__name__, error=repr(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=tick)


class ConsumerGauges(_Interval):
    """Pending, unacknowledged and redelivered messages of this service's durable consumers on
    the event log, labelled by role (``consumer="resume"``): every replica of a role reads the
    same shared consumer, so a dashboard takes the ``max`` over pods."""

    def __init__(
        self,
        store: EventStore,
        registry: CollectorRegistry,
        clock: Clock,
        interval: float,
        roles: Iterable[str],
    ) -> None:
        super().__init__(clock, interval)
        self._store = store
        self._roles = tuple(roles)
        pending = Gauge(
            "layby_consumer_pending",
            "Messages of the event log not yet delivered to a durable consumer (its backlog).",
            ["consumer"],
            registry=registry,
        )
        ack_pending = Gauge(
            "layby_consumer_ack_pending",
            "Messages delivered to a durable consumer and not yet acknowledged.",
            ["consumer"],
            registry=registry,
        )
        redelivered = Gauge(
            "layby_consumer_redelivered",
            "Messages of a durable consumer delivered more than once and not yet acknowledged.",
            ["consumer"],
            registry=registry,
        )
        self._children = {
            role: (pending.labels(consumer=role), ack_pending.labels(consumer=role), redelivered.labels(role))
            for role in self._roles
        }

    async def refresh(self) -> None:
        names = self._store.names
        for role in self._roles:
            try:
                info = await self._store.js.consumer_info(names.events_stream, names.durable(role))
            except nats.js.errors.NotFoundError:
                continue  # not created yet (the service is starting) or deleted by hand
            pending, ack_pending, redelivered = self._children[role]
            pending.set(info.num_pending or 0)
            ack_pending.set(info.num_ack_pending or 0)
            redelivered.set(info.num_redelivered or 0)


class ReadModelGauges(_Interval):
    """Open questions and parked runs, counted in the read models by the sweeper (one query each
    per interval). Every sweeper replica reports the same numbers: a dashboard takes the ``max``."""

    def __init__(
        self, pool: asyncpg.Pool, registry: CollectorRegistry, clock: Clock, interval: float
    ) -> None:
        super().__init__(clock, interval)
        self._pool = pool
        questions = Gauge(
            "layby_open_questions",
            "Questions waiting for a person's answer in the inbox read model, by mode (sync, park).",
            ["mode"],
            registry=registry,
        )
        self._questions = {mode: questions.labels(mode=mode) for mode in MODES}
        self._parked = Gauge(
            "layby_parked_runs", "Runs parked on their questions, in the runs read model.", registry=registry
        )

    async def refresh(self) -> None:
        rows = await self._pool.fetch(
            "SELECT mode, count(*) AS n FROM interactions WHERE status = 'pending' GROUP BY mode"
        )
        found = dict.fromkeys(MODES, 0)
        for row in rows:
            found["park" if row["mode"] == "async" else "sync"] += int(row["n"])
        for mode, child in self._questions.items():
            child.set(found[mode])
        self._parked.set(await self._pool.fetchval("SELECT count(*) FROM runs WHERE status = 'parked'"))
