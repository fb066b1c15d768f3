"""The ``whatsapp`` plugin against the Cloud API stand-in, without the rest of the system: one-way
notifications (text, media, templates), Graph's errors as the plugin maps them, and the
stand-in's own checks, which refuse what WhatsApp refuses (docs/channels.md#whatsapp)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from layby_contracts.channels import (
    ChannelDeliveryError,
    ChannelInputError,
    ChannelNotification,
    ChannelTemplate,
    InboundRequest,
)
from layby_contracts.events import MediaItem
from layby_server.chat.whatsapp import WhatsAppChannel, webhook
from tests.standins.whatsapp import (
    APP_SECRET,
    FLOW_ID,
    PHONE_NUMBER_ID,
    TOKEN,
    VERIFY_TOKEN,
    GraphError,
    WhatsAppStandin,
    serve_whatsapp_standin,
)

pytestmark = pytest.mark.timeout(30)
PERSON = "491512345678"


@pytest.fixture
async def wa() -> AsyncIterator[WhatsAppStandin]:
    async with serve_whatsapp_standin() as standin:
        standin.add_person(PERSON)
        yield standin


def plugin(wa: WhatsAppStandin, token: str = TOKEN, **config: Any) -> WhatsAppChannel:
    secrets = {"t": token.encode(), "a": APP_SECRET.encode(), "v": VERIFY_TOKEN.encode()}
    base = {
        "access_token": "t",
        "app_secret": "a",
        "verify_token": "v",
        "phone_number_id": PHONE_NUMBER_ID,
        "api_url": wa.api_url,
        "default_recipient": PERSON,
        "flow_id": FLOW_ID,
    }
    return WhatsAppChannel(name="wa", config=base | config, secrets=secrets)


async def test_notify_text_is_one_message_and_its_wamid_is_returned(wa: WhatsAppStandin) -> None:
    ch = plugin(wa)
    [wamid] = await ch.notify(ChannelNotification(notification_id="n1", message="Deployed v2"))
    assert wa.message(wamid).text == "Deployed v2"
    async with httpx.AsyncClient(timeout=10, trust_env=False) as http:  # the inspection face
        shown = (await http.get(f"{wa.url}/_test/messages", params={"to": PERSON})).json()
    assert [(m["wamid"], m["from_business"], m["body"]["text"]["body"]) for m in shown] == [
        (wamid, True, "Deployed v2")
    ]
    await ch.aclose()


async def test_notify_media_is_one_message_per_item_then_the_text_with_link_lines(
    wa: WhatsAppStandin,
) -> None:
    ch = plugin(wa)
    media = [
        MediaItem(kind="image", url="https://files.example/graph.png", caption="Latency"),
        MediaItem(kind="document", url="https://files.example/report.pdf"),
        MediaItem(kind="link", url="https://status.example", caption="Status"),
    ]
    ids = await ch.notify(ChannelNotification(notification_id="n2", message="Incident closed", media=media))
    assert [wa.message(i).type for i in ids] == ["image", "document", "text"]
    assert wa.message(ids[0]).body["image"] == {
        "link": "https://files.example/graph.png",
        "caption": "Latency",
    }
    assert wa.message(ids[2]).text == "Incident closed\n\nStatus: https://status.example"
    await ch.aclose()


async def test_notify_a_template_by_name_language_and_body_parameters(wa: WhatsAppStandin) -> None:
    wa.approve_template("deploy_done", "en_US", placeholders=2)
    wa.window.clear()  # a template reaches a person outside the 24-hour window
    ch = plugin(wa)
    template = ChannelTemplate(name="deploy_done", language="en_US", parameters=["v2", "eu-west"])
    [wamid] = await ch.notify(
        ChannelNotification(notification_id="n3", message="fallback", template=template)
    )
    sent = wa.message(wamid).body["template"]
    assert sent["components"][0]["parameters"] == [
        {"type": "text", "text": "v2"},
        {"type": "text", "text": "eu-west"},
    ]
    await ch.aclose()


async def test_an_unknown_template_is_refused_for_good_naming_it(wa: WhatsAppStandin) -> None:
    ch = plugin(wa)
    template = ChannelTemplate(name="no_such_template", language="en_US")
    with pytest.raises(ChannelInputError, match="template 'no_such_template'") as caught:
        await ch.notify(ChannelNotification(notification_id="n4", message="x", template=template))
    assert not caught.value.retryable and TOKEN not in str(caught.value)
    assert [c.code for c in wa.refused()] == [132001]
    await ch.aclose()


async def test_outside_the_24_hour_window_free_form_text_is_refused_for_good(wa: WhatsAppStandin) -> None:
    wa.window.clear()
    ch = plugin(wa)
    with pytest.raises(ChannelInputError, match="24 hours"):
        await ch.notify(ChannelNotification(notification_id="n5", message="hello"))
    await ch.aclose()


async def test_a_rate_limit_and_a_server_fault_are_retryable_a_bad_token_is_final(
    wa: WhatsAppStandin,
) -> None:
    ch = plugin(wa)
    note = ChannelNotification(notification_id="n6", message="x")
    wa.fail_next(130429)
    with pytest.raises(ChannelDeliveryError) as limited:
        await ch.notify(note)
    assert limited.value.retryable and limited.value.retry_after is not None
    wa.fail_next(131000, status=500)
    with pytest.raises(ChannelDeliveryError) as fault:
        await ch.notify(note)
    assert fault.value.retryable
    bad = plugin(wa, token="EAAG-not-the-token")
    with pytest.raises(ChannelDeliveryError, match="access token") as refused:
        await bad.notify(note)
    assert not refused.value.retryable and "EAAG-not-the-token" not in str(refused.value)
    await ch.aclose()
    await bad.aclose()


async def test_network_failure_is_retryable(wa: WhatsAppStandin) -> None:
    ch = plugin(wa, api_url="http://127.0.0.1:9")
    with pytest.raises(ChannelDeliveryError, match="cannot reach WhatsApp") as caught:
        await ch.notify(ChannelNotification(notification_id="n7", message="x"))
    assert caught.value.retryable
    await ch.aclose()


def test_the_standin_refuses_what_whatsapp_refuses(wa: WhatsAppStandin) -> None:
    """So a plugin that sent past a cap would fail the suite, not pass it."""
    base = {"messaging_product": "whatsapp", "to": PERSON, "type": "interactive"}

    def buttons(titles: list[str]) -> dict[str, Any]:
        rows = [{"type": "reply", "reply": {"id": str(i), "title": t}} for i, t in enumerate(titles)]
        return {**base, "interactive": {"type": "button", "body": {"text": "q"}, "action": {"buttons": rows}}}

    def listing(titles: list[str]) -> dict[str, Any]:
        rows = [{"id": str(i), "title": t} for i, t in enumerate(titles)]
        action = {"button": "Choose", "sections": [{"rows": rows}]}
        return {**base, "interactive": {"type": "list", "body": {"text": "q"}, "action": action}}

    wa.send_message(buttons(["a" * 20, "b", "c"]))
    wa.send_message(listing([str(i) for i in range(9)] + ["x" * 24]))
    for refused in (
        buttons(["a", "b", "c", "d"]),
        buttons(["a" * 21]),
        buttons(["same", "same"]),
        listing([str(i) for i in range(11)]),
        listing(["x" * 25]),
        {**buttons(["a"]), "interactive": {**buttons(["a"])["interactive"], "body": {"text": "q" * 1025}}},
        {**base, "type": "text", "text": {"body": "x" * 4097}},
        {**base, "type": "text", "text": {"body": "x"}, "surprise": 1},
    ):
        with pytest.raises(GraphError, match="Invalid parameter"):
            wa.send_message(refused)


async def test_the_standins_signature_is_what_the_plugin_verifies(wa: WhatsAppStandin) -> None:
    """The stand-in signs independently of the plugin (its own HMAC); the plugin's verifier is also
    pinned to a published vector in the unit tests."""
    ch = plugin(wa)
    note = wa.type_notification(PERSON, "Grüße")
    body = wa.body_of(note)
    assert b"\\u00fc" in body  # ASCII-escaped, as Meta sends it
    headers = {"x-hub-signature-256": wa.sign(body)}
    assert wa.sign(body) == webhook.signature(APP_SECRET.encode(), body)
    request = InboundRequest(method="POST", url="http://x", headers=headers, query={}, body=body)
    [reply] = (await ch.inbound(request)).replies
    assert reply.value == "Grüße"
    await ch.aclose()
