"""One-way notifications on the built-in channels, without a network
(docs/channels.md#notifications): the flags each plugin sets, the webhook's body and its
optional answer, how a notification looks on Slack and Telegram within their limits, and how a
tap on a notification's control is read (it names the notification, never a question)."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from telegram import Update

from layby_contracts.channels import (
    NOTIFY_FLAGS,
    ChannelDeliveryError,
    ChannelInputError,
    ChannelNotification,
    ChannelTemplate,
    InboundMalformed,
    Notifier,
)
from layby_contracts.events import MediaItem
from layby_server.channel_webhook import SIGNATURE_HEADER, WebhookChannel
from layby_server.chat.slack.blocks import (
    BUTTON_VALUE,
    notification_blocks,
    pack_form,
    unpack_form,
)
from layby_server.chat.telegram import TelegramChannel, parse_callback
from layby_server.chat.telegram.rendering import CALLBACK_DATA_BYTES, note_id, render_notification
from layby_server.chat.telegram.updates import Tap, reply_of
from tests.standins.slack import SlackApiRefusal, _check_blocks
from tests.unit.test_slack_channel import assert_valid_blocks, block_actions, interaction
from tests.unit.test_slack_channel import channel as slack_channel
from tests.unit.test_telegram_channel import channel as telegram_channel
from tests.unit.test_telegram_channel import rows

pytestmark = pytest.mark.unit

NID = "0d9f6c1e-2b7a-4c3d-8e5f-6a7b8c9d0e1f"
FORM = {
    "type": "object",
    "required": ["rating"],
    "properties": {
        "rating": {"type": "integer", "title": "Rating"},
        "mood": {"type": "string", "enum": ["ok", "meh"]},
        "notes": {"type": "string"},
    },
}


def note(**fields: Any) -> ChannelNotification:
    return ChannelNotification(**({"notification_id": NID, "message": "The deploy finished."} | fields))


def webhook(handler: Callable[[httpx.Request], httpx.Response], **config: Any) -> WebhookChannel:
    plugin = WebhookChannel(
        name="ops",
        config={"url": "https://bridge.example/layby", "secret": "bridge", **config},
        secrets={"bridge": b"s3cret"},
    )
    plugin._http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return plugin


# -- flags ---------------------------------------------------------------------------------------


def flags(plugin: object) -> dict[str, bool]:
    return {field: bool(getattr(plugin, flag, False)) for field, flag in NOTIFY_FLAGS.items()}


def test_each_built_in_plugin_is_a_notifier_and_says_what_a_notification_may_carry() -> None:
    """The flags gate what a notification may carry on each channel: the webhook hands a bridge
    media, templates and options but has no way back for a form; Slack takes media, options and
    forms; Telegram media and options (a Telegram form needs a ticketed page); neither chat
    plugin has templates."""
    hook = WebhookChannel(name="ops", config={"url": "https://bridge.example/"}, secrets={})
    plugins = {"webhook": hook, "slack": slack_channel(), "telegram": telegram_channel()}
    assert all(isinstance(p, Notifier) for p in plugins.values())
    assert flags(hook) == {"media": True, "template": True, "options": True, "schema": False}
    assert flags(plugins["slack"]) == {"media": True, "template": False, "options": True, "schema": True}
    assert flags(plugins["telegram"]) == {"media": True, "template": False, "options": True, "schema": False}


# -- webhook -------------------------------------------------------------------------------------


async def test_the_webhook_posts_a_signed_notification_body_told_apart_by_its_kind() -> None:
    """The body is the notification's fields plus ``kind: notification`` (a delivery has no
    kind), signed as deliveries are; the template reaches the bridge as data."""
    seen: list[httpx.Request] = []

    def bridge(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    sent = note(
        recipient="#ops",
        template=ChannelTemplate(name="deploy_done", language="en", parameters=["api"]),
    )
    assert await webhook(bridge).notify(sent) == []
    [request] = seen
    assert json.loads(request.content) == {
        "kind": "notification",
        "notification_id": NID,
        "message": "The deploy finished.",
        "recipient": "#ops",
        "template": {"name": "deploy_done", "language": "en", "parameters": ["api"]},
    }
    digest = hmac.new(b"s3cret", request.content, hashlib.sha256).hexdigest()
    assert request.headers[SIGNATURE_HEADER] == f"sha256={digest}"


@pytest.mark.parametrize(
    ("answer", "ids"),
    [
        (b'{"message_ids": ["m1", 7]}', ["m1", "7"]),
        (b'{"message_ids": "m1"}', []),
        (b"[1, 2]", []),
        (b"not json", []),
        (b"", []),
    ],
)
async def test_the_webhook_returns_the_ids_its_bridge_answers_and_none_otherwise(
    answer: bytes, ids: list[str]
) -> None:
    """A bridge may answer ``{"message_ids": [...]}``; any other 2xx body means no ids."""
    plugin = webhook(lambda _: httpx.Response(200, content=answer))
    assert await plugin.notify(note(options=["ok"])) == ids


@pytest.mark.parametrize(
    ("status", "headers", "retryable", "retry_after"),
    [
        (503, {"Retry-After": "7"}, True, 7.0),
        (429, {}, True, None),
        (400, {}, False, None),
        (410, {}, False, None),
    ],
)
async def test_a_webhook_refusal_fails_the_notification_as_a_delivery_would(
    status: int, headers: dict[str, str], retryable: bool, retry_after: float | None
) -> None:
    """408, 425, 429 and 5xx are retryable (Retry-After read); any other status is final."""
    plugin = webhook(lambda _: httpx.Response(status, headers=headers))
    with pytest.raises(ChannelDeliveryError, match=f"the endpoint answered {status}") as failed:
        await plugin.notify(note())
    assert (failed.value.retryable, failed.value.retry_after) == (retryable, retry_after)


# -- Slack ---------------------------------------------------------------------------------------


def test_a_slack_notification_is_plain_text_media_and_option_buttons_within_block_kit() -> None:
    """The text as plain sections (no mention, no hidden link), images as image blocks and
    other media as links, each option a button naming the notification and carrying the
    option's text (a long option is cut on its button only)."""
    long = "x" * 200
    blocks = notification_blocks(
        note(
            message="<!channel> done",
            media=[MediaItem(kind="image", url="https://x.example/a.png"), MediaItem(kind="document", url="https://x.example/r.pdf", filename="r.pdf")],
            options=["Thanks", long],
        )
    )  # fmt: skip
    assert_valid_blocks(blocks)
    assert blocks[0] == {
        "type": "section",
        "text": {"type": "plain_text", "text": "<!channel> done", "emoji": True},
    }
    assert blocks[1]["type"] == "image" and "r.pdf" in json.dumps(blocks[2])
    buttons = blocks[-1]["elements"]
    assert [b["action_id"] for b in buttons] == [f"layby:say:{NID}:0", f"layby:say:{NID}:1"]
    assert [b["value"] for b in buttons] == ["Thanks", long]
    assert len(buttons[1]["text"]["text"]) == 75


def test_a_slack_form_rides_its_open_form_button_and_comes_back_whole() -> None:
    """The form's schema and data are packed into the button's value (Slack keeps nothing for
    Layby) and unpacked unchanged; anything else is not a form."""
    data = {"values": {"rating": 4}}
    packed = pack_form(FORM, data)
    blocks = notification_blocks(note(), packed)
    assert_valid_blocks(blocks)
    [button] = blocks[-1]["elements"]
    assert (button["action_id"], button["value"], button["text"]["text"]) == (
        f"layby:nform:{NID}",
        packed,
        "Open form",
    )
    assert unpack_form(packed) == (FORM, data)
    assert list(unpack_form(packed)[0]["properties"]) == ["rating", "mood", "notes"]  # type: ignore[index]
    for damaged in ("", "f1.", "f1.!!!", "x" + packed, packed[:-6], "f1." + "A" * BUTTON_VALUE):
        assert unpack_form(damaged) is None


async def test_an_option_slack_cannot_carry_on_a_button_is_refused_for_good_naming_it() -> None:
    """A button's value holds at most 2,000 characters (the stand-in refuses more, as Slack does);
    an option that long is refused before anything is posted."""
    fits = notification_blocks(note(options=["y" * BUTTON_VALUE]))
    assert_valid_blocks(fits)
    with pytest.raises(SlackApiRefusal):
        _check_blocks(notification_blocks(note(options=["y" * (BUTTON_VALUE + 1)])), 50)
    plugin = slack_channel(api_url="http://127.0.0.1:9/api/")  # never reached
    with pytest.raises(ChannelInputError, match=r"options\[1\] must be non-blank and at most 2000"):
        await plugin.notify(note(options=["ok", "y" * (BUTTON_VALUE + 1)]))


async def test_a_form_too_big_for_a_slack_button_or_a_modal_is_refused_for_good_naming_schema() -> None:
    """A form that cannot ride a button (2,000 characters packed) or that no modal can hold is a
    permanent refusal naming ``schema``; nothing is posted."""
    plugin = slack_channel(api_url="http://127.0.0.1:9/api/")  # never reached
    titles = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(90)]  # incompressible
    huge = {
        "type": "object",
        "properties": {f"f{n:03d}": {"type": "string", "title": t} for n, t in enumerate(titles)},
    }
    with pytest.raises(ChannelInputError, match=r"schema: the form \(with data\) is too large"):
        await plugin.notify(note(schema=huge))
    too_many = {"type": "object", "properties": {f"f{n}": {"type": "string"} for n in range(100)}}
    with pytest.raises(ChannelInputError, match=r"schema: a Slack modal holds at most 99 fields"):
        await plugin.notify(note(schema=too_many))
    with pytest.raises(ChannelInputError, match="template: Slack has no message templates"):
        await plugin.notify(note(template=ChannelTemplate(name="t", language="en")))
    with pytest.raises(ChannelInputError, match="no recipient"):
        await slack_channel(default_recipient=None).notify(note())


async def test_a_tap_on_a_slack_notification_option_is_the_option_text_from_the_person() -> None:
    """The tap names the notification (no question) and carries the option's text."""
    inbound = await slack_channel().inbound(interaction(block_actions(
        {"action_id": f"layby:say:{NID}:1", "type": "button", "value": "Roll back", "text": {"type": "plain_text", "text": "Roll back"}}
    )))  # fmt: skip
    [reply] = inbound.replies
    assert (reply.kind, reply.notification_id, reply.interaction_id, reply.index, reply.value) == (
        "tap", NID, None, 1, "Roll back"
    )  # fmt: skip
    assert (reply.sender, reply.chat, reply.event_id) == ("U0ALICE01", "C0DEPLOYS", "12.34.trigger")


async def test_an_open_form_tap_on_a_notification_opens_its_modal_and_is_no_reply() -> None:
    """The plugin opens a notification's modal itself (there is no question for the door to
    find), from the form its button carries; a button whose form is not Layby's opens nothing.
    Either way nothing is handed to the door to record."""
    plugin = slack_channel()
    calls: list[tuple[str, dict[str, Any]]] = []

    async def call(method: str, **params: Any) -> dict[str, Any]:
        calls.append((method, params))
        return {}

    plugin._call = call  # type: ignore[method-assign]
    damaged = block_actions({"action_id": f"layby:nform:{NID}", "type": "button", "value": "f1.damaged"})
    assert (await plugin.inbound(interaction(damaged))).replies == [] and calls == []
    good = block_actions(
        {"action_id": f"layby:nform:{NID}", "type": "button", "value": pack_form(FORM, None)}
    )
    good["message"] = {"type": "message", "ts": "1800000000.000100", "text": "Rate &lt;it&gt;"}
    assert (await plugin.inbound(interaction(good))).replies == []
    [(method, params)] = calls
    assert (method, params["trigger_id"]) == ("views.open", "12.34.trigger")
    assert params["view"]["title"]["text"] == "Rate <it>"
    assert json.loads(params["view"]["private_metadata"]) == {
        "notification_id": NID, "chat": "C0DEPLOYS", "message": "1800000000.000100"
    }  # fmt: skip
    assert [b.get("block_id") for b in params["view"]["blocks"][1:]] == ["rating", "mood", "notes"]


@pytest.mark.parametrize("action_id", [f"layby:say:{NID}", f"layby:say:{NID}:x", "layby:say::0"])
async def test_a_malformed_notification_option_is_refused(action_id: str) -> None:
    with pytest.raises(InboundMalformed, match="notification's option"):
        await slack_channel().inbound(interaction(block_actions({"action_id": action_id, "value": "ok"})))


async def test_a_slack_notification_form_submission_names_the_notification() -> None:
    """The modal's private metadata names the notification, so its submission is a reply with
    ``notification_id`` and the form's values (the door records it as a message)."""
    from layby_server.chat.slack.blocks import form_view

    view = form_view("Rate it", FORM, None, {"notification_id": NID, "chat": "C0DEPLOYS", "message": "1.2"})
    payload = {
        "type": "view_submission",
        "user": {"id": "U0ALICE01", "username": "alice"},
        "trigger_id": "9.9.t",
        "view": {**view, "id": "V1", "state": {"values": {
            "rating": {"value": {"type": "number_input", "value": "5"}},
            "mood": {"value": {"type": "static_select", "selected_option": {"value": "ok"}}},
            "notes": {"value": {"type": "plain_text_input", "value": None}},
        }}},
    }  # fmt: skip
    [reply] = (await slack_channel().inbound(interaction(payload))).replies
    assert (reply.kind, reply.notification_id, reply.interaction_id) == ("submitted", NID, None)
    assert (reply.value, reply.chat, reply.message) == ({"rating": 5, "mood": "ok"}, "C0DEPLOYS", "1.2")


# -- Telegram ------------------------------------------------------------------------------------


def test_a_telegram_notification_is_its_text_then_one_button_per_option_naming_it() -> None:
    """Callback data ``n:<notification id>:<index>`` within 64 bytes; files go before the text,
    link media are lines under it."""
    rendered = render_notification(
        note(
            options=["Thanks", "Roll back"],
            media=[MediaItem(kind="image", url="https://x.example/a.png"), MediaItem(kind="link", url="https://x.example/run", caption="Run")],
        )
    )  # fmt: skip
    assert rendered.text == "The deploy finished.\n\nRun: https://x.example/run"
    assert [m.kind for m in rendered.media] == ["image"]
    assert rows(rendered.keyboard) == [
        [{"text": "Thanks", "callback_data": f"n:{NID}:0"}],
        [{"text": "Roll back", "callback_data": f"n:{NID}:1"}],
    ]
    assert len(note_id(NID, 99).encode()) <= CALLBACK_DATA_BYTES


def test_a_telegram_notification_too_long_is_cut_and_options_that_cannot_be_buttons_are_lines() -> None:
    rendered = render_notification(note(message="é" * 5000, notification_id="n" * 70, options=["a", "b"]))
    assert rendered.keyboard is None
    assert rendered.text.endswith("…\n\n1. a\n2. b") and len(rendered.text.encode("utf-16-le")) // 2 == 4096


def test_notification_callback_data_is_told_apart_from_a_questions() -> None:
    assert parse_callback(f"n:{NID}:3") == Tap(interaction_id="", notification_id=NID, index=3)
    assert parse_callback(f"{NID}:3") == Tap(interaction_id=NID, index=3)
    assert parse_callback(f"n:{NID}:y") is None and parse_callback("n::1") is None


def _tap_update(data: str, keyboard: list[list[dict[str, Any]]] | None) -> Update:
    message: dict[str, Any] = {
        "message_id": 12,
        "date": 1_800_000_000,
        "chat": {"id": 42, "type": "private"},
        "text": "The deploy finished.",
    }
    if keyboard is not None:
        message["reply_markup"] = {"inline_keyboard": keyboard}
    else:  # Telegram withholds a message older than 48 hours: date 0, no content
        message = {"message_id": 12, "date": 0, "chat": {"id": 42, "type": "private"}}
    query = {"id": "q1", "from": {"id": 42, "is_bot": False, "first_name": "Ada"}, "chat_instance": "c", "data": data, "message": message}  # fmt: skip
    return Update.de_json({"update_id": 5, "callback_query": query}, None)


def test_a_telegram_notification_tap_is_the_buttons_text_from_the_person() -> None:
    """The tap's text is read from the tapped message's keyboard; on a message Telegram no
    longer shows the bot, the option's index is all that is known."""
    keyboard = [[{"text": "Thanks", "callback_data": f"n:{NID}:0"}], [{"text": "Roll back", "callback_data": f"n:{NID}:1"}]]  # fmt: skip
    reply = reply_of(_tap_update(f"n:{NID}:1", keyboard))
    assert reply is not None
    assert (reply.kind, reply.notification_id, reply.interaction_id, reply.index, reply.value) == (
        "tap", NID, None, 1, "Roll back"
    )  # fmt: skip
    assert (reply.chat, reply.message, reply.context) == ("42", "12", {"callback_query_id": "q1"})
    old = reply_of(_tap_update(f"n:{NID}:1", None))
    assert old is not None and old.value == {"option": 1} and old.notification_id == NID


async def test_telegram_refuses_a_template_a_form_or_no_recipient_for_good() -> None:
    plugin: TelegramChannel = telegram_channel()
    with pytest.raises(ChannelInputError, match="template: Telegram has no message templates"):
        await plugin.notify(note(template=ChannelTemplate(name="t", language="en")))
    with pytest.raises(ChannelInputError, match="schema: a form cannot be sent"):
        await plugin.notify(note(schema=FORM))
    with pytest.raises(ChannelInputError, match="no recipient"):
        await plugin.notify(note())
