"""Caller asks at their deadline, waiting outcomes past their retention, and the caller cap, on a
manual clock (docs/caller-asks.md#expiry, #waiting-outcomes, #the-concurrency-cap).

Real NATS and PostgreSQL, the five services in-process, workers in-process.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import msgspec
import pytest

import layby
from layby_contracts.doors import DoorSpec
from layby_contracts.events import DoorSaved, InteractionRemoved
from layby_domain.clock import ManualClock
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, serving

pytestmark = pytest.mark.timeout(120)


async def run_status(system: System, run_id: str) -> dict[str, Any]:
    async with system.http() as http:
        data: dict[str, Any] = (await http.get(f"/api/runs/{run_id}")).json()["data"]
    return data


async def entries(system: System, subject: str) -> list[dict[str, Any]]:
    async with system.http() as http:
        found: list[dict[str, Any]] = (await http.get(f"/api/subjects/{subject}/parked")).json()["data"][
            "entries"
        ]
    return found


def worker_for(system: System, client: layby.Client, clock: ManualClock) -> layby.Worker:
    w = layby.Worker(client, settings=system.settings)

    @w.flow("asker")
    async def asker(inp: dict[str, Any]) -> Any:
        answer = await layby.ask_user(
            "go?", to="caller", expiry_at=clock.now() + timedelta(minutes=5), on_expiry=inp.get("on_expiry")
        )
        return {"answer": answer}

    @w.flow("outer")
    async def outer(inp: dict[str, Any]) -> Any:
        first = await layby.call("asker", inp)
        return await layby.ask_user(
            "relay?", to="caller", expiry_at=clock.now() + timedelta(days=1), payload=first
        )

    return w


async def test_a_caller_ask_past_its_deadline_kills_its_whole_chain_by_default(
    clocked: System, clock: ManualClock
) -> None:
    """``on_expiry="kill"`` (the default): at the deadline the asking run and every run above it
    end cancelled, never resumed, and the entries leave the subject (docs/caller-asks.md#expiry)."""
    w = worker_for(clocked, await clocked.sdk(), clock)
    async with serving(w):
        outer = await w.start("outer", {})
        found = await eventually(
            lambda: entries(clocked, outer), "both questions", until=lambda e: len(e) == 2
        )
        assert {tuple(e["asked_by"]) for e in found} == {("outer", "asker"), ("outer",)}
        clock.advance(6 * 60)
        await eventually(
            lambda: run_status(clocked, outer), "the chain killed", until=lambda r: r["status"] == "cancelled"
        )
        assert (
            await eventually(lambda: entries(clocked, outer), "the subject empty", until=lambda e: e == [])
            == []
        )


async def test_a_caller_ask_with_on_expiry_resume_resumes_with_the_expiry_marker(
    clocked: System, clock: ManualClock
) -> None:
    """``on_expiry="resume"``: at the deadline the run resumes with the reserved expiry marker
    and takes its expiry branch (docs/caller-asks.md#expiry)."""
    w = worker_for(clocked, await clocked.sdk(), clock)
    async with serving(w):
        run_id = await w.start("asker", {"on_expiry": "resume"})
        await eventually(lambda: entries(clocked, run_id), "the question", until=lambda e: len(e) == 1)
        clock.advance(6 * 60)
        run = await eventually(
            lambda: run_status(clocked, run_id), "the run finished", until=lambda r: r["status"] == "finished"
        )
        assert run["result"] == {"answer": layby.EXPIRY_ANSWER}


async def test_a_waiting_outcome_nobody_takes_is_dropped_past_retention_by_an_event(
    clocked: System, store: EventStore, clock: ManualClock
) -> None:
    """A waiting outcome left on a subject is dropped once ``LAYBY_WAITING_OUTCOME_RETENTION``
    passes, by an ``interaction.removed`` event of reason ``dropped``: never silently
    (docs/caller-asks.md#waiting-outcomes)."""
    spec = msgspec.convert(
        {
            "kind": "hook",
            "target": "asker",
            "resume_expr": "if .approve then {id: $parked[0].id, payload: true} else null end",
            "start_expr": "if .approve then null else {} end",
        },
        DoorSpec,
    )
    await store.append(
        store.names.door("keep"),
        DoorSaved(name="keep", spec=spec, by="ops", saved_at=clock.now()),
        msg_id="k",
        expected_seq=None,
    )
    w = worker_for(clocked, await clocked.sdk(), clock)
    async with serving(w), clocked.http() as http:
        await http.post("/api/hooks/keep", json={})
        [entry] = await eventually(
            lambda: entries(clocked, "door:keep"), "the question", until=lambda e: len(e) == 1
        )
        done = (await http.post("/api/hooks/keep", params={"wait": 15}, json={"approve": True})).json()[
            "data"
        ]
        assert done["outcome"]["status"] == "finished"
        assert await entries(clocked, "door:keep") == [{"id": entry["id"], "status": "finished"}]
        clock.advance(clocked.settings.waiting_outcome_retention_seconds + 1)
        await eventually(
            lambda: entries(clocked, "door:keep"), "the outcome dropped", until=lambda e: e == []
        )
    last = await store.last(store.names.ix(entry["id"]))
    assert last is not None and isinstance(last.event, InteractionRemoved)
    assert (last.event.reason, last.event.to) == ("dropped", "caller")


@pytest.mark.settings(max_concurrent_caller=1)
async def test_a_caller_ask_past_the_caller_cap_is_refused_loudly(
    clocked: System, clock: ManualClock
) -> None:
    """At ``INTERACTIONS_MAX_CONCURRENT_CALLER`` a further caller ask is refused with
    ``InteractionLimitError``, and the run that asked fails saying so
    (docs/caller-asks.md#the-concurrency-cap)."""
    client = await clocked.sdk()
    w = worker_for(clocked, client, clock)
    w._settings = msgspec.structs.replace(w._settings, continuation_max_attempts=1)
    async with serving(w):
        first = await w.start("asker", {})
        await eventually(lambda: entries(clocked, first), "the first question", until=lambda e: len(e) == 1)
        second = await w.start("asker", {})
        failed = await eventually(
            lambda: run_status(clocked, second),
            "the second run failed",
            until=lambda r: r["status"] == "failed",
        )
        assert "max_concurrent_caller limit (1)" in failed["error"]
        assert (await run_status(clocked, first))["status"] == "parked"


async def test_a_schedule_fires_once_per_tick_with_two_sweeper_replicas(
    clocked: System, store: EventStore, clock: ManualClock
) -> None:
    """Two sweepers watch one schedule: each tick starts exactly one run, whichever replica fires
    it (docs/doors/hooks.md#schedules)."""
    from layby_services.sweeper.main import serve as sweeper

    spec = msgspec.convert(
        {
            "kind": "schedule",
            "target": "ticked",
            "every_seconds": 60,
            "input": {"from": "schedule"},
            "start_expr": "{from: .from}",
        },
        DoorSpec,
    )
    await store.append(
        store.names.door("minutely"),
        DoorSaved(name="minutely", spec=spec, by="ops", saved_at=clock.now()),
        msg_id="m",
        expected_seq=None,
    )
    w = layby.Worker(await clocked.sdk(), settings=clocked.settings)
    seen: list[Any] = []

    @w.flow("ticked")
    async def ticked(inp: dict[str, Any]) -> None:
        seen.append(inp)

    second_stop = asyncio.Event()
    second = asyncio.create_task(sweeper(clocked.settings, second_stop, clock=clock))
    try:
        async with serving(w), clocked.http() as http:

            async def runs() -> list[dict[str, Any]]:
                items: list[dict[str, Any]] = (await http.get("/api/runs", params={"pageSize": 100})).json()[
                    "data"
                ]["items"]
                return [r for r in items if r["flow"] == "ticked"]

            await eventually(runs, "the first tick's run", until=lambda r: len(r) == 1)
            for ticks in (2, 3):
                clock.advance(60)
                await eventually(runs, f"tick {ticks}'s run", until=lambda r, n=ticks: len(r) == n)
            await asyncio.sleep(1.5)  # a time window: several passes of both replicas, nothing more fires
            assert len(await runs()) == 3
        ticks_log = await store.last(store.names.ticks("minutely"))
        assert ticks_log is not None
        assert seen and all(inp == {"from": "schedule"} for inp in seen)
    finally:
        second_stop.set()
        await asyncio.wait_for(second, 15)
