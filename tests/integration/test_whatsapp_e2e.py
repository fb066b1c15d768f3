"""WhatsApp end to end (docs/channels.md#whatsapp): the whole system with the ``whatsapp`` plugin
pointed at the Cloud API stand-in, which checks every message against WhatsApp's documented
shapes and caps and plays the person, signing each notification with the app secret as Meta
does and posting it to the door's webhook."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from layby.sdk import Client
from layby_contracts.events import ChannelMessageReceived
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, serving
from tests.integration.chat_systems import (
    TELEGRAM_HOOK,
    TELEGRAM_SECRETS,
    WHATSAPP_SECRETS,
    answer_in_the_inbox,
    chat_system,
    door_url,
    echo_route,
    inbound_messages,
    telegram_channel,
    whatsapp_channel,
)
from tests.standins.whatsapp import (
    VERIFY_TOKEN,
    Stored,
    WhatsAppStandin,
    serve_whatsapp_standin,
)

pytestmark = pytest.mark.timeout(90)
PERSON = "491512345678"
TG_PERSON = 424242
FORM = {"type": "object", "properties": {"seats": {"type": "integer", "minimum": 1}}, "required": ["seats"]}


@dataclass
class Chat:
    system: System
    wa: WhatsAppStandin


@pytest.fixture
async def chat(settings: Settings, store: EventStore, db: Any) -> AsyncIterator[Chat]:
    async with serve_whatsapp_standin() as wa:
        wa.add_person(PERSON)
        channels = {
            "wa": whatsapp_channel(wa, f"+{PERSON}", api_version="v23.0", flow_id=next(iter(wa.flows))),
        }
        wa.target = f"{door_url(settings)}/api/channels/wa/events"
        async with chat_system(settings, channels, WHATSAPP_SECRETS, delivery_backoff_seconds=0.02) as system:
            yield Chat(system, wa)


@pytest.fixture
async def both(
    settings: Settings, store: EventStore, db: Any
) -> AsyncIterator[tuple[System, WhatsAppStandin, Any]]:
    """WhatsApp and Telegram at once, each on its stand-in."""
    from tests.standins.telegram import serve_telegram_standin

    async with serve_whatsapp_standin() as wa, serve_telegram_standin() as tg:
        door = door_url(settings)
        wa.add_person(PERSON)
        tg.add_person(TG_PERSON)
        channels = {"wa": whatsapp_channel(wa, PERSON), "tg": telegram_channel(tg, TG_PERSON)}
        wa.target = f"{door}/api/channels/wa/events"
        tg.point_webhook(f"{door}/api/channels/tg/events", TELEGRAM_HOOK)
        async with chat_system(
            settings, channels, WHATSAPP_SECRETS | TELEGRAM_SECRETS, delivery_backoff_seconds=0.02
        ) as system:
            yield system, wa, tg


@pytest.fixture
async def sdk(chat: Chat) -> Client:
    return await chat.system.sdk(public_base_url=chat.system.url)


async def _sent(wa: WhatsAppStandin, n: int = 1, *, kind: str | None = None) -> Stored:
    """The ``n``-th message sent to the person (of ``kind``: text or an interactive type)."""

    async def found() -> Stored | None:
        sent = [m for m in wa.sent(PERSON) if kind is None or kind in (m.type, m.interactive)]
        return sent[n - 1] if len(sent) >= n else None

    return await eventually(found, f"message {n} ({kind or 'any'}) sent to the person", timeout=10)


async def _texts(wa: WhatsAppStandin, containing: str, n: int = 1) -> list[Stored]:
    async def found() -> list[Stored]:
        return [m for m in wa.sent(PERSON) if m.type == "text" and containing in (m.text or "")]

    return await eventually(
        found, f"{n} text(s) with {containing!r}", until=lambda f: len(f) >= n, timeout=10
    )


def _ask(sdk: Client, question: str, **kw: Any) -> asyncio.Task[Any]:
    return asyncio.create_task(sdk.ask_user(question, channel="wa", timeout=30, **kw))


async def test_select_as_buttons_at_the_cap_answers_with_the_option_text_and_is_retracted_by_a_reply(
    chat: Chat, sdk: Client
) -> None:
    wa = chat.wa
    options = ["a" * 20, "Grüße aus Köln 🚀", "c"]
    ask = _ask(sdk, "Pick", answer_format="select", options=options)
    msg = await _sent(wa, kind="button")
    assert [b["title"] for b in msg.buttons()] == options
    assert options[1] not in json.dumps([b["id"] for b in msg.buttons()])
    assert (await wa.tap(msg.wamid, 1)).status_code == 200
    assert await asyncio.wait_for(ask, 10) == options[1]
    [retraction] = await _texts(wa, "Answered by wa:")
    assert retraction.reply_to == msg.wamid
    assert wa.refused() == []


@pytest.mark.parametrize(
    ("options", "shape"),
    [
        ([f"option {i}" for i in range(4)], "list"),
        (["b" * 21, "x"], "list"),
        ([f"o{i}" for i in range(9)] + ["r" * 24], "list"),
        ([f"o{i}" for i in range(11)], "text"),
        (["o1", "r" * 25], "text"),
    ],
    ids=["fourth-option", "button-title-21", "ten-rows-title-24", "eleventh-row", "row-title-25"],
)
async def test_select_past_the_button_caps_is_a_list_and_past_the_list_caps_numbered_text(
    chat: Chat, sdk: Client, options: list[str], shape: str
) -> None:
    wa = chat.wa
    ask = _ask(sdk, "Which one?", answer_format="select", options=options)
    msg = await _sent(wa)
    assert (msg.interactive or msg.type) == shape
    if shape == "list":
        assert [r["title"] for r in msg.rows()] == options
        await wa.pick(msg.wamid, len(options) - 1)
    else:
        assert msg.text is not None and msg.text.endswith("Reply with the text of one option.")
        await wa.type(PERSON, options[-1])
    assert await asyncio.wait_for(ask, 10) == options[-1]
    assert wa.refused() == []


async def test_a_body_past_1024_characters_is_numbered_text_and_a_reply_to_it_answers(
    chat: Chat, sdk: Client
) -> None:
    wa = chat.wa
    ask = _ask(sdk, "q" * 1025, answer_format="select", options=["eu", "us"])
    msg = await _sent(wa, kind="text")
    assert msg.text is not None and "1. eu\n2. us" in msg.text
    await wa.type(PERSON, "us", reply_to=msg.wamid)
    assert await asyncio.wait_for(ask, 10) == "us"


async def test_confirm_by_button_and_by_a_typed_yes_in_the_persons_chat(chat: Chat, sdk: Client) -> None:
    wa = chat.wa
    first = _ask(sdk, "Go?", answer_format="confirm")
    msg = await _sent(wa, kind="button")
    assert [b["title"] for b in msg.buttons()] == ["Yes", "No"]
    await wa.tap(msg.wamid, "No")
    assert await asyncio.wait_for(first, 10) is False
    second = _ask(sdk, "Really go?", answer_format="confirm")
    await _sent(wa, 2, kind="button")
    await wa.type(PERSON, "Yes!")
    assert await asyncio.wait_for(second, 10) is True


async def test_text_with_suggested_replies_answered_by_a_typed_reply_to_the_question(
    chat: Chat, sdk: Client
) -> None:
    wa = chat.wa
    ask = _ask(sdk, "Name the release", options=["v1"])
    msg = await _sent(wa, kind="button")
    await wa.type(PERSON, "v2-rc1", reply_to=msg.wamid)
    assert await asyncio.wait_for(ask, 10) == "v2-rc1"


async def test_a_mismatch_gets_the_notice_and_under_bridge_becomes_an_inbound_message(
    chat: Chat, sdk: Client
) -> None:
    wa, system = chat.wa, chat.system
    ask = _ask(
        sdk, "Which?", answer_format="select", options=["a", "b"], mismatch_notice="Pick a button ({reason})."
    )
    msg = await _sent(wa, kind="button")
    await wa.type(PERSON, "c")
    [notice] = await _texts(wa, "Pick a button (")
    assert not ask.done() and notice.reply_to is not None
    await wa.tap(msg.wamid, "b")
    assert await asyncio.wait_for(ask, 10) == "b"
    bridged = _ask(sdk, "Size?", answer_format="select", options=["S", "M"], on_mismatch="bridge")
    await _sent(wa, 2, kind="button")
    await wa.type(PERSON, "what sizes are there?")
    [frame] = await inbound_messages(system, 1)
    assert (frame["reason"], frame["text"], frame["channel"]) == ("mismatch", "what sizes are there?", "wa")
    assert not bridged.done()
    bridged.cancel()


async def test_a_form_is_a_flow_refused_values_come_back_as_a_fresh_flow_then_it_answers(
    chat: Chat, sdk: Client
) -> None:
    wa = chat.wa
    ask = _ask(sdk, "Seats?", answer_format="form", schema=FORM)
    flow = await _sent(wa, kind="flow")
    assert flow.flow()["flow_action_payload"]["data"]["fields"][0]["name"] == "seats"
    await wa.submit(flow.wamid, {"seats": 0})
    again = await _sent(wa, 2, kind="flow")
    assert again.text is not None and "Your last answer could not be accepted: " in again.text
    assert again.flow()["flow_token"] != flow.flow()["flow_token"]
    assert not ask.done()
    await wa.submit(again.wamid, {"seats": 4})
    assert await asyncio.wait_for(ask, 10) == {"seats": 4}


async def test_a_form_refused_after_five_fresh_flows_says_it_could_not_be_processed(
    chat: Chat, sdk: Client
) -> None:
    wa = chat.wa
    ask = _ask(sdk, "Seats?", answer_format="form", schema=FORM)
    for n in range(1, 7):
        flow = await _sent(wa, n, kind="flow")
        await wa.submit(flow.wamid, {"seats": "many"})
    [sorry] = await _texts(wa, "Sorry, your form could not be processed.")
    assert len([m for m in wa.sent(PERSON) if m.interactive == "flow"]) == 6  # the first and 5 resends
    assert sorry.reply_to is not None and not ask.done()
    ask.cancel()


async def test_an_external_question_is_a_link_button_to_its_page(chat: Chat, sdk: Client) -> None:
    wa = chat.wa
    ask = _ask(sdk, "Approve in the console", answer_format="external")
    msg = await _sent(wa, kind="cta_url")
    url = msg.body["interactive"]["action"]["parameters"]["url"]
    assert url.startswith(f"{chat.system.url}/api/interactions/callback/")
    ask.cancel()


async def test_a_stale_tap_and_a_malformed_tap_are_inbound_messages_never_answers(
    chat: Chat, sdk: Client
) -> None:
    wa, system = chat.wa, chat.system
    ask = _ask(sdk, "Restart?", answer_format="confirm")
    msg = await _sent(wa, kind="button")
    listed_id, answered = await answer_in_the_inbox(system, False)
    assert answered.status_code == 200
    assert await asyncio.wait_for(ask, 10) is False
    [retraction] = await _texts(wa, "in the inbox")
    assert retraction.reply_to == msg.wamid
    second = _ask(sdk, "Again?", answer_format="confirm")
    fresh = await _sent(wa, 2, kind="button")
    await wa.tap(msg.wamid, "Yes")  # the first question's button: stale
    await wa.tap(fresh.wamid, "Yes", button_id="Yes")  # no tap id: malformed
    late, unmatched = await inbound_messages(system, 2)
    assert (late["reason"], late["value"], late["interaction_id"]) == (
        "late",
        True,
        listed_id,
    )
    assert (unmatched["reason"], unmatched["text"]) == ("unmatched", "Yes")
    assert not second.done()
    await wa.tap(fresh.wamid, "Yes")
    assert await asyncio.wait_for(second, 10) is True


async def test_a_forged_webhook_is_401_and_nothing_is_recorded_and_a_replay_is_taken_once(
    chat: Chat, sdk: Client
) -> None:
    wa, system = chat.wa, chat.system
    ask = _ask(sdk, "Note?")
    msg = await _sent(wa)
    forged = wa.type_notification(PERSON, "forged", reply_to=msg.wamid)
    assert (await wa.send(forged, signature="")).status_code == 401
    assert (
        await wa.send(forged, signature=wa.sign(wa.body_of(forged), "not the app secret"))
    ).status_code == 401
    body = wa.body_of(forged)
    assert (await wa.send(body.replace(b"forged", b"Forged"), signature=wa.sign(body))).status_code == 401
    assert not ask.done()
    real = wa.type_notification(PERSON, "first words", reply_to=msg.wamid)
    assert (await wa.send(real)).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "first words"
    assert (await wa.send(real)).status_code == 200  # Meta redelivers: the same wamid
    await wa.type(PERSON, "after")
    [frame] = await inbound_messages(system, 1)
    assert frame["text"] == "after"  # neither the forgeries nor the replay recorded anything


async def test_the_handshake_statuses_template_buttons_and_the_body_cap(
    chat: Chat, sdk: Client, store: EventStore
) -> None:
    wa, system = chat.wa, chat.system
    answered = await wa.handshake(VERIFY_TOKEN, "8675309")
    assert (answered.status_code, answered.text) == (200, "8675309")
    assert answered.headers["content-type"].startswith("text/plain")
    assert (await wa.handshake("not-the-token")).status_code == 403
    ask = _ask(sdk, "Note?")
    msg = await _sent(wa)
    for status in ("sent", "delivered", "read", "failed"):
        assert (await wa.send(wa.status_notification(msg.wamid, status))).status_code == 200
    press = wa.template_button_notification(PERSON, msg.wamid, "stop-promos", "Stop")
    assert (await wa.send(press)).status_code == 200
    [frame] = await inbound_messages(system, 1)
    assert (frame["reason"], frame["text"]) == ("unmatched", "Stop")
    recorded = await store.last(store.names.messages("wa"), stream=store.names.messages_stream)
    assert recorded is not None and isinstance(recorded.event, ChannelMessageReceived)
    assert recorded.event.params == {"payload": "stop-promos"}
    big = b'{"entry": [], "pad": "' + b"x" * system.settings.max_body_bytes + b'"}'
    assert (await wa.send(big)).status_code == 413
    assert not ask.done()
    ask.cancel()


async def test_a_rate_limited_send_is_retried_and_a_refused_recipient_fails_the_ask(
    chat: Chat, sdk: Client
) -> None:
    wa = chat.wa
    wa.fail_next(130429)
    ask = _ask(sdk, "Still there?")
    await _sent(wa)
    assert [c.code for c in wa.refused()] == [130429]
    ask.cancel()
    from layby_contracts.channels import ChannelDeliveryError

    with pytest.raises(ChannelDeliveryError, match="24 hours"):
        await sdk.ask_user("Hello?", channel="wa", recipient="+4917000000", timeout=30)


async def test_the_door_refuses_a_handshake_on_a_channel_without_one(chat: Chat) -> None:
    async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
        missing = await http.get(
            f"{chat.system.url}/api/channels/nope/events", params={"hub.mode": "subscribe"}
        )
    assert missing.status_code == 404


async def test_one_question_on_whatsapp_and_telegram_the_first_reply_wins_and_the_other_is_retracted(
    both: tuple[System, WhatsAppStandin, Any],
) -> None:
    system, wa, tg = both
    sdk = await system.sdk(public_base_url=system.url)
    ask = asyncio.create_task(
        sdk.ask_user("Roll back?", answer_format="confirm", channel=["wa", "tg"], timeout=30)
    )
    wa_msg = await _sent(wa, kind="button")

    async def tg_msg() -> Any:
        found = [m for m in tg.messages(TG_PERSON) if m.from_bot]
        return found[0] if found else None

    telegram = await eventually(tg_msg, "the Telegram copy", timeout=10)
    await asyncio.gather(wa.tap(wa_msg.wamid, "Yes"), tg.tap(TG_PERSON, telegram.message_id, "No"))
    answer = await asyncio.wait_for(ask, 10)
    frames = await inbound_messages(system, 1)
    assert frames[0]["reason"] == "late"
    if answer is True:  # WhatsApp won: Telegram's copy is edited, its tap recorded as late
        assert frames[0]["channel"] == "tg"

        async def edited() -> bool:
            return not tg.message(TG_PERSON, telegram.message_id).keyboard

        await eventually(edited, "the Telegram copy retracted", timeout=10)
    else:  # Telegram won: WhatsApp's question gets a follow-up reply saying so
        assert answer is False and frames[0]["channel"] == "wa"
        [line] = await _texts(wa, "Answered by tg:")
        assert line.reply_to == wa_msg.wamid


async def test_a_message_to_no_question_is_a_conversation_and_the_reply_is_a_whatsapp_message(
    chat: Chat, sdk: Client, store: EventStore
) -> None:
    """A message when no question was sent to the person visits the route naming the channel,
    on the subject ``wa:<phone number>``, and the result comes back as a text message
    (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, wa = chat.system, chat.wa
    worker = await echo_route(system, sdk, store, "wa-chat", "wa")
    async with serving(worker):
        await wa.type(PERSON, "ping")
        [reply] = await _texts(wa, "got: ping")
    assert reply.text == f"wa:{PERSON} got: ping"


# -- notify_user on WhatsApp (docs/notifications.md#on-a-channel) --------------------------------


async def _notify(system: System, body: dict[str, Any]) -> httpx.Response:
    async with system.http() as http:
        return await http.post("/api/notifications", json=body)


async def _feed(system: System) -> list[dict[str, Any]]:
    async with system.http() as http:
        response = await http.get("/api/notifications")
    assert response.status_code == 200, response.text
    notes: list[dict[str, Any]] = response.json()["data"]["notifications"]
    return notes


async def test_notify_user_sends_an_approved_template_on_whatsapp_and_returns_its_id_at_once(
    chat: Chat, sdk: Client
) -> None:
    """One send, no question, no ticket: the template reaches the person and its wamid comes
    back; with no audience nothing is recorded to the feed."""
    chat.wa.approve_template("deploy_done", "en_US", placeholders=1)
    before = await _feed(chat.system)
    reply = await sdk.notify_user(
        "The deploy finished.",
        channel="wa",
        template={"name": "deploy_done", "language": "en_US", "parameters": ["v2.4"]},
    )
    assert reply.outcome == "sent" and reply.channel == "wa"
    [sent] = chat.wa.sent(PERSON)
    assert reply.message_ids == [sent.wamid] and sent.type == "template"
    assert sent.body["template"]["name"] == "deploy_done"
    assert await _feed(chat.system) == before


async def test_a_media_notification_over_the_door_sends_each_item_then_the_text(chat: Chat) -> None:
    response = await _notify(
        chat.system,
        {
            "message": "Latency graph attached.",
            "channel": "wa",
            "media": [{"kind": "image", "url": "https://files.example/graph.png", "caption": "p99"}],
        },
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"data": "notification sent via 'wa'"}
    assert [m.type for m in chat.wa.sent(PERSON)] == ["image", "text"]
    assert chat.wa.sent(PERSON)[1].text == "Latency graph attached."


async def test_quick_replies_on_whatsapp_are_501_before_anything_is_sent_or_recorded(chat: Chat) -> None:
    """WhatsApp does not advertise interactive notifications: refused before any send or record."""
    before = await _feed(chat.system)
    response = await _notify(
        chat.system, {"message": "Rate us", "channel": "wa", "options": ["Good", "Bad"], "audience": "ops"}
    )
    assert response.status_code == 501, response.text
    assert "does not support" in response.text
    assert chat.wa.sent(PERSON) == [] and await _feed(chat.system) == before


async def test_an_unknown_template_is_a_final_refusal_naming_it_and_nothing_is_recorded(chat: Chat) -> None:
    before = await _feed(chat.system)
    response = await _notify(
        chat.system,
        {
            "message": "x",
            "channel": "wa",
            "audience": "ops",
            "template": {"name": "no_such_template", "language": "en_US"},
        },
    )
    assert response.status_code == 400, response.text  # a permanent refusal of the input
    assert "no_such_template" in response.text
    assert chat.wa.sent(PERSON) == [] and await _feed(chat.system) == before


async def test_a_notification_form_is_a_flow_whose_submission_is_the_persons_message(chat: Chat) -> None:
    """An ask-less form: the Flow goes out, no question waits, and the person's submission is an
    inbound message naming the notification."""
    response = await _notify(chat.system, {"message": "Book your seats", "channel": "wa", "schema": FORM})
    assert response.status_code == 200, response.text
    [flow] = [m for m in chat.wa.sent(PERSON) if m.interactive == "flow"]
    submitted = await chat.wa.submit(flow.wamid, {"seats": 3})
    assert submitted.status_code == 200
    [message] = await inbound_messages(chat.system, 1)
    assert message["reason"] == "unmatched" and message["value"] == {"seats": 3}
    assert "notification_id" in message and "interaction_id" not in message
