"""Which workers are alive and which flows they serve (docs/parks.md#worker-visibility).

Every worker reports in every few seconds (``cmd.run.worker.v1``); the ask service keeps the
latest report per worker in PostgreSQL (``workers``), so every replica, the run doors and
``layby workers`` see the same list. This module is the one place that table is written and
read. A worker counts as alive while its last report is younger than ``ALIVE_SECONDS``. Times
are the database's, never a service's clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import asyncpg
import msgspec

from layby_contracts.commands import WorkerSeen
from layby_contracts.errors import BadInput
from layby_domain.validation import FLOW_VERSION_RULE, is_flow_name, is_flow_version
from layby_server.auth import Principal

ALIVE_SECONDS = 30
"""A worker counts as alive this long after its last report (it reports every 10 s)."""
SERVED_CACHE_SECONDS = 1.0
"""How long the flows live workers serve are remembered before PostgreSQL is asked again
(docs/parks.md#worker-visibility): a run start reads the memory, not the table."""
MAX_FLOWS = 256

_SEEN = """
INSERT INTO workers (worker_id, identity, host, pid, flows, concurrency, extras, versions)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb)
ON CONFLICT (worker_id) DO UPDATE SET
    identity = EXCLUDED.identity, host = EXCLUDED.host, pid = EXCLUDED.pid, flows = EXCLUDED.flows,
    concurrency = EXCLUDED.concurrency, extras = EXCLUDED.extras, versions = EXCLUDED.versions,
    seen_at = now()
"""

_EXTRAS = """
SELECT DISTINCT jsonb_array_elements_text(extras -> $1) AS key FROM workers
WHERE extras ? $1 AND seen_at > now() - interval '1 hour'
"""

_SERVED = f"""
SELECT DISTINCT flow, coalesce((versions ->> flow)::integer, 1) AS version
FROM workers, unnest(flows) AS flow
WHERE seen_at > now() - interval '{ALIVE_SECONDS} seconds'
"""  # noqa: S608 - a constant


_SERVES = f"""
SELECT EXISTS (SELECT 1 FROM workers WHERE $1 = ANY(flows)
    AND coalesce((versions ->> $1)::integer, 1) = $2
    AND seen_at > now() - interval '{ALIVE_SECONDS} seconds')
"""  # noqa: S608 - a constant

_LISTING = f"""
SELECT worker_id, identity, host, pid, flows, concurrency, started_at, seen_at, versions,
    seen_at > now() - interval '{ALIVE_SECONDS} seconds' AS alive
FROM workers
WHERE seen_at > now() - interval '1 hour' AND ($1::text IS NULL OR identity = $1)
ORDER BY seen_at DESC LIMIT 500
"""  # noqa: S608 - a constant


def _declared(cmd: WorkerSeen) -> dict[str, list[str]]:
    extras = cmd.extras or {}
    if len(extras) > MAX_FLOWS or not all(is_flow_name(f) for f in extras):
        raise BadInput("extras must map flow names to key lists", field="extras")
    for flow, keys in extras.items():
        if len(keys) > 256 or not all(isinstance(k, str) and 0 < len(k) <= 64 for k in keys):
            raise BadInput(f"extras of {flow} must be at most 256 keys of 1-64 characters", field="extras")
    return {flow: sorted(set(keys)) for flow, keys in extras.items()}


def _versions(cmd: WorkerSeen) -> dict[str, int]:
    versions = cmd.versions or {}
    for flow, version in versions.items():
        if flow not in cmd.flows:
            raise BadInput(f"versions names {flow!r}, which is not one of flows", field="versions")
        if not is_flow_version(version):
            raise BadInput(f"the version of {flow}: {FLOW_VERSION_RULE}", field="versions")
    return {flow: version for flow, version in versions.items() if version != 1}


Served = dict[str, frozenset[int]]
"""Each flow a live worker serves, with the versions served."""


class WorkerRegistry:
    def __init__(self, pool: asyncpg.Pool, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._pool = pool
        self._monotonic = monotonic
        self._served: Served | None = None
        self._served_at = 0.0
        self._reading: asyncio.Future[Served] | None = None

    async def seen(self, cmd: WorkerSeen, principal: Principal) -> None:
        if not (1 <= len(cmd.worker_id) <= 64) or not is_flow_name(cmd.worker_id):
            raise BadInput("worker_id must be 1-64 of [A-Za-z0-9_-]", field="worker_id")
        if not (0 < len(cmd.flows) <= MAX_FLOWS) or not all(is_flow_name(f) for f in cmd.flows):
            raise BadInput(f"flows must be 1-{MAX_FLOWS} flow names", field="flows")
        host = (cmd.host or "")[:255] or None
        extras = _declared(cmd)
        versions = _versions(cmd)
        await self._pool.execute(
            _SEEN,
            cmd.worker_id,
            principal.identity,
            host,
            cmd.pid,
            sorted(set(cmd.flows)),
            cmd.concurrency,
            msgspec.json.encode(extras).decode() if extras else None,
            msgspec.json.encode(versions).decode() if versions else None,
        )
        if self._served is not None:
            # What this replica just recorded is live now: a run started right after its worker
            # reported in is not told that nobody serves it.
            served = dict(self._served)
            for flow in cmd.flows:
                served[flow] = served.get(flow, frozenset()) | {versions.get(flow, 1)}
            self._served = served

    async def extras(self, flow: str) -> set[str]:
        """The extras keys ``flow`` declared, as workers seen in the last hour report them
        (docs/caller-asks.md#extras); empty when none declared any."""
        return {r["key"] for r in await self._pool.fetch(_EXTRAS, flow)}

    async def served(self) -> list[str]:
        """Every flow a live worker serves, as read at most ``SERVED_CACHE_SECONDS`` ago (one
        read at a time, however many run starts ask meanwhile)."""
        return sorted(await self._served_now())

    async def versions(self, flow: str) -> frozenset[int]:
        """The versions of ``flow`` live workers serve (empty: none serves it), as read at most
        ``SERVED_CACHE_SECONDS`` ago."""
        return (await self._served_now()).get(flow, frozenset())

    async def newest_version(self, flow: str) -> int:
        """The newest version of ``flow`` a live worker serves; 1 when none serves it
        (docs/versions.md#which-version-a-run-starts-on)."""
        return max(await self.versions(flow), default=1)

    async def _served_now(self) -> Served:
        if self._served is not None and self._monotonic() - self._served_at < SERVED_CACHE_SECONDS:
            return self._served
        if self._reading is None:
            self._reading = asyncio.ensure_future(self._read_served())
        reading = self._reading
        try:
            return await asyncio.shield(reading)
        finally:
            if self._reading is reading and reading.done():
                self._reading = None

    async def _read_served(self) -> Served:
        at = self._monotonic()
        found: dict[str, set[int]] = {}
        for r in await self._pool.fetch(_SERVED):
            found.setdefault(r["flow"], set()).add(r["version"])
        served = {flow: frozenset(versions) for flow, versions in found.items()}
        self._served, self._served_at = served, at
        return served

    async def serves(self, flow: str, version: int = 1) -> bool:
        """Whether a live worker serves ``version`` of ``flow``."""
        return bool(await self._pool.fetchval(_SERVES, flow, version))

    async def listing(self, identity: str | None) -> list[asyncpg.Record]:
        """Workers seen in the last hour (``identity``'s only, when given), most recent first."""
        return list(await self._pool.fetch(_LISTING, identity))
