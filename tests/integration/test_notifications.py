"""One-way notifications end to end (docs/notifications.md): the SDK's ``notify_user`` and the
door's ``/api/notifications`` against the running system, on small test channels whose
capabilities and failures are configured (``tests.channel_plugins.NotifyingChannel``)."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import msgspec
import pytest

from layby import cli
from layby.sdk import Client
from layby_contracts.errors import (
    BadInput,
    ChannelFailedError,
    ChannelUnavailableError,
    CrossIdentityAudienceError,
    UnsupportedError,
)
from layby_domain.clock import ManualClock
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import NotifyingChannel
from tests.conftest import ALICE, BOB, OPERATOR, System, start_system, stop_system
from tests.integration.test_nats_authorization import Secured, secured  # noqa: F401 - its fixture

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
CHANNELS = json.dumps(
    {
        "plain": {"plugin": "tests.channel_plugins:NotifyingChannel"},
        "rich": {
            "plugin": "tests.channel_plugins:NotifyingChannel",
            "flags": ["media", "template", "options", "schema"],
        },
        "busy": {"plugin": "tests.channel_plugins:NotifyingChannel", "fail": "retryable", "retry_after": 2.5},
        "busy-silent": {"plugin": "tests.channel_plugins:NotifyingChannel", "fail": "retryable"},
        "broken": {"plugin": "tests.channel_plugins:NotifyingChannel", "fail": "final"},
        "picky": {"plugin": "tests.channel_plugins:NotifyingChannel", "fail": "input"},
        "asks-only": {"plugin": "tests.channel_plugins:DeliverOnlyChannel"},
    }
)


@pytest.fixture
async def noti(
    settings: Settings, store: EventStore, db: asyncpg.Pool, clock: ManualClock
) -> AsyncIterator[System]:
    """The system with the notification test channels, served images under the door's own
    origin, on a manual clock."""
    configured = msgspec.structs.replace(
        settings, channels=CHANNELS, public_base_url=f"http://127.0.0.1:{settings.http_port}"
    )
    system = await start_system(configured, clock)
    try:
        yield system
    finally:
        await stop_system(system)


def unique(text: str = "note") -> str:
    return f"{text} {uuid.uuid4().hex[:8]}"


async def feed(system: System, token: str = OPERATOR) -> list[dict[str, Any]]:
    async with system.http(token) as http:
        response = await http.get("/api/notifications")
    assert response.status_code == 200, response.text
    notes: list[dict[str, Any]] = response.json()["data"]["notifications"]
    return notes


async def post(system: System, body: dict[str, Any], token: str = OPERATOR) -> Any:
    async with system.http(token) as http:
        return await http.post("/api/notifications", json=body)


# -- docs/notifications.md#the-feed -----------------------------------------------------------------


async def test_notify_user_with_no_channel_records_to_the_shared_feed_and_returns_at_once(
    noti: System,
) -> None:
    """With no channel a notification is recorded to the feed: an operator reads it in the shared
    feed with the server's id and time; a user whose audience it is not does not see it."""
    client = await noti.sdk()
    message = unique()
    reply = await client.notify_user(message, recipient="desk-7")
    assert reply.outcome == "recorded"
    notes = await feed(noti)
    assert [n["message"] for n in notes] == [message]
    entry = notes[0]
    assert entry["id"] == reply.notification_id
    assert entry["recipient"] == "desk-7"
    assert entry["audience"] is None
    assert entry["created_at"]
    assert await feed(noti, BOB) == []


async def test_the_door_records_with_no_channel_and_lists_newest_first(noti: System) -> None:
    """``POST /api/notifications`` without a channel answers ``notification recorded to the internal
    sink``; ``GET /api/notifications`` lists the feed newest first."""
    first, second = unique("first"), unique("second")
    for message in (first, second):
        response = await post(noti, {"message": message})
        assert response.status_code == 200, response.text
        assert response.json() == {"data": "notification recorded to the internal sink"}
    assert [n["message"] for n in await feed(noti)] == [second, first]


# -- docs/notifications.md#on-a-channel -------------------------------------------------------------------------


async def test_a_channel_send_is_one_attempt_and_records_nothing_without_an_audience(noti: System) -> None:
    """With a channel the notification is sent once, as the caller's identity; the reply carries the
    medium's ids; with no audience nothing is recorded."""
    client = await noti.sdk()
    message = unique()
    reply = await client.notify_user(message, channel="plain", recipient="+15550001")
    assert reply.outcome == "sent"
    assert reply.channel == "plain"
    [sent] = NotifyingChannel.with_message(message)
    assert reply.message_ids == NotifyingChannel.ids[sent.notification_id]
    assert sent.recipient == "+15550001"
    assert sent.sender_identity == "ops"
    assert not reply.recorded
    assert await feed(noti) == []


async def test_a_channel_send_with_an_audience_is_recorded_as_well(noti: System) -> None:
    """With an audience the in-app record is written as well: in the audience's own feed and the
    shared one; the door answers ``notification sent via '<channel>'``."""
    message = unique()
    response = await post(noti, {"message": message, "channel": "plain", "audience": "alice"})
    assert response.status_code == 200, response.text
    assert response.json() == {"data": "notification sent via 'plain'"}
    assert len(NotifyingChannel.with_message(message)) == 1
    [mine] = await feed(noti, ALICE)
    assert (mine["message"], mine["audience"]) == (message, "alice")
    assert [n["message"] for n in await feed(noti)] == [message]
    assert await feed(noti, BOB) == []


async def test_a_restricted_callers_audience_is_clamped_so_its_channel_sends_are_recorded(
    noti: System,
) -> None:
    """A user's audience is clamped to its own id: its channel send with no audience is recorded to
    its own feed."""
    alice = await noti.sdk(ALICE)
    message = unique()
    reply = await alice.notify_user(message, channel="plain")
    assert (reply.outcome, reply.recorded) == ("sent", True)
    [mine] = await feed(noti, ALICE)
    assert (mine["message"], mine["audience"]) == (message, "alice")


async def test_a_cross_identity_audience_is_403_and_nothing_is_sent(noti: System) -> None:
    """A user naming another identity's audience is refused (403) before anything is sent."""
    message = unique()
    response = await post(noti, {"message": message, "channel": "plain", "audience": "bob"}, ALICE)
    assert response.status_code == 403
    assert response.json()["error"] == "identity 'alice' may address notifications only to itself"
    alice = await noti.sdk(ALICE)
    with pytest.raises(CrossIdentityAudienceError):
        await alice.notify_user(message, audience="bob")
    assert NotifyingChannel.with_message(message) == []
    assert await feed(noti, BOB) == []
    assert await feed(noti) == []


# -- docs/notifications.md#what-a-channel-supports --------------------------------------------------------------


UNSUPPORTED = [
    ({"channel": "asks-only"}, "channel 'asks-only' does not support notifications", "channel"),
    (
        {"channel": "plain", "media": [{"kind": "image", "url": "https://example.com/a.png"}]},
        "channel 'plain' does not support media notifications",
        "media",
    ),
    (
        {"channel": "plain", "template": {"name": "order", "language": "en"}},
        "channel 'plain' does not support template notifications",
        "template",
    ),
    (
        {"channel": "plain", "options": ["Yes"]},
        "channel 'plain' does not support interactive notifications",
        "options",
    ),
    (
        {"channel": "plain", "schema": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "channel 'plain' does not support form notifications",
        "schema",
    ),
]


async def test_a_missing_capability_is_501_before_anything_is_recorded_or_sent(noti: System) -> None:
    """A channel that cannot notify, or lacks a field's capability flag, is 501 naming it — checked
    before any feed record, so the feed is unchanged and nothing was sent, even with an audience."""
    for body, error, field in UNSUPPORTED:
        message = unique()
        response = await post(noti, {"message": message, "audience": "alice", **body})
        assert response.status_code == 501, body
        assert response.json() == {"error": error, "field": field}
        assert NotifyingChannel.with_message(message) == []
    assert await feed(noti) == []
    assert await feed(noti, ALICE) == []


async def test_the_sdk_raises_unsupported_for_a_channel_that_cannot_notify(noti: System) -> None:
    """The SDK raises the service's ``UnsupportedError`` (the door's 501)."""
    client = await noti.sdk()
    with pytest.raises(UnsupportedError, match="does not support notifications"):
        await client.notify_user(unique(), channel="asks-only")


async def test_a_capable_channel_gets_every_field_and_inline_images_as_absolute_served_urls(
    noti: System,
) -> None:
    """A channel with the flags gets media, options and the form; an inline image is stored by
    reference and handed over as an absolute URL the media door serves."""
    client = await noti.sdk()
    message = unique()
    image = "data:image/png;base64," + base64.b64encode(PNG).decode()
    schema = {"type": "object", "properties": {"size": {"type": "string", "enum": ["S", "M"]}}}
    reply = await client.notify_user(
        message,
        channel="rich",
        media=[{"kind": "image", "url": image}],
        options=["Track", "Cancel"],
        schema=schema,
        data={"values": {"size": "M"}},
    )
    assert reply.outcome == "sent"
    assert len(reply.message_ids) == 2
    [sent] = NotifyingChannel.with_message(message)
    assert sent.options == ["Track", "Cancel"]
    assert sent.schema == schema
    assert sent.data == {"values": {"size": "M"}}
    assert sent.media is not None
    url = sent.media[0].url
    assert url.startswith(f"{noti.url}/api/interactions/media/")
    async with noti.http(None) as http:
        served = await http.get(url.removeprefix(noti.url))
    assert served.status_code == 200
    assert served.content == PNG


async def test_a_template_goes_to_a_channel_that_supports_it(noti: System) -> None:
    """A template reaches a channel with ``supports_template_notifications`` as given."""
    message = unique()
    template = {"name": "order_update", "language": "en_US", "parameters": ["42"]}
    response = await post(noti, {"message": message, "channel": "rich", "template": template})
    assert response.status_code == 200, response.text
    [sent] = NotifyingChannel.with_message(message)
    assert sent.template is not None
    assert (sent.template.name, sent.template.language, sent.template.parameters) == (
        "order_update",
        "en_US",
        ["42"],
    )


# -- docs/notifications.md#statuses: one attempt, the medium's failure mapped -----------------------------------


async def test_a_retryable_failure_is_503_with_retry_after_and_nothing_recorded(noti: System) -> None:
    """A retryable failure of the one attempt is 503 with the medium's pause as Retry-After; nothing
    is recorded even with an audience; the medium's own text is not echoed."""
    message = unique()
    response = await post(noti, {"message": message, "channel": "busy", "audience": "alice"})
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "3"
    assert response.json() == {
        "error": "channel 'busy' could not send the notification now; try again later",
        "field": "channel",
    }
    assert "token-abc" not in response.text
    assert len(NotifyingChannel.with_message(message)) == 1
    assert await feed(noti) == []
    assert await feed(noti, ALICE) == []


async def test_the_sdk_raises_channel_unavailable_with_retry_after_when_known(noti: System) -> None:
    """The SDK raises ``ChannelUnavailableError`` carrying the medium's ``retry_after`` (None when it
    named none)."""
    client = await noti.sdk()
    with pytest.raises(ChannelUnavailableError) as busy:
        await client.notify_user(unique(), channel="busy")
    assert busy.value.retry_after == 2.5
    with pytest.raises(ChannelUnavailableError) as silent:
        await client.notify_user(unique(), channel="busy-silent")
    assert silent.value.retry_after is None
    response = await post(noti, {"message": unique(), "channel": "busy-silent"})
    assert response.status_code == 503
    assert "Retry-After" not in response.headers


async def test_a_final_failure_is_502_and_nothing_recorded(noti: System) -> None:
    """A permanent failure of the one attempt is 502; nothing is recorded; the SDK raises
    ``ChannelFailedError``."""
    message = unique()
    response = await post(noti, {"message": message, "channel": "broken", "audience": "ops"})
    assert response.status_code == 502
    assert response.json() == {
        "error": "channel 'broken' refused to send the notification (a permanent failure)",
        "field": "channel",
    }
    assert await feed(noti) == []
    client = await noti.sdk()
    with pytest.raises(ChannelFailedError):
        await client.notify_user(unique(), channel="broken")


async def test_a_permanent_input_refusal_is_400(noti: System) -> None:
    """The medium's refusal of the input's shape (``ChannelInputError``) is 400 naming the channel."""
    response = await post(noti, {"message": unique(), "channel": "picky"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "channel 'picky' refused the notification: the medium refuses this recipient",
        "field": "channel",
    }


BAD_INPUT = [
    ({"message": "hi", "channel": "nope"}, 400, "unknown channel 'nope' (known: ", "channel"),
    ({"message": "  "}, 400, "message must be a non-blank string", "message"),
    ({"message": "hi", "options": ["a"]}, 400, "options needs a channel", "options"),
    (
        {"message": "hi", "sender_identity": "ceo"},
        400,
        "sender_identity is not accepted",
        "sender_identity",
    ),
    ({"message": 5}, 400, "invalid body: Expected `str`, got `int`", "message"),
    ({"channel": "rich"}, 400, "invalid body: Object missing required field `message`", "message"),
    (
        {"message": "hi", "colour": "red"},
        400,
        "invalid body: Object contains unknown field `colour`",
        None,
    ),
]


async def test_bad_input_is_400_naming_the_field_and_records_nothing(noti: System) -> None:
    """Bad input is a 400 naming the field, and nothing is recorded."""
    for body, status, error, field in BAD_INPUT:
        response = await post(noti, body)
        assert response.status_code == status, body
        assert response.json()["error"].startswith(error), response.json()
        assert response.json().get("field") == field
    assert await feed(noti) == []


async def test_the_sdk_refuses_bad_arguments_before_sending(noti: System) -> None:
    """The SDK checks the arguments itself: a blank message raises ``BadInput`` naming it."""
    client: Client = await noti.sdk()
    with pytest.raises(BadInput) as refused:
        await client.notify_user(" ")
    assert refused.value.field == "message"


# -- docs/notifications.md#the-feed: the ring and the rolling TTL ---------------------------------------------


@pytest.mark.settings(notifications_feed_max=5)
async def test_each_feed_keeps_only_its_newest_feed_max(noti: System) -> None:
    """The feed is a ring of INTERACTIONS_NOTIFICATIONS_FEED_MAX: the shared feed and an identity's
    own each keep their newest, newest first."""
    alice = await noti.sdk(ALICE)
    messages = [f"ring {i}" for i in range(8)]
    for message in messages:
        await alice.notify_user(message)
    expected = list(reversed(messages))[:5]
    assert [n["message"] for n in await feed(noti, ALICE)] == expected
    assert [n["message"] for n in await feed(noti)] == expected


async def test_the_ring_at_its_default_of_1000(noti: System) -> None:
    """At the default of 1000, the 1001st notification pushes the oldest out."""
    client = await noti.sdk()
    sem = asyncio.Semaphore(64)

    async def send(i: int) -> None:
        async with sem:
            await client.notify_user(f"n{i}")

    await asyncio.gather(*(send(i) for i in range(1000)))
    await client.notify_user("the last")
    notes = await feed(noti)
    assert len(notes) == 1000
    assert notes[0]["message"] == "the last"
    assert len({n["id"] for n in notes}) == 1000


async def test_an_identitys_feed_expires_a_ttl_after_its_newest_entry_and_the_shared_does_not(
    noti: System, clock: ManualClock
) -> None:
    """An identity's own feed carries a rolling TTL (30 days by default): each notification keeps the
    feed alive for another TTL; once its newest is older, it reads empty, and what came before is
    gone for good; the shared feed never expires."""
    ttl = noti.settings.notifications_feed_ttl_seconds
    alice = await noti.sdk(ALICE)
    await alice.notify_user("day 0")
    clock.advance(ttl - 60)
    await alice.notify_user("day 29")
    clock.advance(ttl - 60)
    assert [n["message"] for n in await feed(noti, ALICE)] == ["day 29", "day 0"]
    clock.advance(60)
    assert await feed(noti, ALICE) == []
    assert [n["message"] for n in await feed(noti)] == ["day 29", "day 0"]
    await alice.notify_user("a new start")
    assert [n["message"] for n in await feed(noti, ALICE)] == ["a new start"]


# -- docs/cli.md#notifications ---------------------------------------------------------------------------------


async def test_the_cli_notifies_and_lists_over_the_doors(
    noti: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``layby notifications notify`` posts to the door and prints its answer; ``layby notifications
    list --json`` prints the feed; a malformed JSON option exits 2 before anything is sent."""
    monkeypatch.setenv("LAYBY_URL", noti.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    message = unique("cli")
    assert await asyncio.to_thread(cli.main, ["notifications", "notify", message]) == 0
    assert capsys.readouterr().out.strip() == "notification recorded to the internal sink"
    code = await asyncio.to_thread(
        cli.main, ["notifications", "notify", unique(), "--channel", "rich", "--options", '["A", "B"]']
    )
    assert code == 0
    assert capsys.readouterr().out.strip() == "notification sent via 'rich'"
    assert await asyncio.to_thread(cli.main, ["notifications", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [n["message"] for n in listed["notifications"]] == [message]
    assert await asyncio.to_thread(cli.main, ["notifications", "list"]) == 0
    assert message in capsys.readouterr().out
    code = await asyncio.to_thread(
        cli.main, ["notifications", "notify", "x", "--channel", "rich", "--options", '"A"']
    )
    assert code == 2
    assert "--options must be a JSON list of strings" in capsys.readouterr().err
    code = await asyncio.to_thread(
        cli.main, ["notifications", "notify", "x", "--channel", "plain", "--options", '["A"]']
    )
    assert code == 1
    assert (
        "error (501): channel 'plain' does not support interactive notifications" in capsys.readouterr().err
    )


# -- docs/doors/inbox-page.md#notifications-feed ----------------------------------------------------------------


async def test_the_inbox_page_ships_a_notifications_section_filled_from_the_feed_door(noti: System) -> None:
    """The page has its Notifications section, and the module that fills it reads ``GET
    /api/notifications`` and sets text only; the page keeps its Content-Security-Policy."""
    async with noti.http(None) as http:
        page = await http.get("/")
        module = await http.get("/static/feed.js")
        entry = await http.get("/static/inbox.js")
    assert 'id="notifications"' in page.text
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert module.status_code == 200
    assert 'fetch("/api/notifications"' in module.text
    assert "innerHTML" not in module.text
    assert 'import "./feed.js";' in entry.text


# -- docs/security.md#nats-authorization --------------------------------------------------------------------------


async def test_notifications_work_under_nats_authorization(secured: Secured) -> None:  # noqa: F811 - the fixture
    """A user's token may send ``cmd.notify``, the ask service may write the feed and the door read
    it: every key stays within its rules (the fixture checks NATS's log for refusals)."""
    system = secured.system
    alice = await system.sdk(ALICE)
    assert (await alice.notify_user("from the sdk")).outcome == "recorded"
    response = await post(system, {"message": "from the door"}, ALICE)
    assert response.status_code == 200, response.text
    assert [n["message"] for n in await feed(system, ALICE)] == ["from the door", "from the sdk"]
    assert [n["message"] for n in await feed(system)] == ["from the door", "from the sdk"]
