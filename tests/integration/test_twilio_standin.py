"""The Twilio channel against the Twilio stand-in over loopback, through the official SDK: every
send passes Twilio's rules, errors come back as Twilio's envelopes and say whether to retry,
notifications are one text, and media fall back to links (docs/channels.md#twilio)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest

from layby_contracts.channels import (
    ChannelDeliveryError,
    ChannelInputError,
    ChannelNotification,
    Posted,
    Retraction,
)
from layby_contracts.events import MediaItem
from layby_server.chat.twilio import TwilioChannel
from tests.samples import channel_delivery as ask
from tests.standins.twilio import (
    ACCOUNT_SID,
    AUTH_TOKEN,
    NUMBER,
    SERVICE_SID,
    TwilioStandin,
    serve_twilio_standin,
)

pytestmark = pytest.mark.timeout(60)
PERSON = "+15551230001"


@pytest.fixture
async def standin() -> AsyncIterator[TwilioStandin]:
    async with serve_twilio_standin() as running:
        running.add_person(PERSON, whatsapp=True)
        yield running


@pytest.fixture
async def make(standin: TwilioStandin) -> AsyncIterator[Callable[..., TwilioChannel]]:
    made: list[TwilioChannel] = []

    def build(token: str = AUTH_TOKEN, **config: Any) -> TwilioChannel:
        base = {
            "account_sid": ACCOUNT_SID,
            "auth_token": "tok",
            "from": NUMBER,
            "public_url": "https://layby.example/api/channels/sms/events",
            "api_url": standin.api_url,
            "default_recipient": PERSON,
            "timeout": 5,
        }
        plugin = TwilioChannel(name="sms", config=base | config, secrets={"tok": token.encode()})
        made.append(plugin)
        return plugin

    yield build
    for plugin in made:
        await plugin.aclose()


async def test_a_question_is_one_message_through_the_sdk_and_posted_names_the_pair(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """The SDK's request reaches the stand-in (Basic credentials, form fields) and the SID comes back."""
    posted = await make().deliver(ask("confirm"))
    [sent] = standin.received(PERSON)
    assert posted == Posted(chat=f"{PERSON}|{NUMBER}", message=sent.sid)
    assert (sent.sender, sent.body) == (NUMBER, "Deploy now?\n\nReply yes or no.")
    assert standin.refused() == []


async def test_many_sends_at_once_share_the_event_loop(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """The asynchronous client never blocks the loop: 20 sends run together."""
    plugin = make()
    posted = await asyncio.gather(*(plugin.deliver(ask(question=f"Q{n}")) for n in range(20)))
    assert len({p.message for p in posted}) == 20 and len(standin.received(PERSON)) == 20


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [(20429, 429, True), (20500, 500, True), (21610, 400, False), (21408, 400, False)],
)
async def test_twilios_error_envelopes_say_whether_to_retry(
    standin: TwilioStandin, make: Callable[..., TwilioChannel], code: int, status: int, retryable: bool
) -> None:
    """Twilio's envelopes through the SDK: 429 and 5xx are retried, a recipient's or account's refusal is final; no credential in the message."""
    standin.fail_next(code, status=status, message=f"Error {code}")
    with pytest.raises(ChannelDeliveryError) as err:
        await make().deliver(ask())
    assert err.value.retryable is retryable
    assert str(err.value).startswith(f"twilio 'sms': error {code} ({status}): Error {code}")
    assert AUTH_TOKEN not in str(err.value)


async def test_a_wrong_token_an_unknown_number_and_an_unsubscribed_person_are_final(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """Bad credentials (20003), a number Twilio does not know (21211) and a person who replied STOP
    (21610) are final; the account's own failure is the medium's, not a refusal of the input."""
    with pytest.raises(
        ChannelDeliveryError, match=r"error 20003 \(401\): Authenticate — authentication failed"
    ) as err:
        await make(token="wrong").deliver(ask(recipient=PERSON))
    assert not err.value.retryable and not isinstance(err.value, ChannelInputError)
    with pytest.raises(ChannelInputError, match="error 21211"):
        await make().deliver(ask(recipient="+15559999999"))
    standin.stop(PERSON)
    with pytest.raises(
        ChannelInputError,
        match=r"error 21610 \(400\): Attempt to send to unsubscribed recipient — the recipient has unsubscribed \(replied STOP\)$",
    ):
        await make().deliver(ask())


async def test_whatsapp_outside_the_24_hour_window_is_final(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """A WhatsApp person who has not written in 24 hours cannot be sent free text (63016)."""
    standin.now += timedelta(hours=25)
    with pytest.raises(
        ChannelInputError,
        match=r"error 63016 \(400\): Failed to send freeform message because you are outside the allowed window\. — outside the 24-hour WhatsApp window: the person must write first$",
    ):
        await make(**{"from": f"whatsapp:{NUMBER}"}).deliver(ask())
    standin.form(f"whatsapp:{PERSON}", "hi")  # the person writes: the window reopens
    await make(**{"from": f"whatsapp:{NUMBER}"}).deliver(ask())
    assert [m.to for m in standin.received(f"whatsapp:{PERSON}")] == [f"whatsapp:{PERSON}"]


async def test_an_attachment_twilio_refuses_becomes_a_link_and_mms_attaches(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """With mms, an image is an attachment; when Twilio refuses it, it is a line in the text."""
    media = [MediaItem(kind="image", url="https://cdn.example/a.png", caption="Chart")]
    await make(mms=True).deliver(ask(media=media))
    image, question = standin.received(PERSON)
    assert (image.media, image.body, question.body) == (["https://cdn.example/a.png"], "Chart", "Deploy now?")
    standin.fail_next(21620, status=400, message="Invalid media URL(s)")
    await make(mms=True).deliver(ask(media=media))
    assert standin.received(PERSON)[-1].body == "Deploy now?\n\nChart: https://cdn.example/a.png"


async def test_a_messaging_service_sends_and_long_text_is_cut(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """A Messaging Service sends by its SID and is our side of the pair; a question over 1,600 characters is cut, keeping the options."""
    posted = await make(**{"from": SERVICE_SID}).deliver(ask("select", question="x" * 5000, options=["a"]))
    [sent] = standin.received(PERSON)
    assert posted.chat == f"{PERSON}|{SERVICE_SID}"
    assert (
        sent.body is not None
        and len(sent.body) == 1600
        and sent.body.endswith("Reply with the text of one option.")
    )
    assert standin.calls[0].params[1] == ("MessagingServiceSid", SERVICE_SID)


async def test_a_notification_is_one_text_and_returns_its_sid(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """notify sends the message as one text (cut to 1,600) and returns the message's SID."""
    sids = await make().notify(ChannelNotification(notification_id="n1", message="Build 42 is green"))
    [sent] = standin.received(PERSON)
    assert sids == [sent.sid] and sent.body == "Build 42 is green"
    with pytest.raises(ChannelInputError, match="a notification's options cannot be sent"):
        await make().notify(ChannelNotification(notification_id="n2", message="Pick", options=["a"]))


async def test_retract_and_say_send_follow_up_texts(
    standin: TwilioStandin, make: Callable[..., TwilioChannel]
) -> None:
    """Retraction and a conversation's reply are each one more text to the person."""
    plugin = make()
    posted = await plugin.deliver(ask())
    await plugin.retract(posted, Retraction(interaction_id="i", question="Deploy now?", outcome="removed"))
    await plugin.say(posted.chat, "Thanks!")
    assert [m.body for m in standin.received(PERSON)][1:] == [
        "“Deploy now?”: This question was withdrawn.",
        "Thanks!",
    ]
