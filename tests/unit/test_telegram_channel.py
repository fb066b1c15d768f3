"""The Telegram channel's own rules, without a network: settings, the webhook's secret token, how
each format is drawn, and what a tap's data may say (docs/channels.md#telegram)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from telegram import InlineKeyboardMarkup

from layby_contracts import channels
from layby_contracts.events import MediaItem
from layby_domain.clock import ManualClock
from layby_server.channels import load_channels
from layby_server.chat import telegram
from layby_server.chat.common import PICK_ONE
from layby_server.chat.telegram import TelegramChannel, parse_callback, render
from tests.samples import channel_delivery

pytestmark = pytest.mark.unit

TOKEN = "123456789:ABC-def_ghi"
HOOK = "hook_Secret-1"
SECRETS = {"bot": TOKEN.encode(), "hook": HOOK.encode()}
ID = "0b6c2f0e-6a43-4c1e-9d7e-1f2a3b4c5d6e"


def channel(**config: Any) -> TelegramChannel:
    return TelegramChannel(
        name="tg", config={"bot_token": "bot", "secret_token": "hook", **config}, secrets=SECRETS
    )


def delivery(answer_format: str = "text", **fields: Any) -> channels.ChannelDelivery:
    return channel_delivery(answer_format, **({"interaction_id": ID} | fields))


def rows(markup: InlineKeyboardMarkup | None) -> list[list[dict[str, Any]]]:
    assert markup is not None
    return [[button.to_dict() for button in row] for row in markup.inline_keyboard]


def request(body: bytes, headers: dict[str, str]) -> channels.InboundRequest:
    return channels.InboundRequest(
        method="POST",
        url="https://layby.example/api/channels/tg/events",
        headers=headers,
        query={},
        body=body,
    )


UPDATE = json.dumps(
    {
        "update_id": 7,
        "message": {
            "message_id": 3,
            "date": 1_790_000_000,
            "chat": {"id": 42, "type": "private"},
            "from": {"id": 42, "is_bot": False, "first_name": "Ada", "username": "ada"},
            "text": "yes",
        },
    }
).encode()


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"secret_token": "hook"}, "telegram needs bot_token: the name of a secret in LAYBY_WEBHOOK_SECRETS"),
        ({"bot_token": "bot"}, "telegram needs secret_token: the name of a secret in LAYBY_WEBHOOK_SECRETS"),
        (
            {"bot_token": "nope", "secret_token": "hook"},
            "telegram bot_token 'nope' is not in LAYBY_WEBHOOK_SECRETS",
        ),
        (
            {"bot_token": "hook", "secret_token": "hook"},
            "telegram bot_token 'hook' does not hold a bot token",
        ),
        (
            {"bot_token": "bot", "secret_token": "bad"},
            "telegram secret_token 'bad' must hold 1-256 letters, digits",
        ),
        ({"bot_token": "bot", "secret_token": "hook", "token": "x"}, "unknown telegram option 'token'"),
        (
            {"bot_token": "bot", "secret_token": "hook", "api_url": "api.telegram.org"},
            "telegram api_url must be an absolute http(s) URL",
        ),
        (
            {"bot_token": "bot", "secret_token": "hook", "file_url": "ftp://files"},
            "telegram file_url must be an absolute http(s) URL",
        ),
        (
            {"bot_token": "bot", "secret_token": "hook", "timeout": 0},
            "telegram timeout must be a positive number",
        ),
        (
            {"bot_token": "bot", "secret_token": "hook", "default_recipient": ""},
            "telegram default_recipient must be a chat id",
        ),
    ],
)
def test_a_bad_telegram_setting_is_refused_by_name_without_any_secret(
    config: dict[str, Any], message: str
) -> None:
    """Every setting is checked at start-up and named; the secrets' values never appear in the error."""
    secrets = {**SECRETS, "bad": b"has spaces and !"}
    with pytest.raises(ValueError) as err:
        TelegramChannel(name="tg", config=config, secrets=secrets)
    assert message in str(err.value)
    assert TOKEN not in str(err.value)
    assert "has spaces" not in str(err.value)


def test_the_registry_builds_a_telegram_channel_that_delivers_forms() -> None:
    """``"plugin": "telegram"`` loads the built-in plugin, which advertises form delivery."""
    raw = json.dumps(
        {
            "tg": {
                "plugin": "telegram",
                "bot_token": "bot",
                "secret_token": "hook",
                "default_recipient": 42,
                "timeout": 3,
            }
        }
    )
    [(name, plugin)] = load_channels(raw, SECRETS).items()
    assert name == "tg"
    assert isinstance(plugin, TelegramChannel)
    assert plugin.supports_form_delivery is True
    assert plugin.default_recipient == "42"
    assert plugin.api_url == "https://api.telegram.org/bot"


# -- the webhook's secret token -----------------------------------------------------------------


async def test_an_update_without_the_secret_token_is_refused() -> None:
    """Fail closed: no header, no update."""
    with pytest.raises(channels.InboundRefused):
        await channel().inbound(request(UPDATE, {"content-type": "application/json"}))


async def test_an_update_with_a_wrong_secret_token_is_refused() -> None:
    """A wrong secret token is refused before the body is read."""
    with pytest.raises(channels.InboundRefused):
        await channel().inbound(request(b"not even json", {telegram.SECRET_HEADER: HOOK + "x"}))


async def test_the_secret_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The header is checked with ``hmac.compare_digest`` (no timing hint of how much matched)."""
    seen: list[tuple[bytes, bytes]] = []

    def compare(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return a == b

    monkeypatch.setattr(telegram.hmac, "compare_digest", compare)
    inbound = await channel().inbound(request(UPDATE, {telegram.SECRET_HEADER: HOOK}))
    assert seen == [(HOOK.encode(), HOOK.encode())]
    assert inbound.replies == [
        channels.InboundReply(
            kind="typed",
            sender="42",
            sender_name="ada",
            chat="42",
            value="yes",
            event_id="7",
            context={"message_id": 3},
            direct=True,
        )
    ]


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"update_id": "x", "message": 5}'])
async def test_an_unreadable_update_after_authentication_is_malformed(body: bytes) -> None:
    """A verified request that is no Telegram Update is a 400, not an answer."""
    with pytest.raises(channels.InboundMalformed):
        await channel().inbound(request(body, {telegram.SECRET_HEADER: HOOK}))


async def test_updates_that_are_not_a_persons_text_are_acknowledged_and_ignored() -> None:
    """Edited messages, stickers and the bot's own messages carry no reply."""
    base = {"message_id": 3, "date": 1_790_000_000, "chat": {"id": 42, "type": "private"}}
    person = {"id": 42, "is_bot": False, "first_name": "Ada"}
    for update in (
        {
            "update_id": 1,
            "edited_message": {**base, "from": person, "text": "edit", "edit_date": 1_790_000_001},
        },
        {
            "update_id": 2,
            "message": {
                **base,
                "from": person,
                "sticker": {
                    "file_id": "f",
                    "file_unique_id": "u",
                    "width": 1,
                    "height": 1,
                    "is_animated": False,
                    "is_video": False,
                    "type": "regular",
                },
            },
        },
        {
            "update_id": 3,
            "message": {**base, "from": {"id": 9, "is_bot": True, "first_name": "B"}, "text": "x"},
        },
    ):
        inbound = await channel().inbound(
            request(json.dumps(update).encode(), {telegram.SECRET_HEADER: HOOK})
        )
        assert inbound.replies == []


# -- rendering ----------------------------------------------------------------------------------


def test_a_select_is_one_button_a_row_carrying_tap_ids_never_the_option_text() -> None:
    """Each option is a row whose callback data is ``<interaction id>:<index>``."""
    rendered = render(delivery("select", options=["blue", "green", "red"]), 42)
    assert rendered.text == "Deploy now?"
    assert rows(rendered.keyboard) == [
        [{"text": "blue", "callback_data": f"{ID}:0"}],
        [{"text": "green", "callback_data": f"{ID}:1"}],
        [{"text": "red", "callback_data": f"{ID}:2"}],
    ]


def test_callback_data_stays_within_64_bytes_whatever_the_options_say() -> None:
    """22 three-byte characters are 66 bytes: the data is still the tap id, the text only the label."""
    options = ["選" * 22, "択" * 22, "x" * 300]
    rendered = render(delivery("select", options=options), 42)
    buttons = [row[0] for row in rows(rendered.keyboard)]
    for index, button in enumerate(buttons):
        assert button["callback_data"] == f"{ID}:{index}"
        assert len(button["callback_data"].encode()) <= 64
        assert options[index] not in button["callback_data"]
    assert buttons[0]["text"] == "選" * 22
    assert buttons[2]["text"] == "x" * 63 + "…"


def test_a_select_beyond_100_options_becomes_numbered_text() -> None:
    """Telegram takes at most 100 buttons: more options are a numbered prompt to type from."""
    options = [f"option {n}" for n in range(101)]
    rendered = render(delivery("select", options=options), 42)
    assert rendered.keyboard is None
    assert rendered.text.startswith("Deploy now?\n\n1. option 0\n2. option 1\n")
    assert rendered.text.endswith("101. option 100\n\n" + PICK_ONE)
    assert len(rows(render(delivery("select", options=options[:100]), 42).keyboard)) == 100


def test_a_confirm_is_a_yes_and_a_no_button() -> None:
    """Yes/no taps carry ``<interaction id>:y`` and ``<interaction id>:n``."""
    assert rows(render(delivery("confirm"), 42).keyboard) == [
        [{"text": "Yes", "callback_data": f"{ID}:y"}, {"text": "No", "callback_data": f"{ID}:n"}]
    ]


def test_suggested_replies_are_tappable_but_free_text_stays_open() -> None:
    """A text question's suggestions are tap-id buttons; without them it is plain text."""
    rendered = render(delivery("text", suggested_replies=["ship it", "wait"]), 42)
    assert rows(rendered.keyboard) == [
        [{"text": "ship it", "callback_data": f"{ID}:0"}],
        [{"text": "wait", "callback_data": f"{ID}:1"}],
    ]
    assert render(delivery("text"), 42).keyboard is None


def test_a_form_opens_as_a_web_app_only_in_a_private_chat_over_https() -> None:
    """Telegram allows web_app buttons only in private chats and only for https pages; elsewhere
    the same page opens as a plain link."""
    url = "https://layby.example/api/interactions/callback/tkt"
    assert rows(render(delivery("form", schema={"type": "object"}), 42).keyboard) == [
        [{"text": "Open the form", "web_app": {"url": url}}]
    ]
    assert rows(render(delivery("form", schema={"type": "object"}), -100123).keyboard) == [
        [{"text": "Open the form", "url": url}]
    ]
    assert rows(render(delivery("form", schema={"type": "object"}), "@ops_channel").keyboard) == [
        [{"text": "Open the form", "url": url}]
    ]
    plain = "http://localhost:8000/api/interactions/callback/tkt"
    assert rows(render(delivery("form", schema={"type": "object"}, callback_url=plain), 42).keyboard) == [
        [{"text": "Open the form", "url": plain}]
    ]


def test_an_external_question_is_a_link_button_to_its_page() -> None:
    """The callback page is the action: a URL button opens it."""
    assert rows(render(delivery("external"), 42).keyboard) == [
        [{"text": "Open", "url": "https://layby.example/api/interactions/callback/tkt"}]
    ]


def test_a_long_question_is_shortened_never_refused() -> None:
    """Text is at most 4096 (UTF-16 units): the question is cut with an ellipsis, the options kept."""
    rendered = render(delivery("select", question="q" * 5000, options=[f"o{n}" for n in range(101)]), 42)
    assert len(rendered.text) == 4096
    assert rendered.text.endswith("101. o100\n\n" + PICK_ONE)
    assert "q…\n\n1. o0" in rendered.text
    emoji = render(delivery("text", question="🙂" * 3000), 42).text
    assert len(emoji.encode("utf-16-le")) // 2 <= 4096
    assert emoji.endswith("🙂…")


def test_link_media_are_lines_in_the_text() -> None:
    """A link is not a file: it is shown under the question."""
    media = [
        MediaItem(kind="link", url="https://runbook.example/deploy", caption="Runbook"),
        MediaItem(kind="link", url="https://status.example"),
    ]
    rendered = render(delivery("text", media=media), 42)
    assert rendered.text == "Deploy now?\n\nRunbook: https://runbook.example/deploy\nhttps://status.example"
    assert rendered.media == []


async def test_a_question_past_its_deadline_is_not_sent() -> None:
    """A delivery whose deadline has passed is refused before any call to Telegram."""
    clock = ManualClock()
    plugin = TelegramChannel(
        name="tg", config={"bot_token": "bot", "secret_token": "hook"}, secrets=SECRETS, clock=clock
    )
    with pytest.raises(channels.ChannelInputError) as err:
        await plugin.deliver(delivery(timeout_at=clock.now(), recipient="42"))
    assert "already timed out" in str(err.value)
    assert "nothing was sent" in str(err.value)


async def test_a_question_with_no_recipient_is_refused() -> None:
    """Without a recipient on the ask or a default_recipient there is nowhere to send."""
    with pytest.raises(channels.ChannelInputError) as err:
        await channel().deliver(delivery())
    assert str(err.value) == "telegram 'tg': no recipient (give one on the ask or set default_recipient)"


# -- taps ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (f"{ID}:3", telegram.Tap(interaction_id=ID, index=3)),
        (f"{ID}:y", telegram.Tap(interaction_id=ID, value=True)),
        (f"{ID}:n", telegram.Tap(interaction_id=ID, value=False)),
        (None, None),
        ("", None),
        ("blue", None),
        (f"{ID}:", None),
        (f":{3}", None),
        (f"{ID}:-1", None),
        (f"{ID}:99999", None),
        (f"{ID}:yes", None),
        (f"{ID}:{'9' * 40}", None),
    ],
)
def test_only_well_formed_tap_data_names_a_question(data: str | None, expected: telegram.Tap | None) -> None:
    """Forged, stale or foreign callback data is no answer."""
    assert parse_callback(data) == expected


async def test_a_forged_tap_is_read_as_a_tap_of_nothing_so_it_is_still_acknowledged() -> None:
    """A tap whose data names no question carries no interaction or index, but its callback query
    id, so the follow-up still answers it."""
    update = {
        "update_id": 9,
        "callback_query": {
            "id": "cbq-1",
            "chat_instance": "ci",
            "data": str(uuid.uuid4()),
            "from": {"id": 42, "is_bot": False, "first_name": "Ada"},
            "message": {"message_id": 5, "date": 1_790_000_000, "chat": {"id": 42, "type": "private"}},
        },
    }
    inbound = await channel().inbound(request(json.dumps(update).encode(), {telegram.SECRET_HEADER: HOOK}))
    assert inbound.replies == [
        channels.InboundReply(
            kind="tap",
            sender="42",
            sender_name="Ada",
            chat="42",
            message="5",
            event_id="9",
            context={"callback_query_id": "cbq-1"},
        )
    ]
