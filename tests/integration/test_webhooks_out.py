"""Signed webhooks out against the running system (docs/webhooks.md): a loopback receiver
verifies every request with the reference Standard Webhooks verifier, fails the first attempts,
de-duplicates by ``webhook-id``, and sees each outcome — answered, expired, removed — exactly once;
a delivery service stopped hard mid-retry loses nothing; a bad notify_url records nothing."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import msgspec
import pytest
from aiohttp import web
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

import layby
from layby_contracts.errors import BadInput, InteractionTimeoutError
from layby_server.operations.embedded import free_port
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import BOB, OPERATOR, System, start_system, stop_system
from tests.helpers import eventually
from tests.integration.test_core_loop import wait_listed
from tests.integration.test_parks import Workers, answer, open_asks, soon, wait_status

pytestmark = pytest.mark.integration

KEY = b"layby-webhook-test-key-0123456789"
SECRET = "whsec_" + base64.b64encode(KEY).decode()


@dataclass
class Receiver:
    """A webhook receiver as a customer would write one: verify, de-duplicate, act once."""

    fail_first: int = 0
    status: int = 500
    url: str = ""
    requests: list[str] = field(default_factory=list)
    """Every verified request's webhook-id, retries included."""
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """webhook-id -> body, once each (after de-duplication)."""
    rejected: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        try:
            payload = Webhook(SECRET).verify(body, dict(request.headers))
        except WebhookVerificationError:
            self.rejected += 1
            return web.Response(status=400)
        msg_id = request.headers["webhook-id"]
        self.requests.append(msg_id)
        if len(self.requests) <= self.fail_first:
            return web.Response(status=self.status, headers={"Location": self.url})
        self.outcomes.setdefault(msg_id, payload)
        return web.Response(status=204)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    recv = Receiver()
    app = web.Application()
    app.router.add_post("/hook", recv.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    recv.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield recv
    finally:
        await runner.cleanup()


@pytest.fixture
async def hooks(settings: Settings, store: EventStore, db: asyncpg.Pool) -> AsyncIterator[System]:
    """The system with loopback http receivers allowed and fast retries."""
    configured = msgspec.structs.replace(
        settings,
        webhooks_out_secrets=json.dumps({"ops": SECRET}),
        webhooks_allow_http=True,
        webhooks_allow_private=True,
        webhooks_backoff_seconds=0.05,
        webhooks_backoff_max_seconds=0.2,
        webhooks_timeout_seconds=2.0,
    )
    system = await start_system(configured)
    await _webhook_consumer(store)
    try:
        yield system
    finally:
        await stop_system(system)


async def _webhook_consumer(store: EventStore) -> None:
    await eventually(
        functools.partial(
            store.js.consumer_info, store.names.events_stream, store.names.durable("delivery-webhooks")
        ),
        "the delivery-webhooks consumer to exist",
    )


async def _answer(system: System, answer: object) -> str:
    items = await wait_listed(system, 1)
    interaction_id = str(items[0]["interaction_id"])
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{interaction_id}/answer", json={"answer": answer})
    assert resp.status_code == 200
    return interaction_id


async def test_an_answer_is_posted_signed_retried_and_seen_once_per_id(
    hooks: System, receiver: Receiver, store: EventStore
) -> None:
    """The answered outcome reaches the receiver signed per Standard Webhooks; the first failed
    attempts are retried with the same webhook-id, so the receiver acts on it once, and every
    attempt is recorded (docs/webhooks.md#retries)."""
    receiver.fail_first = 2
    client = await hooks.sdk()
    task = asyncio.create_task(client.ask_user("Ship it?", timeout=30, notify_url=receiver.url))
    interaction_id = await _answer(hooks, "yes")
    assert await asyncio.wait_for(task, 10) == "yes"
    await eventually(lambda: receiver.outcomes, "the webhook to be delivered")
    assert len(set(receiver.requests)) == 1
    assert len(receiver.requests) == 3
    assert receiver.rejected == 0
    [(msg_id, body)] = receiver.outcomes.items()
    assert msg_id.startswith(f"msg_{interaction_id}_")
    assert body["type"] == "interaction.answered"
    assert body["data"]["answer"] == "yes"
    assert body["data"]["answered_by"] == "ops"
    attempts = await eventually(
        lambda: store.webhook_attempts(interaction_id), "three attempts", until=lambda a: len(a) == 3
    )
    assert [(a.attempt, a.result, a.status) for a in attempts] == [
        (1, "failed", 500),
        (2, "failed", 500),
        (3, "delivered", 204),
    ]
    assert attempts[0].next_retry_at is not None
    async with hooks.http() as http:
        view = (await http.get(f"/api/interactions/{interaction_id}/webhook")).json()["data"]
    assert (view["notify_url"], view["state"]) == (receiver.url, "delivered")
    assert [(a["attempt"], a["result"], a.get("status")) for a in view["attempts"]] == [
        (1, "failed", 500),
        (2, "failed", 500),
        (3, "delivered", 204),
    ]
    assert "next_retry_at" in view["attempts"][0]


async def test_a_sensitive_answer_is_reported_without_the_answer(hooks: System, receiver: Receiver) -> None:
    """A sensitive question's webhook says it was answered and never carries the answer."""
    client = await hooks.sdk()
    task = asyncio.create_task(
        client.ask_user("Password?", timeout=30, sensitive=True, notify_url=receiver.url)
    )
    await _answer(hooks, "hunter2")
    assert (await asyncio.wait_for(task, 10)).reveal() == "hunter2"
    [body] = (await eventually(lambda: receiver.outcomes, "the webhook")).values()
    assert body["data"]["outcome"] == "answered"
    assert body["data"]["sensitive"] is True
    assert "answer" not in body["data"]


async def test_an_expired_question_is_reported_as_expired(hooks: System, receiver: Receiver) -> None:
    """A sync question whose timeout passes is reported as ``interaction.expired``."""
    client = await hooks.sdk()
    with pytest.raises(InteractionTimeoutError):
        await client.ask_user("Still there?", timeout=0.5, notify_url=receiver.url)
    [body] = (await eventually(lambda: receiver.outcomes, "the webhook")).values()
    assert body["type"] == "interaction.expired"


async def test_a_cancelled_ask_is_reported_as_removed_with_its_reason(
    hooks: System, receiver: Receiver
) -> None:
    """A question pruned because its asker was cancelled is ``interaction.removed``, reason ``cancelled``."""
    client = await hooks.sdk()
    task = asyncio.create_task(client.ask_user("Cancel me?", timeout=30, notify_url=receiver.url))
    await wait_listed(hooks, 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [body] = (await eventually(lambda: receiver.outcomes, "the webhook")).values()
    assert (body["type"], body["data"]["reason"]) == ("interaction.removed", "cancelled")


async def test_a_410_stops_the_retries(hooks: System, receiver: Receiver, store: EventStore) -> None:
    """A receiver that answers 410 Gone is never tried again."""
    receiver.fail_first, receiver.status = 100, 410
    client = await hooks.sdk()
    task = asyncio.create_task(client.ask_user("Gone?", timeout=30, notify_url=receiver.url))
    interaction_id = await _answer(hooks, "x")
    await task
    attempts = await eventually(lambda: store.webhook_attempts(interaction_id), "the attempt")
    assert [(a.attempt, a.result, a.status) for a in attempts] == [(1, "gone", 410)]
    assert len(receiver.requests) == 1


async def test_a_redirect_is_never_followed(hooks: System, receiver: Receiver, store: EventStore) -> None:
    """A 3xx is a failed attempt (retried later), never a request to the Location."""
    receiver.fail_first, receiver.status = 1, 307
    client = await hooks.sdk()
    task = asyncio.create_task(client.ask_user("Moved?", timeout=30, notify_url=receiver.url))
    interaction_id = await _answer(hooks, "x")
    await task
    attempts = await eventually(
        lambda: store.webhook_attempts(interaction_id), "two attempts", until=lambda a: len(a) == 2
    )
    assert [(a.attempt, a.result, a.status) for a in attempts] == [(1, "failed", 307), (2, "delivered", 204)]
    assert len(receiver.requests) == 2


async def test_a_parked_question_reports_its_outcome_with_its_run(
    hooks: System, receiver: Receiver, db: asyncpg.Pool
) -> None:
    """An async ask (``layby.ask_user`` inside a flow) takes notify_url too; its webhook names the
    run that parked on it."""
    workers = Workers(hooks)

    def register(w: layby.Worker) -> None:
        @w.flow("hooked")
        async def hooked(_: Any) -> Any:
            return await layby.ask_user("Approve?", mode="async", expiry_at=soon(), notify_url=receiver.url)

    await workers.serve(await workers.new(register))
    try:
        client = await hooks.sdk()
        run_id = await client.start_run("hooked")
        (asked,) = await open_asks(db, run_id, 1)
        assert await answer(hooks, asked, "yes") == 200
        [body] = (await eventually(lambda: receiver.outcomes, "the webhook")).values()
        assert (body["type"], body["data"]["answer"], body["data"]["run_id"]) == (
            "interaction.answered",
            "yes",
            run_id,
        )
        await wait_status(db, run_id, "finished")
    finally:
        await workers.stop_all()


async def test_a_hard_stop_of_the_delivery_service_mid_retry_loses_nothing(
    hooks: System, receiver: Receiver
) -> None:
    """The retry lives in the log: a delivery service killed between attempts, then restarted,
    still delivers the outcome (once, after de-duplication)."""
    receiver.fail_first = 2
    client = await hooks.sdk()
    task = asyncio.create_task(client.ask_user("Survive?", timeout=30, notify_url=receiver.url))
    await _answer(hooks, "ok")
    await task
    await eventually(lambda: len(receiver.requests) >= 1, "the first attempt")
    hooks.tasks["delivery"].cancel()  # a hard stop: nothing drains, nothing is acknowledged
    await asyncio.gather(hooks.tasks["delivery"], return_exceptions=True)
    await hooks.start_service("delivery")
    await eventually(lambda: receiver.outcomes, "the webhook after the restart", timeout=20)
    assert len(receiver.outcomes) == 1
    assert len(set(receiver.requests)) == 1


async def test_a_notify_url_inside_the_cluster_is_refused_and_nothing_is_recorded(
    system: System, store: EventStore
) -> None:
    """Without LAYBY_WEBHOOKS_ALLOW_PRIVATE, a loopback notify_url is refused naming the field,
    and the log is unchanged."""
    before = await store.bounds()
    client = await system.sdk()
    with pytest.raises(BadInput) as raised:
        await client.ask_user("Where?", timeout=5, notify_url="https://127.0.0.1/hook")
    assert raised.value.field == "notify_url"
    assert str(raised.value).startswith("notify_url host '127.0.0.1' resolves to a private")
    with pytest.raises(BadInput, match="notify_url must use https"):
        await client.ask_user("Where?", timeout=5, notify_url="http://example.com/hook")
    assert await store.bounds() == before


async def test_the_webhook_view_is_the_askers_own(hooks: System, receiver: Receiver) -> None:
    """Another user identity, an unknown id and a question without a notify_url all get the
    same 404 from the webhook view."""
    client = await hooks.sdk()
    task = asyncio.create_task(client.ask_user("Mine?", timeout=30, notify_url=receiver.url))
    interaction_id = await _answer(hooks, "y")
    await task
    async with hooks.http(BOB) as http:
        other = await http.get(f"/api/interactions/{interaction_id}/webhook")
        unknown = await http.get("/api/interactions/00000000-0000-4000-8000-000000000000/webhook")
    assert other.status_code == unknown.status_code == 404
    assert other.json() == unknown.json()
    async with hooks.http(OPERATOR) as http:
        assert (await http.get(f"/api/interactions/{interaction_id}/webhook")).status_code == 200


async def test_without_signing_secrets_no_question_passes_through_a_webhook_consumer(
    system: System, store: EventStore
) -> None:
    """No secret, no notify_url: the delivery service runs no `delivery-webhooks` consumer, so a
    question costs no delivery to it (docs/webhooks.md#secrets)."""
    import nats.js.errors

    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Ship it?", timeout=30))
    await wait_listed(system, 1)
    await eventually(
        functools.partial(store.js.consumer_info, store.names.events_stream, store.names.durable("delivery")),
        "the delivery consumer to exist",
    )
    with pytest.raises(nats.js.errors.NotFoundError):
        await store.js.consumer_info(store.names.events_stream, store.names.durable("delivery-webhooks"))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
