"""Schedules: doors the sweeper visits on a clock (docs/doors/hooks.md#schedules).

Ticks are a pure function of the schedule and the clock, the same on every replica:

- ``every_seconds``: the multiples of that period since the epoch;
- ``cron``: the times a five-field cron expression (UTC) names, from when the door was saved.

Each pass takes the latest tick that is due and not yet fired. Firing it is an append to the
schedule's tick subject (``<ns>.ev.tick.<name>``) expecting the previous tick's sequence, so of
any number of sweeper replicas exactly one fires each tick; a tick missed while no sweeper ran is
not repeated (only the latest due one fires). The winner then visits the door with the
schedule's ``input``, under a visit id recorded in the tick, so a sweeper that stops between the
two leaves the visit to the next pass (visits are idempotent by id).
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
from cronsim import CronSim, CronSimError

from layby_contracts.errors import Conflict, LaybyError
from layby_contracts.events import DoorSaved, ScheduleFired
from layby_domain.clock import Clock
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog
from layby_server.write.visits import Visitor

log = get_logger("layby.sweeper.schedules")
_SCHEDULES = "SELECT name FROM doors WHERE kind = 'schedule' AND NOT deleted ORDER BY name"


def due_tick(door: DoorSaved, now: datetime) -> datetime | None:
    """The latest tick of the schedule at or before ``now`` (None: none yet)."""
    spec = door.spec
    if spec.every_seconds is not None:
        period = spec.every_seconds
        return datetime.fromtimestamp(math.floor(now.timestamp() / period) * period, tz=UTC)
    if spec.cron is None:
        return None
    try:
        # The previous cron time at or before now, searching backwards from just after it.
        previous = next(CronSim(spec.cron, now + timedelta(seconds=1), reverse=True))
    except (CronSimError, StopIteration):
        return None
    return previous if previous >= door.saved_at.replace(second=0, microsecond=0) else None


class Schedules:
    def __init__(self, pool: asyncpg.Pool, store: EventLog, visitor: Visitor, clock: Clock) -> None:
        self._pool = pool
        self._store = store
        self._visitor = visitor
        self._clock = clock

    async def run_once(self) -> int:
        """One pass over every saved schedule; returns how many ticks this replica fired."""
        fired = 0
        for row in await self._pool.fetch(_SCHEDULES):
            try:
                fired += await self._one(row["name"])
            except LaybyError as exc:
                log.warning("schedule.failed", door=row["name"], error=str(exc)[:300])
        return fired

    async def _one(self, name: str) -> int:
        door = await self._visitor.door(name)
        if door is None or door.spec.kind != "schedule":
            return 0
        subject = self._store.names.ticks(name)
        last = await self._store.last(subject, leader=True)
        previous = last.event if last is not None and isinstance(last.event, ScheduleFired) else None
        if previous is not None:
            await self._visit(door, previous)  # finish a fire a stopped sweeper left half-done
        tick = due_tick(door, self._clock.now())
        if tick is None or (previous is not None and tick <= previous.tick):
            return 0
        fire = ScheduleFired(name=name, tick=tick, visit_id=str(uuid.uuid4()), fired_at=self._clock.now())
        try:
            await self._store.append(
                subject, fire, msg_id=f"tick-{name}-{tick.isoformat()}", expected_seq=last.seq if last else 0
            )
        except Conflict:
            return 0  # another replica fired this tick
        await self._visit(door, fire)
        log.info("schedule.fired", door=name, tick=tick.isoformat(), visit_id=fire.visit_id)
        return 1

    async def _visit(self, door: DoorSaved, fire: ScheduleFired) -> None:
        if await self._visitor.status(fire.visit_id) is not None:
            return
        try:
            await self._visitor.visit(
                visit_id=fire.visit_id,
                kind="schedule",
                by=Principal(identity=door.by, role="operator"),
                door=door,
                input=door.spec.input if door.spec.input is not None else {},
                label=f"schedule:{door.name}",
            )
        except LaybyError as exc:
            # A refused visit (a program that fails, an entry another visit took) is this tick's
            # outcome: the visitor recorded it on the visit; it is never retried into a storm.
            log.warning(
                "schedule.visit_refused", door=door.name, tick=fire.tick.isoformat(), error=str(exc)[:300]
            )
