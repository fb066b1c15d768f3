"""Channel-delivered questions (docs/asking.md#channel-checks, docs/aggregates/interaction.md#channel-delivery, docs/doors/callback.md#callback-url).

Real services. The built-in ``webhook`` channel posts each delivery to a local HTTP server that
plays a chat bridge: it records what arrived (and checks the signature), answers with the status
the test scripted, and relays the person's reply to the callback URL, as a real bridge would.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from layby.sdk import Client
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.errors import BadInput
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import Bridge
from tests.conftest import System
from tests.helpers import eventually, handled_by, wait_total


async def test_a_channel_question_reaches_the_channel_and_the_relayed_reply_answers_the_asker(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/aggregates/interaction.md#channel-delivery, docs/doors/callback.md#callback-url: the delivery carries the question and a callback URL under
    the public base URL; the reply POSTed to it is the asker's answer. The ticket is in no frame."""
    ask = asyncio.create_task(
        client.ask_user("Deploy window?", channel="ops", recipient="#deploys", options=["now"], timeout=30)
    )
    delivery = await bridge.next_delivery()
    assert delivery["question"] == "Deploy window?" and delivery["answer_format"] == "text"
    assert delivery["recipient"] == "#deploys" and delivery["suggested_replies"] == ["now"]
    callback = delivery["callback_url"]
    ticket = callback.rsplit("/", 1)[1]
    assert callback == f"{chan.url}/api/interactions/callback/{ticket}" and len(ticket) == 43
    async with chan.http() as http:
        # The list is the projection, which may trail the delivery by a moment.
        async def projected() -> list[dict[str, Any]]:
            return list((await http.get("/api/interactions")).json()["data"]["items"])

        listed = await eventually(projected, "the question in the list", until=bool, retry=())
    assert listed[0]["channel"] == "ops" and listed[0]["recipient"] == "#deploys"
    assert ticket not in json.dumps(listed)
    async with httpx.AsyncClient() as http:
        assert (await http.post(callback, json={"answer": "after 18:00"})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "after 18:00"


async def test_a_client_without_a_public_base_url_asks_on_a_channel_the_services_deliver(
    chan: System, bridge: Bridge
) -> None:
    """A channel question's callback URL is the services' business: a client that knows no public
    base URL (a second terminal, a pod) asks on a channel, and the delivery carries the services'
    URL."""
    bare = await chan.sdk(public_base_url="")
    ask = asyncio.create_task(bare.ask_user("From a bare client?", channel="ops", timeout=30))
    delivery = await bridge.next_delivery()
    assert delivery["callback_url"].startswith(f"{chan.url}/api/interactions/callback/")
    async with httpx.AsyncClient() as http:
        assert (await http.post(delivery["callback_url"], json={"answer": "yes"})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "yes"


async def test_media_reach_the_channel_as_absolute_urls(chan: System, client: Client, bridge: Bridge) -> None:
    """docs/asking.md#media-on-channels (S000): media are forwarded; an inline image is sent as its absolute
    served URL under the public base URL, which the public media door serves."""
    from tests.integration.test_media import PNG, PNG_URI

    media = [
        {"kind": "image", "url": PNG_URI, "caption": "A dot"},
        {"kind": "link", "url": "https://x.example/a"},
    ]
    ask = asyncio.create_task(client.ask_user("See this?", channel="ops", media=media, timeout=30))
    delivery = await bridge.next_delivery()
    image, link = delivery["media"]
    assert image["url"].startswith(f"{chan.url}/api/interactions/media/") and image["caption"] == "A dot"
    assert link == {"kind": "link", "url": "https://x.example/a"}
    async with httpx.AsyncClient() as http:
        assert (await http.get(image["url"])).content == PNG
        assert (await http.post(delivery["callback_url"], json={"answer": "yes"})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "yes"


async def test_select_confirm_and_form_questions_carry_their_payload_and_take_typed_replies(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/aggregates/interaction.md#channel-delivery: options exactly for select, schema exactly for form; a confirm tap (empty
    POST) records true; the form's callback page renders its schema."""
    schema = {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}
    pick = asyncio.create_task(
        client.ask_user("Region?", channel="ops", answer_format="select", options=["eu", "us"], timeout=30)
    )
    picked = await bridge.next_delivery(1)
    confirm = asyncio.create_task(client.ask_user("Go?", channel="ops", answer_format="confirm", timeout=30))
    confirmed = await bridge.next_delivery(2)
    form = asyncio.create_task(
        client.ask_user("Seats?", channel="ops", answer_format="form", schema=schema, timeout=30)
    )
    formed = await bridge.next_delivery(3)
    assert picked["options"] == ["eu", "us"] and "schema" not in picked
    assert formed["schema"] == schema and "options" not in formed
    assert "options" not in confirmed and "schema" not in confirmed
    async with httpx.AsyncClient() as http:
        assert (await http.post(picked["callback_url"], json={"answer": "mars"})).status_code == 400
        assert (await http.post(picked["callback_url"], json={"answer": "eu"})).status_code == 200
        assert (await http.post(confirmed["callback_url"])).status_code == 200
        page = await http.get(formed["callback_url"])
        assert 'name="seats" data-kind=integer required' in page.text
        assert (await http.post(formed["callback_url"], json={"answer": {"seats": 3}})).status_code == 200
    assert await asyncio.wait_for(pick, 10) == "eu"
    assert await asyncio.wait_for(confirm, 10) is True
    assert await asyncio.wait_for(form, 10) == {"seats": 3}


async def test_retryable_failures_are_retried_until_the_channel_accepts(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/aggregates/interaction.md#delivery-attempts: a retryable failure (503, 429) is retried with backoff; the third
    attempt succeeds, every attempt carries the same interaction id."""
    bridge.statuses = [(503, {}), (429, {"Retry-After": "0"})]
    ask = asyncio.create_task(client.ask_user("Retry me?", channel="ops", timeout=30))
    third = await bridge.next_delivery(3)
    assert len({d["interaction_id"] for d in bridge.deliveries}) == 1
    async with httpx.AsyncClient() as http:
        assert (await http.post(third["callback_url"], json={"answer": "ok"})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "ok"


async def test_a_final_failure_raises_to_the_asker_and_its_ticket_answers_the_uniform_404(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/aggregates/interaction.md#delivery-failure: a non-retryable status fails on the first attempt; the question is
    pruned, the ask raises ChannelDeliveryError naming the channel, the ticket is dead."""
    bridge.statuses = [(400, {})]
    with pytest.raises(ChannelDeliveryError, match=r"webhook 'ops': the endpoint answered 400"):
        await asyncio.wait_for(client.ask_user("Refused?", channel="ops", timeout=30), 10)
    assert len(bridge.deliveries) == 1
    async with httpx.AsyncClient() as http:
        dead = await http.post(bridge.deliveries[0]["callback_url"], json={"answer": "late"})
    assert dead.status_code == 404 and dead.json() == {"error": "not found"}
    # The list is a projection: the removal reaches it on its own schedule, never later than this.
    await wait_total(chan, 0)


async def test_retries_stop_at_the_attempt_limit_and_never_outrun_the_budget(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/aggregates/interaction.md#delivery-attempts: at most 3 attempts in total; a retry_after longer than the remaining
    budget ends the retries at once."""
    bridge.statuses = [(503, {})] * 5
    with pytest.raises(ChannelDeliveryError, match="503"):
        await asyncio.wait_for(client.ask_user("Down?", channel="ops", timeout=30), 10)
    assert len(bridge.deliveries) == 3
    bridge.statuses = [(429, {"Retry-After": "3600"})]
    with pytest.raises(ChannelDeliveryError, match="429"):
        await asyncio.wait_for(client.ask_user("Busy?", channel="ops", timeout=30), 10)
    assert len(bridge.deliveries) == 4


async def test_a_hung_send_is_cut_at_the_budget_and_an_untyped_plugin_fault_is_final(
    chan: System, client: Client
) -> None:
    """docs/aggregates/interaction.md#delivery-attempts: a hung deliver is cut at the remaining budget; a plugin raising anything
    but ChannelDeliveryError fails on the first attempt and the service keeps running."""
    with pytest.raises(ChannelDeliveryError, match=r"KeyError: 'recipient_id'"):
        await asyncio.wait_for(client.ask_user("Crash?", channel="buggy", timeout=30), 10)
    with pytest.raises(Exception, match=r"stuck|did not finish|removed|timed out|no answer"):
        await asyncio.wait_for(client.ask_user("Hang?", channel="stuck", timeout=1), 10)
    assert not chan.tasks["delivery"].done()


async def test_channel_ask_rules_name_the_field_before_anything_is_stored(
    chan: System, client: Client
) -> None:
    """docs/asking.md#channel-checks, docs/asking.md#validated-before-anything-is-stored, docs/asking.md#channel-checks: unknown channel, link or verifier with a channel,
    a form to a channel without form delivery, a form outside the subset or refused by the
    plugin's hook, a recipient without a channel: each raises naming the field; nothing stored."""
    nested = {"type": "object", "properties": {"a": {"type": "object"}}}
    flat = {"type": "object", "properties": {k: {"type": "string"} for k in "abc"}}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"channel": "nope"}, "channel", "unknown channel 'nope'"),
        ({"recipient": "+4712345678"}, "recipient", "recipient requires a channel"),
        ({"channel": "ops", "recipient": "  "}, "recipient", "recipient must be non-blank"),
        (
            {"channel": "ops", "answer_format": "external", "link": "https://x/{callback_url}"},
            "link",
            "link is not allowed with a channel",
        ),
        (
            {"channel": "ops", "answer_format": "external", "verifier": {"name": "stripe"}},
            "verifier",
            "verifier is not allowed with a channel",
        ),
        (
            {"channel": "sms", "answer_format": "form", "schema": flat},
            "channel",
            "channel 'sms' does not deliver form questions",
        ),
        ({"channel": "ops", "answer_format": "form", "schema": nested}, "schema.properties.a", "scalar type"),
        (
            {"channel": "buggy", "answer_format": "form", "schema": flat},
            "schema",
            "channel 'buggy' refuses this form: at most 2 fields fit on this medium",
        ),
    ]
    for kwargs, where, message in cases:
        with pytest.raises(BadInput) as err:
            await client.ask_user("Rules?", timeout=5, **kwargs)
        assert err.value.field == where, kwargs
        assert message in err.value.message, (kwargs, err.value.message)
    async with chan.http() as http:
        assert (await http.get("/api/interactions")).json()["data"]["total"] == 0


async def test_an_external_question_on_a_channel_needs_no_link_and_its_tap_confirms(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/asking.md#links: external requires a link unless a channel is set; the person taps the
    callback link, the confirm page posts back, and the query parameters are the answer."""
    ask = asyncio.create_task(
        client.ask_user("Approve in the portal", channel="ops", answer_format="external")
    )
    delivery = await bridge.next_delivery()
    assert delivery["answer_format"] == "external"
    async with httpx.AsyncClient() as http:
        page = await http.get(delivery["callback_url"] + "?approved=yes")
        assert b"<form method=post>" in page.content
        assert (await http.post(delivery["callback_url"] + "?approved=yes")).status_code == 200
    assert await asyncio.wait_for(ask, 10) == {"approved": "yes"}


async def test_a_parked_run_is_answered_through_its_channel_and_a_failed_delivery_raises_in_the_run(
    chan: System, bridge: Bridge, db: Any
) -> None:
    """docs/aggregates/run.md#the-suspension-sentinel, docs/aggregates/interaction.md#delivery-failure: an async ask over a channel parks the run; the relayed reply
    resumes it. When delivery fails, the run resumes and the ask raises ChannelDeliveryError
    there, so the flow takes its own failure branch instead of waiting forever."""
    from datetime import UTC, datetime, timedelta

    import layby
    from tests.integration.test_parks import Workers, wait_status

    later = datetime.now(UTC) + timedelta(hours=1)

    def register(w: layby.Worker) -> None:
        @w.flow("page")
        async def page(who: str) -> dict[str, Any]:
            try:
                ok = await layby.ask_user(
                    f"Approve {who}?", answer_format="confirm", channel="ops", mode="async", expiry_at=later
                )
            except ChannelDeliveryError as exc:
                return {"undeliverable": str(exc)}
            return {"approved": ok}

    workers = Workers(chan)
    try:
        worker = await workers.new(register)
        await workers.serve(worker)
        run_id = await worker.start("page", "ada")
        delivery = await bridge.next_delivery()
        assert delivery["timeout_at"].startswith(later.strftime("%Y-%m-%dT%H:%M"))
        async with httpx.AsyncClient() as http:
            assert (await http.post(delivery["callback_url"])).status_code == 200
        row = await wait_status(db, run_id, "finished")
        assert json.loads(row["result"]) == {"approved": True}

        bridge.statuses = [(403, {})]
        refused = await worker.start("page", "bob")
        row = await wait_status(db, refused, "finished")
        result = json.loads(row["result"])
        assert "could not be delivered: webhook 'ops': the endpoint answered 403" in result["undeliverable"]
    finally:
        await workers.stop_all()


async def test_the_cli_asks_through_a_channel_and_reports_a_failed_delivery(
    chan: System, bridge: Bridge, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``layby ask --channel --recipient`` delivers; the relayed reply is printed. A failed
    delivery exits 1 with the channel's reason on stderr."""
    from layby import cli

    for key, value in {
        "LAYBY_URL": chan.url,
        "LAYBY_TOKEN": "op-token-0123456789abcdef",
        "LAYBY_NATS_URL": chan.settings.nats_url or "",
        "LAYBY_NAMESPACE": chan.settings.namespace,
        "INTERACTIONS_PUBLIC_BASE_URL": chan.url,
    }.items():
        monkeypatch.setenv(key, value)
    argv = ["ask", "Which host?", "--channel", "ops", "--recipient", "+4712345678", "--timeout", "30"]
    run = asyncio.create_task(asyncio.to_thread(cli.main, argv))
    delivery = await bridge.next_delivery()
    assert delivery["recipient"] == "+4712345678"
    async with httpx.AsyncClient() as http:
        assert (await http.post(delivery["callback_url"], json={"answer": "db-2"})).status_code == 200
    assert await asyncio.wait_for(run, 15) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == "db-2"
    bridge.statuses = [(410, {})]
    assert await asyncio.wait_for(asyncio.to_thread(cli.main, [*argv[:1], "Gone?", *argv[2:]]), 15) == 1
    assert "could not be delivered: webhook 'ops': the endpoint answered 410" in capsys.readouterr().err


async def test_a_hung_channel_holds_back_no_other_question(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """Deliveries are handled concurrently and acknowledged one by one: while one medium hangs
    (for as long as its question's budget), questions for other channels are delivered."""
    from tests.channel_plugins import HangingChannel

    hung = len(HangingChannel.started)
    stuck = asyncio.create_task(client.ask_user("Hang for long?", channel="stuck", timeout=60))
    await eventually(lambda: len(HangingChannel.started) > hung, "the hung send to start")
    ask = asyncio.create_task(client.ask_user("Meanwhile?", channel="ops", timeout=30))
    delivery = await bridge.next_delivery()
    assert delivery["question"] == "Meanwhile?"
    async with httpx.AsyncClient() as http:
        assert (await http.post(delivery["callback_url"], json={"answer": "fine"})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "fine"
    assert not stuck.done()
    stuck.cancel()
    # Done with it: the delivery service's shutdown would otherwise wait for it (up to 10 s).
    HangingChannel.release(HangingChannel.started[hung])


async def test_a_plugin_error_that_quotes_the_callback_url_never_carries_the_ticket(
    chan: System, client: Client, store: Any
) -> None:
    """docs/aggregates/interaction.md#tickets: the ticket appears in no event and reaches no asker, even when a
    plugin's failure message quotes the URL it was given."""
    with pytest.raises(ChannelDeliveryError) as err:
        await asyncio.wait_for(client.ask_user("Leak?", channel="leaky", timeout=30), 10)
    assert "the medium refused the button <callback_url>" in str(err.value)
    assert "/callback/" not in str(err.value)
    info = await store.js.stream_info(store.names.events_stream)
    for seq in range(1, info.state.last_seq + 1):
        raw = (await store.js.get_msg(store.names.events_stream, seq)).data or b""
        assert b"/callback/" not in raw


async def test_a_question_answered_during_a_retry_pause_gets_no_further_attempt(
    chan: System, client: Client, store: EventStore
) -> None:
    """docs/aggregates/interaction.md#delivery-attempts: retries are for questions still waiting; once one is answered (here in
    the inbox during the pause), the pending retry is dropped and the question is not failed."""
    from tests.channel_plugins import RetryLaterChannel

    ask = asyncio.create_task(client.ask_user("Busy medium?", channel="later", timeout=30))
    await eventually(lambda: RetryLaterChannel.calls, "the first delivery attempt")
    interaction_id = RetryLaterChannel.calls[-1]
    async with chan.http() as http:
        r = await http.post(f"/api/interactions/{interaction_id}/answer", json={"answer": "from the inbox"})
        assert r.status_code == 200
    assert await asyncio.wait_for(ask, 10) == "from the inbox"
    # The delivery settles (acknowledged) once its pause ends and it sees the answer.
    info = await handled_by(store, "delivery")
    assert info.num_ack_pending == 0
    assert RetryLaterChannel.calls.count(interaction_id) == 1
