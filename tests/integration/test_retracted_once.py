"""A retraction is sent once (docs/channels.md#retraction): on SMS and WhatsApp it is a new
message, so the person gets "Answered by …" once, whether the answer races the send, the
resolution is handled twice (a redelivery, two delivery replicas) or a process died after
claiming it. Real NATS; the delivery service's ``Deliverer`` driven in this process, its plugins
pointed at the Twilio and WhatsApp stand-ins, which keep every message the person got."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from layby_contracts.channels import Channel
from layby_contracts.events import InteractionAnswered, InteractionAsked
from layby_domain.clock import SystemClock
from layby_domain.verifiers import parse_secrets
from layby_server.channels import close_channels, load_channels
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore, Stored
from layby_services.delivery.deliver import Deliverer
from tests.integration.chat_systems import whatsapp_channel
from tests.samples import interaction_asked
from tests.standins.twilio import ACCOUNT_SID, AUTH_TOKEN, NUMBER, serve_twilio_standin
from tests.standins.whatsapp import TOKEN, serve_whatsapp_standin

pytestmark = pytest.mark.timeout(60)
PHONE = "+15551230001"
WA_ID = "491512345678"
ANSWERED = "Answered by ops in the inbox."


@dataclass
class Phone:
    """One channel to one person, and what the person's phone shows."""

    channel: str
    channels: dict[str, Channel]
    texts: Callable[[], list[str]]

    def retractions(self) -> list[str]:
        return [text for text in self.texts() if ANSWERED in text]


@pytest.fixture(params=["sms", "whatsapp"])
async def phone(request: pytest.FixtureRequest) -> AsyncIterator[Phone]:
    """An SMS channel (Twilio) or a WhatsApp channel (the Cloud API): each retracts by sending
    a new message."""
    if request.param == "sms":
        async with serve_twilio_standin() as tw:
            tw.add_person(PHONE)
            config = {
                "plugin": "twilio",
                "account_sid": ACCOUNT_SID,
                "auth_token": "twilio-token",
                "api_url": tw.api_url,
                "from": NUMBER,
                "public_url": "https://sms.layby.example/api/channels/sms/events",
                "default_recipient": PHONE,
            }
            channels = load_channels(json.dumps({"sms": config}), parse_secrets(f"twilio-token:{AUTH_TOKEN}"))
            try:
                yield Phone("sms", channels, lambda: [m.body or "" for m in tw.received(PHONE)])
            finally:
                await close_channels(channels)
        return
    async with serve_whatsapp_standin() as wa:
        wa.add_person(WA_ID)
        config = whatsapp_channel(wa, f"+{WA_ID}")
        secrets = parse_secrets(f"wa-token:{TOKEN},wa-app:app-secret,wa-verify:verify")
        channels = load_channels(json.dumps({"wa": config}), secrets)
        try:
            yield Phone("wa", channels, lambda: [m.text or "" for m in wa.sent(WA_ID)])
        finally:
            await close_channels(channels)


def _deliverer(store: Any, settings: Settings, phone: Phone) -> Deliverer:
    """One replica of the delivery service."""
    configured = msgspec.structs.replace(settings, public_base_url="https://layby.example")
    return Deliverer(store, configured, SystemClock(), phone.channels)


async def _ask(store: EventStore, channel: str) -> Stored:
    now = datetime.now(UTC)
    iid = str(uuid.uuid4())
    asked = interaction_asked(
        iid,
        now,
        group_id=iid,
        question="Ship the release?",
        timeout_at=now + timedelta(minutes=5),
        channel=channel,
    )
    seq = await store.append(store.names.ix(iid), asked, msg_id=f"ask-{iid}", expected_seq=0)
    return Stored(seq=seq, event=asked)


async def _answer(store: EventStore, asked: Stored) -> Stored:
    ev = asked.event
    assert isinstance(ev, InteractionAsked) and ev.channel is not None
    answered = InteractionAnswered(
        interaction_id=ev.interaction_id,
        group_id=ev.group_id,
        answered_by="ops",
        answered_at=datetime.now(UTC),
        answer="yes",
        via="inbox",
        channels=[ev.channel],
    )
    seq = await store.append(
        store.names.ix(ev.interaction_id),
        answered,
        msg_id=f"answer-{ev.interaction_id}",
        expected_seq=asked.seq,
    )
    return Stored(seq=seq, event=answered)


class _Recording:
    """The store as one replica sees it, calling ``then`` right after the replica has recorded
    where a question was posted (before it looks whether the question is still open)."""

    def __init__(self, store: EventStore, then: Callable[[], Awaitable[None]]) -> None:
        self._store = store
        self._then = then

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def put_chat(self, subject: str, value: dict[str, Any]) -> None:
        await self._store.put_chat(subject, value)
        if ".chat.sent." in subject:
            await self._then()


async def test_a_retraction_is_sent_once_on_the_normal_path(
    store: EventStore, settings: Settings, phone: Phone
) -> None:
    """A question answered after it was delivered gets one retraction message."""
    deliverer = _deliverer(store, settings, phone)
    asked = await _ask(store, phone.channel)
    await deliverer.on_asked(asked)
    assert len(phone.texts()) == 1 and phone.retractions() == []
    await deliverer.on_resolved(await _answer(store, asked))
    assert len(phone.retractions()) == 1


async def test_a_retraction_is_sent_once_when_the_answer_races_the_send(
    store: EventStore, settings: Settings, phone: Phone
) -> None:
    """Answered while its send is being recorded: the replica handling the answer and the one
    that sent the question both find the posted message, and only one of them retracts it."""
    other = _deliverer(store, settings, phone)
    asked = await _ask(store, phone.channel)

    async def answered_meanwhile() -> None:
        await other.on_resolved(await _answer(store, asked))

    sender = _deliverer(_Recording(store, answered_meanwhile), settings, phone)
    await sender.on_asked(asked)
    assert len(phone.retractions()) == 1
    assert len(phone.texts()) == 2  # the question and one retraction, nothing else


async def test_a_retraction_is_sent_once_when_the_resolution_is_redelivered(
    store: EventStore, settings: Settings, phone: Phone
) -> None:
    """The answered event handed over again (a redelivery after a restart) retracts nothing more."""
    deliverer = _deliverer(store, settings, phone)
    asked = await _ask(store, phone.channel)
    await deliverer.on_asked(asked)
    answered = await _answer(store, asked)
    await deliverer.on_resolved(answered)
    await deliverer.on_resolved(answered)
    assert len(phone.retractions()) == 1


async def test_a_retraction_is_sent_once_by_two_replicas_handling_the_same_resolution(
    store: EventStore, settings: Settings, phone: Phone
) -> None:
    """Two delivery replicas handling the same answered event at once send one retraction."""
    one, two = _deliverer(store, settings, phone), _deliverer(store, settings, phone)
    asked = await _ask(store, phone.channel)
    await one.on_asked(asked)
    answered = await _answer(store, asked)
    await asyncio.gather(one.on_resolved(answered), two.on_resolved(answered))
    assert len(phone.retractions()) == 1


async def test_a_retraction_claimed_by_a_process_that_died_before_sending_it_is_not_sent(
    store: EventStore, settings: Settings, phone: Phone
) -> None:
    """At most once: the claim is taken before the send and never given back, so a redelivery
    after a crash between the two sends nothing (a missing "Answered by" rather than a second)."""
    deliverer = _deliverer(store, settings, phone)
    asked = await _ask(store, phone.channel)
    await deliverer.on_asked(asked)
    answered = await _answer(store, asked)
    assert isinstance(answered.event, InteractionAnswered)
    claim = store.names.chat_retracted(answered.event.interaction_id, phone.channel)
    assert await store.claim_once(claim) is True  # the replica that died right after claiming
    await deliverer.on_resolved(answered)
    assert phone.retractions() == []
    assert len(phone.texts()) == 1
