"""Conversations on a chat channel (docs/doors/hooks.md#conversations-on-a-chat-channel): a
person's message that answers no question visits the conversation route naming its channel, and
every outcome of the visit is posted back into the chat, once. The whole system runs with the
Slack plugin pointed at the Slack stand-in, which plays the person in a direct message."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import layby
from layby_contracts.events import ConversationReplied, Event, VisitRecorded, decode_event
from layby_domain.conversations import chat_subject
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, handled_by, route, save_door, serving
from tests.integration.chat_systems import (
    SLACK_SECRETS,
    chat_system,
    door_url,
    inbound_messages,
    slack_channel,
)
from tests.standins.slack import PERSON, SlackStandin, serve_slack_standin

pytestmark = pytest.mark.timeout(90)
DM = "D" + PERSON[1:]
"""The person's direct message with the bot, where a plain message answers no question."""
SUBJECT = chat_subject("slack", DM)
GREET = "{text, sender}"
RESUME = "if ($parked | length) > 0 then {id: $parked[0].id, payload: .text} else null end"


@pytest.fixture
async def slack(settings: Settings, store: EventStore, db: Any) -> AsyncIterator[tuple[System, SlackStandin]]:
    async with serve_slack_standin() as standin:
        standin.target = f"{door_url(settings)}/api/channels/slack/events"
        standin.add_channel(DM)
        async with chat_system(settings, {"slack": slack_channel(standin)}, SLACK_SECRETS) as system:
            yield system, standin


@pytest.fixture
async def flows(slack: tuple[System, SlackStandin]) -> AsyncIterator[None]:
    system, _ = slack
    worker = layby.Worker(await system.sdk(), settings=system.settings)

    @worker.flow("greeter")
    async def greeter(inp: dict[str, Any]) -> dict[str, Any]:
        return {"text": f"hello back, {inp['sender']}: {inp['text']}"}

    @worker.flow("approver")
    async def approver(_: dict[str, Any]) -> dict[str, Any]:
        answer = await layby.ask_user(
            "approve?", to="caller", expiry_at=datetime.now(UTC) + timedelta(minutes=10)
        )
        return {"text": f"you said {answer}"}

    async with serving(worker):
        yield


async def slack_route(system: System, store: EventStore, name: str, **spec: Any) -> None:
    """Save a conversation door on the ``slack`` channel and wait until routes can list it."""
    await route(system, store, name, kind="conversation", channel="slack", **spec)


async def events(store: EventStore, prefix: str) -> list[Event]:
    """Every event on the log whose subject starts with ``prefix``, in order."""
    info = await store.js.stream_info(store.names.events_stream)
    found = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        raw = await store.js.get_msg(store.names.events_stream, seq)
        if (raw.subject or "").startswith(prefix):
            found.append(decode_event(raw.data or b""))
    return found


async def said(standin: SlackStandin, count: int) -> list[str]:
    """The bot's messages in the direct message, once there are ``count`` of them."""
    return await eventually(
        lambda: [m.text for m in standin.messages(DM) if m.bot],
        f"{count} replies from the bot",
        until=lambda texts: len(texts) >= count,
        timeout=20,
    )


async def test_a_plain_message_starts_the_route_and_its_reply_is_posted_once(
    slack: tuple[System, SlackStandin], store: EventStore, flows: None
) -> None:
    """A message in a direct chat with no question pending starts the route's target on the
    message's input document, and its result's text is posted into that chat once, even when
    the delivery service sees the reply again (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, standin = slack
    await slack_route(system, store, "chat", target="greeter", start_expr=GREET)
    response = await standin.type_message(DM, "hi there")
    assert response.status_code == 200
    assert await said(standin, 1) == [f"hello back, {PERSON}: hi there"]

    [reply] = await events(store, store.names.conversation(SUBJECT))
    assert isinstance(reply, ConversationReplied)
    assert (reply.channel, reply.chat, reply.outcome.status) == ("slack", DM, "finished")
    visit, _settled = await events(store, store.names.visit(reply.visit_id or ""))
    assert isinstance(visit, VisitRecorded)
    assert (visit.kind, visit.door, visit.by, visit.action) == (
        "conversation",
        "chat",
        f"slack:{PERSON}",
        "start",
    )
    assert (visit.channel, visit.chat) == ("slack", DM)

    # A redelivery of the same reply (the same visit) finds its claim: nothing is posted twice.
    await store.append(store.names.conversation(SUBJECT), reply, msg_id="again", expected_seq=None)
    await handled_by(store, "delivery-replies")
    assert [m.text for m in standin.messages(DM) if m.bot] == [f"hello back, {PERSON}: hi there"]


async def test_a_caller_ask_is_asked_in_the_chat_and_the_next_message_resumes_it(
    slack: tuple[System, SlackStandin], store: EventStore, flows: None
) -> None:
    """A run that asks its caller shows the question in the chat; the person's next message
    resumes it through the route's resume_expr, the resumed run's result is posted back, and
    the chat has received that outcome, so the message after starts afresh
    (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, standin = slack
    await slack_route(system, store, "approvals", target="approver", resume_expr=RESUME)
    await standin.type_message(DM, "deploy please")
    assert await said(standin, 1) == ["approve?"]
    await standin.type_message(DM, "yes")
    assert await said(standin, 2) == ["approve?", "you said yes"]
    async with system.http() as http:
        await eventually(
            lambda: http.get(f"/api/subjects/{SUBJECT}/parked"),
            "the outcome taken off the subject",
            until=lambda r: r.json()["data"]["entries"] == [],
        )
    await standin.type_message(DM, "once more")
    assert await said(standin, 3) == ["approve?", "you said yes", "approve?"]


async def test_a_failed_post_is_retried_by_redelivery_and_posted_once(
    slack: tuple[System, SlackStandin], store: EventStore, flows: None
) -> None:
    """A post Slack refuses for now gives its claim back, so the reply's redelivery posts it:
    once (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, standin = slack
    await slack_route(system, store, "chat", target="greeter", start_expr=GREET)
    standin.fail_next("chat.postMessage", "internal_error", status=500)
    await standin.type_message(DM, "hi")
    assert await said(standin, 1) == [f"hello back, {PERSON}: hi"]
    assert [c.error for c in standin.errors()] == ["internal_error"]
    await handled_by(store, "delivery-replies")
    assert len([m for m in standin.messages(DM) if m.bot]) == 1


async def test_a_refused_visit_is_recorded_and_the_provider_is_acknowledged(
    slack: tuple[System, SlackStandin], store: EventStore, flows: None
) -> None:
    """A route whose program fails refuses the visit: Slack still gets its 200, the refusal is on
    the visit's log, nothing is posted, and the message stays an inbound message
    (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, standin = slack
    await slack_route(system, store, "broken", target="greeter", start_expr='error("no")')
    response = await standin.type_message(DM, "hi")
    assert response.status_code == 200

    async def refused() -> list[VisitRecorded]:
        visits = await events(store, f"{store.names.namespace}.ev.visit.")
        return [v for v in visits if isinstance(v, VisitRecorded)]

    [visit] = await eventually(refused, "the refused visit recorded", until=bool)
    assert visit.error is not None and "start_expr" in visit.error and visit.action == "none"
    [message] = await inbound_messages(system, 1)
    assert (message["reason"], message["text"], message["chat"]) == ("unmatched", "hi", DM)
    await handled_by(store, "delivery-replies")
    assert [m for m in standin.messages(DM) if m.bot] == []


async def test_a_route_takes_only_its_own_channel_and_the_first_matching_glob(
    slack: tuple[System, SlackStandin], store: EventStore, flows: None
) -> None:
    """Only doors naming the message's channel are routes, the first by name whose subjects glob
    matches the chat's subject (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, standin = slack
    await save_door(store, "a-other", kind="conversation", target="approver", channel="tg")
    await slack_route(system, store, "b-elsewhere", target="approver", subjects="slack:C*")
    await slack_route(system, store, "c-dm", target="greeter", subjects="slack:D*", start_expr=GREET)
    await slack_route(system, store, "d-later", target="approver")
    await standin.type_message(DM, "hi")
    assert await said(standin, 1) == [f"hello back, {PERSON}: hi"]
