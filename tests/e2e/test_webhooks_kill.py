"""End to end: a delivery service killed with SIGKILL between two attempts of a webhook loses
nothing — the retry lives in the log, and the restarted service delivers the outcome, once per
``webhook-id`` after de-duplication (docs/webhooks.md#retries)."""

from __future__ import annotations

import asyncio
import functools
import json
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import OPERATOR
from tests.e2e.test_processes import service_env, services, spawn, wait_ready
from tests.helpers import eventually
from tests.integration.test_webhooks_out import SECRET, Receiver, receiver  # noqa: F401 - its fixture

pytestmark = pytest.mark.e2e


def hooks_env(settings: Settings) -> dict[str, str]:
    env = service_env(settings)
    env.update(
        LAYBY_WEBHOOKS_OUT_SECRETS=json.dumps({"ops": SECRET}),
        LAYBY_WEBHOOKS_ALLOW_HTTP="on",
        LAYBY_WEBHOOKS_ALLOW_PRIVATE="on",
        LAYBY_WEBHOOKS_BACKOFF_SECONDS="1",
        LAYBY_WEBHOOKS_BACKOFF_MAX_SECONDS="1",
    )
    return env


@pytest.fixture
def hook_processes(settings: Settings) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    with services(hooks_env(settings)) as procs:
        yield procs


async def test_a_delivery_service_killed_mid_retry_delivers_after_its_restart(
    settings: Settings,
    hook_processes: dict[str, subprocess.Popen[bytes]],
    receiver: Receiver,  # noqa: F811 - the fixture
    store: EventStore,
    db: object,
) -> None:
    """SIGKILL of the delivery service after a failed attempt, then a restart: the outcome arrives."""
    from layby.sdk import connect

    receiver.fail_first = 1
    url = f"http://127.0.0.1:{settings.http_port}"
    await wait_ready(url)
    # A new installation's consumers start at their creation: the question is asked once the
    # delivery process has made its webhooks consumer (the door being ready says nothing of it).
    durable = store.names.durable("delivery-webhooks")
    await eventually(
        functools.partial(store.js.consumer_info, store.names.events_stream, durable),
        "the delivery-webhooks consumer to exist",
        timeout=30,
    )
    client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
    try:
        ask = asyncio.create_task(client.ask_user("Survive?", timeout=60, notify_url=receiver.url))
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {OPERATOR}"}) as http:

            async def listed() -> list[dict[str, str]]:
                return (await http.get("/api/interactions")).json()["data"]["items"]  # type: ignore[no-any-return]

            items = await eventually(listed, "the question in the list door", timeout=15)
            resp = await http.post(
                f"/api/interactions/{items[0]['interaction_id']}/answer", json={"answer": "ok"}
            )
            assert resp.status_code == 200
        assert await asyncio.wait_for(ask, 20) == "ok"
        await eventually(lambda: receiver.requests, "the first (failed) attempt", timeout=20)
        hook_processes["delivery"].kill()  # SIGKILL: nothing drains, nothing is acknowledged
        hook_processes["delivery"].wait()
        assert not receiver.outcomes
        hook_processes["delivery"] = spawn("delivery", hooks_env(settings))
        await eventually(lambda: receiver.outcomes, "the outcome after the restart", timeout=30)
        assert len(receiver.outcomes) == 1
        assert len(set(receiver.requests)) == 1
        assert receiver.rejected == 0
    finally:
        await client.close()
