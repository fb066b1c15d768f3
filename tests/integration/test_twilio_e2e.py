"""Twilio end to end (docs/channels.md#twilio): the whole system with an SMS channel and a
WhatsApp channel pointed at the Twilio stand-in; the stand-in plays the person, signing each
reply as Twilio does and posting it to the door's inbound webhook."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec
import pytest
from httpx_sse import aconnect_sse

from layby.sdk import Client
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, serving
from tests.integration.chat_systems import chat_system, door_url, echo_route
from tests.standins.twilio import ACCOUNT_SID, AUTH_TOKEN, NUMBER, Sent, TwilioStandin, serve_twilio_standin

pytestmark = pytest.mark.timeout(90)
PERSON = "+15551230001"
WA_PERSON = "+15551230002"
WA = f"whatsapp:{WA_PERSON}"
PROXIED = "https://sms.layby.example/api/channels/sms/events"
"""The SMS channel's public URL: the door behind a TLS proxy, as Twilio is configured with it."""
TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response/>'
NOT_OPEN = "This question is no longer open."


@dataclass
class Phones:
    system: System
    tw: TwilioStandin


@pytest.fixture
async def phones(settings: Settings, store: EventStore, db: Any) -> AsyncIterator[Phones]:
    async with serve_twilio_standin() as tw:
        door = door_url(settings)
        tw.add_person(PERSON)
        tw.add_person(WA_PERSON, whatsapp=True, name="Grace")
        wa_url = f"{door}/api/channels/wa/events"
        tw.point(NUMBER, PROXIED, target=f"{door}/api/channels/sms/events")
        tw.point(f"whatsapp:{NUMBER}", wa_url)
        common = {"account_sid": ACCOUNT_SID, "auth_token": "twilio-token", "api_url": tw.api_url}
        channels = {
            "sms": {
                "plugin": "twilio",
                **common,
                "from": NUMBER,
                "public_url": PROXIED,
                "default_recipient": PERSON,
            },
            "wa": {"plugin": "twilio", **common, "from": f"whatsapp:{NUMBER}", "public_url": wa_url},
        }
        secrets = {"twilio-token": AUTH_TOKEN}
        async with chat_system(settings, channels, secrets, delivery_backoff_seconds=0.02) as system:
            yield Phones(system, tw)


@pytest.fixture
async def sdk(phones: Phones) -> Client:
    return await phones.system.sdk(public_base_url=phones.system.url)


async def _texts(tw: TwilioStandin, address: str, n: int) -> list[Sent]:
    """The first ``n`` messages we sent to ``address``, once they are there."""

    async def sent() -> list[Sent] | None:
        got = [m for m in tw.received(address) if m.body is not None]
        return got[:n] if len(got) >= n else None

    return await eventually(sent, f"{n} text(s) to {address}", timeout=10)


async def _line(tw: TwilioStandin, address: str, text: str) -> Sent:
    async def found() -> Sent | None:
        return next((m for m in tw.received(address) if m.body and text in m.body), None)

    return await eventually(found, f"a text saying {text!r} to {address}", timeout=10)


async def _inbound_messages(system: System, n: int) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = []
    async with (
        system.http() as http,
        aconnect_sse(http, "GET", "/api/messages/stream", headers={"Last-Event-ID": "0"}) as source,
    ):
        async for sse in source.aiter_sse():
            if sse.event == "message":
                got.append(msgspec.json.decode(sse.data))
                if len(got) == n:
                    break
    return got


async def test_a_text_question_shows_its_suggested_replies_as_a_hint_and_the_typed_text_answers(
    phones: Phones, sdk: Client
) -> None:
    """The question and its suggested replies are one SMS; the reply's text is the answer, and
    Twilio is answered with empty TwiML."""
    tw = phones.tw
    ask = asyncio.create_task(
        sdk.ask_user("Name the release", options=["v1", "v2"], channel="sms", timeout=30)
    )
    [question] = await _texts(tw, PERSON, 1)
    assert question.body == (
        "Name the release\n\nSuggested replies (or answer in your own words):\n1. v1\n2. v2"
    )
    assert question.sender == NUMBER
    response = await tw.text(PERSON, "v3-rc1")
    assert (response.status_code, response.text) == (200, TWIML)
    assert response.headers["content-type"].startswith("text/xml")
    assert await asyncio.wait_for(ask, 10) == "v3-rc1"


async def test_confirm_is_answered_by_a_yes_or_no_word(phones: Phones, sdk: Client) -> None:
    """A confirm reads "Reply yes or no."; a yes word (any case, a final "!") is true."""
    tw = phones.tw
    ask = asyncio.create_task(sdk.ask_user("Deploy now?", answer_format="confirm", channel="sms", timeout=30))
    [question] = await _texts(tw, PERSON, 1)
    assert question.body == "Deploy now?\n\nReply yes or no."
    await tw.text(PERSON, "Yes!")
    assert await asyncio.wait_for(ask, 10) is True


async def test_a_select_is_numbered_text_answered_by_the_option_text_and_a_number_gets_the_notice(
    phones: Phones, sdk: Client
) -> None:
    """A select lists its options and asks for the text of one; a typed number is not an option,
    so under retry the person is told what is expected and the question stays open."""
    tw = phones.tw
    ask = asyncio.create_task(
        sdk.ask_user(
            "Region?", answer_format="select", options=["eu-west", "us-east"], channel="sms", timeout=30
        )
    )
    [question] = await _texts(tw, PERSON, 1)
    assert question.body == "Region?\n\n1. eu-west\n2. us-east\n\nReply with the text of one option."
    await tw.text(PERSON, "2")
    notice = await _line(tw, PERSON, "does not fit")
    assert notice.body == (
        "That reply does not fit this question (answer must be one of ['eu-west', 'us-east']). "
        "Please answer again."
    )
    assert not ask.done()
    await tw.text(PERSON, "  us-east ")
    assert await asyncio.wait_for(ask, 10) == "us-east"


async def test_a_custom_mismatch_notice_and_bridge(phones: Phones, sdk: Client) -> None:
    """mismatch_notice replaces the built-in line (with {reason}); under bridge nothing is sent
    and the reply becomes an inbound message with reason mismatch."""
    tw = phones.tw
    ask = asyncio.create_task(
        sdk.ask_user(
            "Ship?", answer_format="confirm", channel="sms", mismatch_notice="Hm: {reason}", timeout=30
        )
    )
    await _texts(tw, PERSON, 1)
    await tw.text(PERSON, "maybe")
    assert (await _line(tw, PERSON, "Hm:")).body == "Hm: reply yes or no"
    await tw.text(PERSON, "no")
    assert await asyncio.wait_for(ask, 10) is False
    bridged = asyncio.create_task(
        sdk.ask_user("Sure?", answer_format="confirm", channel="sms", on_mismatch="bridge", timeout=30)
    )
    await _line(tw, PERSON, "Sure?")
    await tw.text(PERSON, "who is asking?")
    [message] = await _inbound_messages(phones.system, 1)
    assert (message["reason"], message["text"], message["sender"]) == ("mismatch", "who is asking?", PERSON)
    await tw.text(PERSON, "y")
    assert await asyncio.wait_for(bridged, 10) is True
    assert [m.body for m in tw.received(PERSON) if m.body and "fit" in m.body] == []


async def test_an_external_question_carries_its_callback_url(phones: Phones, sdk: Client) -> None:
    """An external question is the question and the callback URL, answered through that URL."""
    tw = phones.tw
    ask = asyncio.create_task(
        sdk.ask_user("Sign the contract", answer_format="external", channel="sms", timeout=30)
    )
    [question] = await _texts(tw, PERSON, 1)
    text, _, url = (question.body or "").rpartition("\n\nOpen: ")
    assert text == "Sign the contract" and url.startswith(f"{phones.system.url}/api/interactions/callback/")
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(url, json={"signed": True})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == {"signed": True}


async def test_a_form_to_twilio_is_refused_when_asked(phones: Phones, sdk: Client) -> None:
    """A form cannot be a text message: the ask is refused naming the channel, nothing is sent."""
    schema = {"type": "object", "properties": {"seats": {"type": "integer"}}}
    with pytest.raises(Exception, match="channel 'sms' does not deliver form questions"):
        await sdk.ask_user("Seats?", answer_format="form", schema=schema, channel="sms", timeout=30)
    assert phones.tw.calls == []


async def test_a_forged_webhook_is_401_and_a_replayed_one_is_taken_once(phones: Phones, sdk: Client) -> None:
    """A missing or wrong signature, one over another URL (the door's own, not the configured
    public one) and a tampered parameter are refused with 401 and answer nothing; the same
    MessageSid delivered twice is taken once."""
    tw, system = phones.tw, phones.system
    ask = asyncio.create_task(sdk.ask_user("Sure?", answer_format="confirm", channel="sms", timeout=30))
    await _texts(tw, PERSON, 1)
    form = tw.form(PERSON, "yes")
    hook = tw.webhooks[NUMBER]
    tampered = [(k, "no" if k == "Body" else v) for k, v in form]
    for response in [
        await tw.post(form, signature=""),
        await tw.post(form, signature="bm90IGEgc2lnbmF0dXJl"),
        await tw.post(form, signed_url=hook.target),
        await tw.post(tampered, signature=tw.sign(form)),
    ]:
        assert response.status_code == 401
        assert response.json() == {"error": "the request is not signed by the channel's provider"}
    assert not ask.done()
    assert (await tw.post(form)).text == TWIML
    assert await asyncio.wait_for(ask, 10) is True
    replay = await tw.post(form)
    assert (replay.status_code, replay.text) == (200, TWIML)
    await tw.text(PERSON, "yes again")  # a genuine late reply, after the replay
    await _line(tw, PERSON, NOT_OPEN)
    messages = await _inbound_messages(system, 1)
    assert [m["text"] for m in messages] == ["yes again"]
    assert [m.body for m in tw.received(PERSON)].count(NOT_OPEN) == 1


async def test_a_late_reply_is_kept_and_the_answered_question_gets_a_follow_up(
    phones: Phones, sdk: Client
) -> None:
    """A question answered in the inbox: the text copy cannot be edited, so the person gets a
    follow-up saying how it ended; a reply after that is a late inbound message and hears that
    the question is no longer open."""
    tw, system = phones.tw, phones.system
    ask = asyncio.create_task(sdk.ask_user("Ship?", answer_format="confirm", channel="sms", timeout=30))
    await _texts(tw, PERSON, 1)
    async with system.http() as http:

        async def listed() -> list[dict[str, str]] | None:
            # The text can arrive before the inbox's projection has the question.
            return (await http.get("/api/interactions")).json()["data"]["items"] or None

        [item] = await eventually(listed, "the question in the inbox")
        resp = await http.post(
            f"/api/interactions/{item['interaction_id']}/answer",
            json={"answer": False},
            headers={"Layby-Client": "inbox"},
        )
        assert resp.status_code == 200, resp.text
    assert await asyncio.wait_for(ask, 10) is False
    follow_up = await _line(tw, PERSON, "Answered by")
    assert follow_up.body is not None and follow_up.body.startswith("“Ship?”: Answered by ")
    assert follow_up.body.endswith(" in the inbox.")
    await tw.text(PERSON, "yes")
    await _line(tw, PERSON, NOT_OPEN)
    [late] = await _inbound_messages(system, 1)
    assert (late["reason"], late["text"], late["interaction_id"]) == ("late", "yes", item["interaction_id"])


async def test_a_status_callback_is_acknowledged_and_ignored(phones: Phones, sdk: Client) -> None:
    """Twilio's status callbacks carry no reply: empty TwiML, nothing answered."""
    tw = phones.tw
    ask = asyncio.create_task(sdk.ask_user("Sure?", answer_format="confirm", channel="sms", timeout=30))
    [question] = await _texts(tw, PERSON, 1)
    response = await tw.status_callback(question.sid)
    assert (response.status_code, response.text) == (200, TWIML)
    assert not ask.done()
    await tw.text(PERSON, "no")
    assert await asyncio.wait_for(ask, 10) is False


async def test_whatsapp_sends_the_image_as_an_attachment_and_the_reply_answers(
    phones: Phones, sdk: Client
) -> None:
    """On a WhatsApp sender the image goes first as its own attachment, then the question; the
    person's WhatsApp reply answers, recorded as from their whatsapp: address."""
    tw = phones.tw
    media = [
        {"kind": "image", "url": "https://cdn.example/chart.png", "caption": "Chart"},
        {"kind": "link", "url": "https://example.com/runbook", "caption": "Runbook"},
    ]
    ask = asyncio.create_task(
        sdk.ask_user(
            "Roll back?",
            answer_format="select",
            options=["yes, now", "tomorrow"],
            channel="wa",
            recipient=WA_PERSON,
            media=media,
            details=True,
            timeout=30,
        )
    )

    async def both() -> list[Sent] | None:
        got = tw.received(WA)
        return got if len(got) >= 2 else None

    image, question = await eventually(both, "the image and the question on WhatsApp", timeout=10)
    assert (image.media, image.body, image.sender) == (
        ["https://cdn.example/chart.png"],
        "Chart",
        f"whatsapp:{NUMBER}",
    )
    assert question.body == (
        "Roll back?\n\nRunbook: https://example.com/runbook\n\n1. yes, now\n2. tomorrow\n\n"
        "Reply with the text of one option."
    )
    await tw.text(WA, "Yes, now")  # not the option's exact text
    await _line(tw, WA, "does not fit")
    await tw.text(WA, "yes, now")
    details = await asyncio.wait_for(ask, 10)
    assert details.answer == "yes, now" and details.answered_by == f"wa:{WA}"


async def test_a_signed_body_too_long_is_400_and_one_over_the_doors_cap_is_413(
    phones: Phones, sdk: Client
) -> None:
    """A signed message whose Body is over Twilio's 1,600 characters is refused naming it, and a
    request over the door's body cap never reaches the plugin; neither answers the question."""
    tw = phones.tw
    ask = asyncio.create_task(sdk.ask_user("Sure?", answer_format="confirm", channel="sms", timeout=30))
    await _texts(tw, PERSON, 1)
    long = await tw.post(tw.form(PERSON, "y" * 1601))
    assert (long.status_code, long.json()) == (
        400,
        {"error": "unreadable sms request: Body is longer than 1600 characters"},
    )
    huge = await tw.post(tw.form(PERSON, "y" * 70_000))
    assert (huge.status_code, huge.json()) == (413, {"error": "payload too large"})
    assert not ask.done()
    await tw.text(PERSON, "yes")
    assert await asyncio.wait_for(ask, 10) is True


async def test_one_question_by_sms_and_whatsapp_the_first_reply_wins_and_both_get_the_follow_up(
    phones: Phones, sdk: Client
) -> None:
    """One question on both senders: replies on both at once, exactly one answers; the other is
    late; each phone gets the follow-up saying how the question ended."""
    tw = phones.tw
    ask = asyncio.create_task(
        sdk.ask_user(
            "Roll back?",
            answer_format="confirm",
            channel=["sms", "wa"],
            recipient={"sms": PERSON, "wa": WA_PERSON},
            timeout=30,
        )
    )
    await _texts(tw, PERSON, 1)
    await _texts(tw, WA, 1)
    await asyncio.gather(tw.text(PERSON, "yes"), tw.text(WA, "no"))
    answer = await asyncio.wait_for(ask, 10)
    for address in (PERSON, WA):
        follow_up = await _line(tw, address, "Answered by")
        winner = f"sms:{PERSON}" if answer is True else f"wa:{WA}"
        assert follow_up.body == f"“Roll back?”: Answered by {winner} via channel."
    [late] = await _inbound_messages(phones.system, 1)
    assert late["reason"] == "late" and late["channel"] == ("wa" if answer is True else "sms")


async def test_a_text_with_no_question_is_a_conversation_and_the_reply_is_a_text(
    phones: Phones, sdk: Client, store: EventStore
) -> None:
    """A text when no question was sent to the number visits the conversation route naming the
    channel (subject ``sms:<pair>``) and its result comes back as a text
    (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, tw = phones.system, phones.tw
    worker = await echo_route(system, sdk, store, "sms-chat", "sms")
    async with serving(worker):
        await tw.text(PERSON, "ping")
        reply = await _line(tw, PERSON, "got:")
    assert reply.body == f"sms:{PERSON}|{NUMBER} got: ping"


# -- notify_user on Twilio (docs/notifications.md#on-a-channel) ----------------------------------


async def _notify(system: System, body: dict[str, Any]) -> httpx.Response:
    async with system.http() as http:
        return await http.post("/api/notifications", json=body)


async def test_notify_user_texts_the_person_once_and_returns_the_sid(phones: Phones, sdk: Client) -> None:
    reply = await sdk.notify_user("The deploy finished.", channel="sms")
    assert reply.outcome == "sent" and reply.channel == "sms"
    [text] = await _texts(phones.tw, PERSON, 1)
    assert text.body == "The deploy finished." and reply.message_ids == [text.sid]


async def test_a_notification_with_media_or_options_is_501_on_twilio_and_nothing_is_sent(
    phones: Phones,
) -> None:
    """Twilio advertises no notification capability: refused before any send or record."""
    for extra in ({"options": ["OK"]}, {"media": [{"kind": "link", "url": "https://x.example/a"}]}):
        response = await _notify(phones.system, {"message": "hi", "channel": "sms", **extra})
        assert response.status_code == 501, response.text
    assert phones.tw.received(PERSON) == []


async def test_twilios_code_decides_between_400_502_and_503_and_nothing_is_recorded(phones: Phones) -> None:
    """An unsubscribed recipient (21610) is a final refusal of the input (400, naming it), an
    account that cannot authenticate (20003) a final failure of the medium (502), a rate limit
    (20429) worth another try later (503); nothing is recorded either way."""
    phones.tw.stop(PERSON)
    refused = await _notify(phones.system, {"message": "hi", "channel": "sms", "audience": "ops"})
    assert refused.status_code == 400, refused.text
    assert "unsubscribed" in refused.text
    phones.tw.fail_next(20003, status=401)
    final = await _notify(
        phones.system, {"message": "hi", "channel": "wa", "recipient": WA_PERSON, "audience": "ops"}
    )
    assert final.status_code == 502, final.text
    phones.tw.fail_next(20429, status=429)
    later = await _notify(
        phones.system, {"message": "hi", "channel": "wa", "recipient": WA_PERSON, "audience": "ops"}
    )
    assert later.status_code == 503, later.text
    async with phones.system.http() as http:
        feed = (await http.get("/api/notifications")).json()["data"]["notifications"]
    assert feed == []
