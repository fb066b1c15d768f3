"""Each service's metrics, read over HTTP from its health port while the five services run against
real NATS JetStream and PostgreSQL; the door's request ids and access log (docs/observability.md)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

import layby
from layby_contracts.channels import ChannelDeliveryError
from layby_server.observability.metrics import ServiceMetrics
from layby_server.operations.embedded import free_port
from layby_server.service import open_resources
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import BRIDGE_SECRET, Bridge, channels_json
from tests.conftest import System, start_system, stop_system
from tests.helpers import eventually
from tests.integration.test_parks import Workers, open_asks, soon, wait_status
from tests.samples import interaction_asked

pytestmark = [pytest.mark.integration, pytest.mark.settings(metrics_interval_seconds=0.05)]

SERVICES = ("door", "ask", "delivery", "resume", "sweeper")
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
async def metered(settings: Settings, store: EventStore, db: asyncpg.Pool) -> AsyncIterator[System]:
    """The system with each service's health port (and so its /metrics) on a port of its own."""
    ports = {name: free_port() for name in SERVICES}
    system = await start_system(settings, health_ports=ports)
    system.runners["ports"] = ports
    try:
        yield system
    finally:
        await stop_system(system)


async def scrape(system: System, service: str) -> Samples:
    """One service's /metrics, parsed by the Prometheus client's own parser."""
    port = system.runners["ports"][service]
    async with httpx.AsyncClient(timeout=5) as http:
        resp = await http.get(f"http://127.0.0.1:{port}/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(resp.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def scraped(system: System, service: str, name: str, expected: float, **labels: str) -> None:
    """Wait until ``service`` reports ``expected`` for the series (gauges refresh on an interval)."""
    await eventually(
        lambda: scrape(system, service),
        f"{service} to report {name}{labels} = {expected}",
        until=lambda s: value(s, name, **labels) == expected,
    )


async def test_a_sync_cycle_is_counted_once_by_the_service_that_recorded_each_fact(metered: System) -> None:
    """Ask, answer at the door, the asker wakes: the ask service counts the question, the door the
    answer, its resolution and the request, each once; gauges follow the read models and consumers."""
    client = await metered.sdk()
    task = asyncio.create_task(client.ask_user("Deploy?", answer_format="confirm", timeout=30))
    await scraped(metered, "sweeper", "layby_open_questions", 1, mode="sync")
    async with metered.http() as http:
        listed = (await http.get("/api/interactions")).json()["data"]["items"]
        resp = await http.post(
            f"/api/interactions/{listed[0]['interaction_id']}/answer", json={"answer": True}
        )
    assert resp.status_code == 200
    assert await asyncio.wait_for(task, 10) is True

    ask, door = await scrape(metered, "ask"), await scrape(metered, "door")
    assert value(ask, "layby_asks_recorded_total", format="confirm", mode="sync") == 1
    assert value(door, "layby_answers_total", via="api") == 1
    assert value(door, "layby_resolutions_total", kind="answered") == 1
    answer_route = {"route": "/api/interactions/{interaction_id}/answer", "method": "POST", "status": "200"}
    assert value(door, "layby_http_request_duration_seconds_count", **answer_route) == 1
    for other in ("ask", "delivery", "resume", "sweeper"):  # counted where it landed, nowhere else
        assert value(await scrape(metered, other), "layby_answers_total", via="api") is None
    assert value(door, "layby_asks_recorded_total", format="confirm", mode="sync") is None

    await scraped(metered, "sweeper", "layby_open_questions", 0, mode="sync")
    await scraped(metered, "resume", "layby_consumer_pending", 0, consumer="resume")
    await scraped(metered, "door", "layby_consumer_pending", 0, consumer="projector")
    await scraped(metered, "delivery", "layby_consumer_pending", 0, consumer="delivery")


async def test_a_park_answered_at_the_door_resumes_its_run_once_and_is_counted_once(
    metered: System, db: asyncpg.Pool
) -> None:
    """Park, answer, resume: the question is counted as a park, the run's park and its one resume
    by the services that recorded them; the parked-runs gauge rises and falls with the read model."""
    workers = Workers(metered)

    def register(w: layby.Worker) -> None:
        @w.flow("approve")
        async def approve(order: dict[str, Any]) -> bool:
            return bool(
                await layby.ask_user("Ship?", answer_format="confirm", mode="async", expiry_at=soon())
            )

    try:
        worker = await workers.new(register)
        await workers.serve(worker)
        run_id = await worker.start("approve", {"id": 1})
        [ix] = await open_asks(db, run_id, 1)
        await scraped(metered, "sweeper", "layby_parked_runs", 1)
        await scraped(metered, "sweeper", "layby_open_questions", 1, mode="park")
        async with metered.http() as http:
            resp = await http.post(f"/api/interactions/{ix}/answer", json={"answer": True})
        assert resp.status_code == 200
        await wait_status(db, run_id, "finished")
    finally:
        await workers.stop_all()

    ask, door, resume = [await scrape(metered, s) for s in ("ask", "door", "resume")]
    assert value(ask, "layby_asks_recorded_total", format="confirm", mode="park") == 1
    assert value(ask, "layby_runs_parked_total") == 1
    assert value(ask, "layby_runs_ended_total", outcome="finished") == 1
    assert value(door, "layby_answers_total", via="api") == 1
    assert value(door, "layby_resolutions_total", kind="answered") == 1
    assert value(resume, "layby_run_resumes_total", cause="resolved") == 1
    await scraped(metered, "sweeper", "layby_parked_runs", 0)


async def test_metrics_are_served_on_the_health_port_never_on_the_doors_public_port(metered: System) -> None:
    """GET /metrics on the door's public port is the doors' 404 and carries no metric."""
    async with metered.http(None) as http:
        resp = await http.get("/metrics")
    assert resp.status_code == 404
    assert "layby_" not in resp.text
    assert value(await scrape(metered, "door"), "layby_http_request_duration_seconds_count",
                 route="unmatched", method="GET", status="404") == 1  # fmt: skip


def _access_lines(err: str) -> list[dict[str, str]]:
    """The access-log lines of the captured standard error, as their key=value fields."""
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in err.splitlines() if "http.request" in line]


async def test_a_safe_request_id_is_echoed_and_logged_an_unsafe_one_is_replaced(
    metered: System, capsys: pytest.CaptureFixture[str]
) -> None:
    """X-Request-Id of 1-128 characters of [A-Za-z0-9._-] comes back and is in the access line;
    anything else is replaced by a fresh id (docs/observability.md#request-ids)."""
    async with metered.http() as http:
        kept = await http.get("/api/interactions", headers={"X-Request-Id": "deploy-42.a_B"})
        long = await http.get("/api/interactions", headers={"X-Request-Id": "x" * 129})
        odd = await http.get("/api/interactions", headers={"X-Request-Id": "a/b{c}"})
        fresh = await http.get("/api/interactions")
    assert kept.headers["x-request-id"] == "deploy-42.a_B"
    for resp in (long, odd, fresh):
        assert re.fullmatch(r"[0-9a-f]{16}", resp.headers["x-request-id"])
    lines = _access_lines(capsys.readouterr().err)
    [line] = [line for line in lines if line.get("request_id") == "deploy-42.a_B"]
    assert {k: line[k] for k in ("method", "route", "status", "identity")} == {
        "method": "GET",
        "route": "/api/interactions",
        "status": "200",
        "identity": "ops",
    }
    assert float(line["duration_ms"]) >= 0
    assert any(line.get("request_id") == long.headers["x-request-id"] for line in lines)


async def test_the_access_log_of_a_callback_names_its_route_template_never_the_ticket(
    metered: System, capsys: pytest.CaptureFixture[str]
) -> None:
    """A callback's ticket (a bearer secret) and its query string appear in no access line and no
    metric: both name the route template (docs/observability.md#the-access-log)."""
    ticket = "tk_" + "s3cr3t" * 6
    async with httpx.AsyncClient(base_url=metered.url) as http:
        resp = await http.get(f"/api/interactions/callback/{ticket}?status=private-value")
    assert resp.status_code == 404
    err = capsys.readouterr().err
    [line] = [line for line in _access_lines(err) if line.get("request_id") == resp.headers["x-request-id"]]
    assert (line["route"], line["status"], line["method"]) == (
        "/api/interactions/callback/{ticket}",
        "404",
        "GET",
    )
    assert "identity" not in line
    assert ticket not in err
    assert "private-value" not in err
    exposition = str(await scrape(metered, "door"))
    assert ticket not in exposition
    assert "/api/interactions/callback/{ticket}" in exposition


async def test_an_append_the_log_de_duplicated_is_not_counted_again(store: EventStore) -> None:
    """A retried append with the same Nats-Msg-Id lands once in the log, and is counted once."""
    metrics = ServiceMetrics()
    store.on_appended = metrics.appended
    now = datetime.now(UTC)
    event = interaction_asked("dedup-1", now)
    first = await store.append(store.names.ix("dedup-1"), event, msg_id="asked-dedup-1", expected_seq=None)
    again = await store.append(store.names.ix("dedup-1"), event, msg_id="asked-dedup-1", expected_seq=None)
    assert first == again
    assert (
        metrics.registry.get_sample_value("layby_asks_recorded_total", {"format": "text", "mode": "sync"})
        == 1
    )


async def test_delivery_attempts_are_counted_by_channel_and_result(
    settings: Settings, store: EventStore, db: asyncpg.Pool, bridge: Bridge
) -> None:
    """Each attempt to hand a question to a channel is counted by the delivery service under the
    channel's name and its result; a question no channel took is removed as delivery_failed."""
    configured = msgspec.structs.replace(
        settings,
        channels=channels_json(bridge.url),
        public_base_url=f"http://127.0.0.1:{settings.http_port}",
        webhook_secrets=f"bridge:{BRIDGE_SECRET}",
    )
    ports = {name: free_port() for name in SERVICES}
    system = await start_system(configured, health_ports=ports)
    system.runners["ports"] = ports
    try:
        client = await system.sdk(public_base_url=system.url)
        sent = asyncio.create_task(client.ask_user("Deploy?", channel="ops", timeout=30))
        await bridge.next_delivery()
        with pytest.raises(ChannelDeliveryError, match=r"KeyError: 'recipient_id'"):
            await asyncio.wait_for(client.ask_user("Crash?", channel="buggy", timeout=30), 10)
        sent.cancel()
        delivery = await scrape(system, "delivery")
        assert value(delivery, "layby_delivery_attempts_total", channel="ops", result="sent") == 1
        assert (
            value(delivery, "layby_delivery_attempts_total", channel="buggy", result="permanent_error") == 1
        )
        assert value(delivery, "layby_delivery_attempts_total", channel="buggy", result="sent") == 0
        assert value(delivery, "layby_resolutions_total", kind="delivery_failed") == 1
    finally:
        await stop_system(system)


async def test_a_one_off_command_never_takes_the_services_health_port(
    settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """``layby projections rebuild`` run inside a service's pod opens its resources without
    listening on LAYBY_HEALTH_PORT, which the service itself holds (docs/observability.md)."""
    port = free_port()
    with_port = msgspec.structs.replace(settings, health_port=port)
    async with open_resources(with_port, name="rebuild"), httpx.AsyncClient(timeout=2) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"http://127.0.0.1:{port}/metrics")
