"""One-way notifications on the built-in channels against their stand-ins, with the person's
taps coming back through the real door (docs/channels.md#notifications): the plugins' ``notify``
is called directly (one send attempt, the medium's ids back), the stand-ins play the provider
and the person, and what the person does with a notification is recorded on the messages
stream as an inbound message naming the notification. Provider refusals fail as deliveries do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from layby_contracts.channels import ChannelDeliveryError, ChannelInputError, ChannelNotification
from layby_contracts.events import ChannelMessageReceived, MediaItem
from layby_server.channel_webhook import WebhookChannel
from layby_server.chat.slack import SlackChannel
from layby_server.chat.telegram import TelegramChannel
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import BRIDGE_SECRET, Bridge
from tests.conftest import System
from tests.helpers import eventually
from tests.integration.chat_systems import (
    SLACK_SECRETS,
    TELEGRAM_HOOK,
    TELEGRAM_SECRETS,
    chat_system,
    door_url,
    telegram_and_slack,
)
from tests.standins import slack as slack_standin
from tests.standins.slack import SlackStandin, serve_slack_standin
from tests.standins.telegram import TOKEN, TelegramStandin, serve_telegram_standin

pytestmark = pytest.mark.timeout(60)
PERSON = 515151
NID = "5b0f3c2a-9d1e-4f6a-8b7c-0e1d2c3b4a59"
CHANNEL = slack_standin.CHANNEL
FORM = {
    "type": "object",
    "required": ["rating"],
    "properties": {
        "rating": {"type": "integer", "title": "How did it go?"},
        "mood": {"type": "string", "enum": ["good", "bad"]},
        "again": {"type": "boolean"},
    },
}


@dataclass
class Stack:
    system: System
    store: EventStore
    slack: SlackStandin
    tg: TelegramStandin
    slack_plugin: SlackChannel
    tg_plugin: TelegramChannel


@pytest.fixture
async def stack(settings: Settings, store: EventStore, db: Any) -> AsyncIterator[Stack]:
    async with telegram_and_slack(settings, PERSON) as (tg, sl, channels):
        door = door_url(settings)
        secrets = TELEGRAM_SECRETS | SLACK_SECRETS
        tg.point_webhook(f"{door}/api/channels/tg/events", TELEGRAM_HOOK)
        encoded = {name: value.encode() for name, value in secrets.items()}
        slack_config = {k: v for k, v in channels["slack"].items() if k != "plugin"}
        tg_config = {k: v for k, v in channels["tg"].items() if k != "plugin"}
        slack_plugin = SlackChannel(name="slack", config=slack_config, secrets=encoded)
        tg_plugin = TelegramChannel(name="tg", config=tg_config, secrets=encoded)
        try:
            async with chat_system(settings, channels, secrets) as system:
                yield Stack(system, store, sl, tg, slack_plugin, tg_plugin)
        finally:
            await slack_plugin.aclose()
            await tg_plugin.aclose()


async def _recorded(store: EventStore, channel: str) -> ChannelMessageReceived:
    """The last inbound message recorded for ``channel`` on the messages stream."""

    async def last() -> ChannelMessageReceived | None:
        found = await store.last(store.names.messages(channel), stream=store.names.messages_stream)
        return found.event if found is not None and isinstance(found.event, ChannelMessageReceived) else None

    return await eventually(last, f"an inbound message on {channel}", timeout=10)


def note(**fields: Any) -> ChannelNotification:
    return ChannelNotification(**({"notification_id": NID, "message": "The deploy finished."} | fields))


# -- Slack ---------------------------------------------------------------------------------------


async def test_a_slack_notification_posts_once_and_returns_its_ts(stack: Stack) -> None:
    """Text as plain sections, an image as an image block, another file as a link; the ts back."""
    media = [
        MediaItem(kind="image", url="https://files.example/graph.png", caption="Latency"),
        MediaItem(kind="document", url="https://files.example/report.pdf", filename="report.pdf"),
    ]
    ids = await stack.slack_plugin.notify(note(message="Deploy <done> & dusted", media=media))
    [msg] = stack.slack.messages(CHANNEL)
    assert ids == [msg.ts]
    assert msg.lines()[0] == "Deploy <done> & dusted" and msg.text == "Deploy &lt;done&gt; &amp; dusted"
    assert [b["type"] for b in msg.blocks] == ["section", "image", "context"]
    assert "report.pdf" in msg.lines()[-1] and not msg.has_controls()
    assert [c.method for c in stack.slack.calls] == ["chat.postMessage"]


async def test_a_tap_on_a_slack_notification_option_is_recorded_as_the_persons_message(stack: Stack) -> None:
    """The option's text, from the person, naming the notification; no question is touched."""
    [ts] = await stack.slack_plugin.notify(note(options=["Thanks", "Roll it back"]))
    msg = stack.slack.message(CHANNEL, ts)
    assert [b["text"]["text"] for b in msg.buttons()] == ["Thanks", "Roll it back"]
    resp = await stack.slack.tap(CHANNEL, ts, "Roll it back")
    assert resp.status_code == 200
    got = await _recorded(stack.store, "slack")
    assert (got.notification_id, got.text, got.reason, got.interaction_id) == (
        NID,
        "Roll it back",
        "unmatched",
        None,
    )
    assert (got.sender, got.chat, got.sender_name) == (
        slack_standin.PERSON,
        CHANNEL,
        slack_standin.PERSON_NAME,
    )
    assert not [c for c in stack.slack.calls if c.method == "chat.postMessage" and c.params.get("thread_ts")]


async def test_a_slack_notification_form_opens_a_modal_whose_submission_is_recorded_with_its_values(
    stack: Stack,
) -> None:
    """The *Open form* button opens the modal a form ask would (prefilled from ``data``) with no
    question behind it; the submission closes it and is recorded as the person's message."""
    [ts] = await stack.slack_plugin.notify(
        note(message="Rate the deploy", schema=FORM, data={"values": {"mood": "good"}})
    )
    [opener] = stack.slack.message(CHANNEL, ts).buttons()
    assert opener["text"]["text"] == "Open form"
    assert (await stack.slack.tap(CHANNEL, ts, "Open form")).status_code == 200
    opened = stack.slack.view()
    assert [b["block_id"] for b in opened.view["blocks"][1:]] == ["rating", "mood", "again"]
    assert opened.view["title"]["text"] == "Rate the deploy"
    assert json.loads(opened.view["private_metadata"])["notification_id"] == NID
    assert opened.view["blocks"][2]["element"]["initial_option"]["value"] == "good"
    resp = await stack.slack.submit({"rating": "4", "mood": "bad", "again": True})
    assert resp.status_code == 200 and opened.closed
    got = await _recorded(stack.store, "slack")
    assert (got.notification_id, got.value, got.text, got.reason) == (
        NID, {"rating": 4, "mood": "bad", "again": True}, None, "unmatched"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("error", "status", "retry_after", "retryable"),
    [
        ("ratelimited", 429, 3, True),
        ("internal_error", 200, None, True),
        ("channel_not_found", 200, None, False),
        ("invalid_blocks", 200, None, False),
    ],
)
async def test_slack_refusals_fail_a_notification_as_retryable_or_final(
    error: str, status: int, retry_after: float | None, retryable: bool
) -> None:
    """One attempt: a rate limit (its Retry-After) or a Slack fault is retryable; a refusal of
    the message is a permanent input error naming Slack's code."""
    async with serve_slack_standin() as standin:
        plugin = SlackChannel(
            name="team",
            config={
                "bot_token": "b",
                "signing_secret": "s",
                "api_url": standin.api_url,
                "default_recipient": CHANNEL,
            },
            secrets={"b": slack_standin.BOT_TOKEN.encode(), "s": b"signing"},
        )
        standin.fail_next("chat.postMessage", error, status=status, retry_after=retry_after)
        try:
            with pytest.raises(ChannelDeliveryError, match=r"chat\.postMessage failed") as failed:
                await plugin.notify(note())
        finally:
            await plugin.aclose()
    assert failed.value.retryable is retryable
    assert isinstance(failed.value, ChannelInputError) is not retryable
    assert failed.value.retry_after == (float(retry_after) if retry_after else None)
    assert error in str(failed.value) or status == 429
    assert standin.messages(CHANNEL) == []


# -- Telegram ------------------------------------------------------------------------------------


async def test_a_telegram_notification_sends_its_files_then_its_text_and_returns_every_id(
    stack: Stack,
) -> None:
    media = [
        MediaItem(kind="image", url="https://files.example/graph.png", caption="Latency"),
        MediaItem(kind="link", url="https://runs.example/42", caption="Run"),
    ]
    ids = await stack.tg_plugin.notify(note(media=media, options=["Thanks"]))
    photo, text = stack.tg.messages(PERSON)
    assert ids == [str(photo.message_id), str(text.message_id)]
    assert (photo.kind, photo.caption) == ("photo", "Latency")
    assert text.text == "The deploy finished.\n\nRun: https://runs.example/42"
    assert text.buttons() == [{"text": "Thanks", "callback_data": f"n:{NID}:0"}]


async def test_a_tap_on_a_telegram_notification_option_is_recorded_and_acknowledged(stack: Stack) -> None:
    """The button's text from the person, naming the notification; the tap's spinner is
    stopped without a line (nothing was answered)."""
    [mid] = await stack.tg_plugin.notify(note(options=["Thanks", "Roll it back"]))
    resp = await stack.tg.tap(PERSON, mid, "Roll it back")
    assert resp.status_code == 200
    got = await _recorded(stack.store, "tg")
    assert (got.notification_id, got.text, got.reason, got.sender) == (
        NID,
        "Roll it back",
        "unmatched",
        str(PERSON),
    )

    async def acknowledged() -> bool:
        return not stack.tg.unanswered_taps()

    await eventually(acknowledged, "the tap acknowledged", timeout=10)
    assert stack.tg.taps[-1].answer is None
    assert stack.tg.message(PERSON, mid).buttons()  # a notification's buttons stay


@pytest.mark.parametrize(
    ("code", "description", "retryable", "retry_after"),
    [
        (429, None, True, 4.0),
        (500, None, True, None),
        (400, "Bad Request: chat not found", False, None),
        (403, "Forbidden: bot was blocked by the user", False, None),
    ],
)
async def test_telegram_refusals_fail_a_notification_as_retryable_or_final(
    code: int, description: str | None, retryable: bool, retry_after: float | None
) -> None:
    async with serve_telegram_standin() as tg:
        tg.add_person(PERSON)
        plugin = TelegramChannel(
            name="tg",
            config={
                "bot_token": "b",
                "secret_token": "h",
                "api_url": tg.api_url,
                "default_recipient": PERSON,
            },
            secrets={"b": TOKEN.encode(), "h": TELEGRAM_HOOK.encode()},
        )
        tg.fail_next(
            "sendMessage", code=code, description=description, retry_after=4 if code == 429 else None
        )
        try:
            with pytest.raises(ChannelDeliveryError) as failed:
                await plugin.notify(note())
        finally:
            await plugin.aclose()
    assert (failed.value.retryable, failed.value.retry_after) == (retryable, retry_after)
    assert isinstance(failed.value, ChannelInputError) is not retryable
    assert TOKEN not in str(failed.value)


# -- webhook -------------------------------------------------------------------------------------


async def test_the_webhook_posts_a_signed_notification_a_bridge_tells_from_a_delivery(bridge: Bridge) -> None:
    """The bridge checks the signature (as for deliveries) and reads ``kind``."""
    plugin = WebhookChannel(
        name="ops", config={"url": bridge.url, "secret": "bridge"}, secrets={"bridge": BRIDGE_SECRET.encode()}
    )
    try:
        assert await plugin.notify(note(options=["ok"], recipient="#ops")) == []
        bridge.statuses = [(503, {"Retry-After": "2"})]
        with pytest.raises(ChannelDeliveryError, match="answered 503") as failed:
            await plugin.notify(note())
    finally:
        await plugin.aclose()
    assert bridge.deliveries[0] == {
        "kind": "notification",
        "notification_id": NID,
        "message": "The deploy finished.",
        "recipient": "#ops",
        "options": ["ok"],
    }
    assert (failed.value.retryable, failed.value.retry_after) == (True, 2.0)
