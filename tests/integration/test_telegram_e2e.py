"""Telegram end to end, and one question on Slack and Telegram at once (docs/channels.md#telegram,
docs/channels.md#several-channels): the whole system with both plugins pointed at their
stand-ins; the stand-ins play the person and post to the door's inbound webhooks as the
providers do."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import layby
from layby.sdk import Client
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, finished_run, serving
from tests.integration.chat_systems import (
    SLACK_SECRETS,
    TELEGRAM_HOOK,
    TELEGRAM_SECRETS,
    chat_system,
    door_url,
    echo_route,
    inbound_messages,
    telegram_and_slack,
)
from tests.standins import slack as slack_standin
from tests.standins.slack import SlackStandin
from tests.standins.telegram import Stored, TelegramStandin

pytestmark = pytest.mark.timeout(90)
PERSON = 424242


@dataclass
class Chats:
    system: System
    tg: TelegramStandin
    slack: SlackStandin


@pytest.fixture
async def chats(settings: Settings, store: EventStore, db: Any) -> AsyncIterator[Chats]:
    async with telegram_and_slack(settings, PERSON, register_webhook=True) as (tg, sl, channels):
        door = door_url(settings)
        async with chat_system(
            settings, channels, TELEGRAM_SECRETS | SLACK_SECRETS, delivery_backoff_seconds=0.02
        ) as system:

            async def registered() -> Any:
                return tg.webhook

            # The door registers the webhook itself (register_webhook) with the secret token.
            hook = await eventually(registered, "the door to register the Telegram webhook", timeout=10)
            assert (hook.url, hook.secret_token) == (f"{door}/api/channels/tg/events", TELEGRAM_HOOK)
            yield Chats(system, tg, sl)


@pytest.fixture
async def sdk(chats: Chats) -> Client:
    return await chats.system.sdk(public_base_url=chats.system.url)


async def _question(tg: TelegramStandin, n: int = 1) -> Stored:
    async def posted() -> Stored | None:
        found = [m for m in tg.messages(PERSON) if m.from_bot and m.kind == "text"]
        return found[n - 1] if len(found) >= n else None

    return await eventually(posted, f"question {n} in the Telegram chat", timeout=10)


async def test_select_taps_answer_with_the_option_text_and_every_tap_is_acknowledged(
    chats: Chats, sdk: Client
) -> None:
    tg = chats.tg
    options = ["Grüße aus Köln ★★★ 🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀🚀", "no"]
    ask = asyncio.create_task(
        sdk.ask_user("Pick", answer_format="select", options=options, channel="tg", timeout=30)
    )
    msg = await _question(tg)
    assert all(len(b["callback_data"].encode()) <= 64 for b in msg.buttons())
    assert options[0] not in json.dumps([b["callback_data"] for b in msg.buttons()])
    await tg.tap(PERSON, msg.message_id, 0)
    assert await asyncio.wait_for(ask, 10) == options[0]

    async def acknowledged() -> bool:
        return not tg.unanswered_taps() and tg.message(PERSON, msg.message_id).keyboard in (None, [])

    await eventually(acknowledged, "the tap acknowledged and the keyboard removed", timeout=10)


async def test_confirm_text_and_a_typed_reply_to_the_question(chats: Chats, sdk: Client) -> None:
    tg = chats.tg
    confirm = asyncio.create_task(sdk.ask_user("Go?", answer_format="confirm", channel="tg", timeout=30))
    msg = await _question(tg)
    await tg.tap(PERSON, msg.message_id, "No")
    assert await asyncio.wait_for(confirm, 10) is False
    text = asyncio.create_task(sdk.ask_user("Name the release", channel="tg", options=["v1"], timeout=30))
    second = await _question(tg, 2)
    assert [b["text"] for b in second.buttons()] == ["v1"]
    await tg.type(PERSON, "v2-rc1", reply_to=second.message_id)
    assert await asyncio.wait_for(text, 10) == "v2-rc1"


async def test_a_plain_message_answers_the_last_question_in_the_chat_and_a_mismatch_is_corrected(
    chats: Chats, sdk: Client
) -> None:
    tg = chats.tg
    ask = asyncio.create_task(
        sdk.ask_user("Which?", answer_format="select", options=["a", "b"], channel="tg", timeout=30)
    )
    await _question(tg)
    await tg.type(PERSON, "c")

    async def notice() -> Stored | None:
        found = [m for m in tg.messages(PERSON) if m.from_bot and m.text and "does not fit" in m.text]
        return found[0] if found else None

    await eventually(notice, "the built-in mismatch notice", timeout=10)
    assert not ask.done()
    await tg.type(PERSON, "b")
    assert await asyncio.wait_for(ask, 10) == "b"


async def test_a_form_is_a_button_to_the_callback_form_page(chats: Chats, sdk: Client) -> None:
    tg = chats.tg
    schema = {"type": "object", "properties": {"seats": {"type": "integer"}}, "required": ["seats"]}
    ask = asyncio.create_task(
        sdk.ask_user("Seats?", answer_format="form", schema=schema, channel="tg", timeout=30)
    )
    msg = await _question(tg)
    [button] = msg.buttons()
    url = button.get("url") or button["web_app"]["url"]
    assert url.startswith(f"{chats.system.url}/api/interactions/callback/")
    import httpx

    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(url, json={"answer": {"seats": 4}})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == {"seats": 4}


async def test_a_wrong_secret_token_is_401_and_nothing_is_recorded(chats: Chats, sdk: Client) -> None:
    tg = chats.tg
    ask = asyncio.create_task(sdk.ask_user("Sure?", answer_format="confirm", channel="tg", timeout=30))
    msg = await _question(tg)
    assert (await tg.tap(PERSON, msg.message_id, "Yes", secret="wrong")).status_code == 401
    assert (await tg.tap(PERSON, msg.message_id, "Yes", secret="")).status_code == 401
    assert not ask.done()
    assert (await tg.tap(PERSON, msg.message_id, "Yes")).status_code == 200
    assert await asyncio.wait_for(ask, 10) is True


async def test_one_question_on_slack_and_telegram_answered_on_both_at_once_one_wins_the_other_is_retracted(
    chats: Chats, sdk: Client
) -> None:
    tg, sl = chats.tg, chats.slack
    ask = asyncio.create_task(
        sdk.ask_user("Roll back?", answer_format="confirm", channel=["slack", "tg"], timeout=30)
    )
    tg_msg = await _question(tg)

    async def slack_msg() -> Any:
        found = [m for m in sl.messages(slack_standin.CHANNEL) if m.bot]
        return found[0] if found else None

    sl_msg = await eventually(slack_msg, "the Slack copy", timeout=10)
    slack_tap = sl.build_tap(slack_standin.CHANNEL, sl_msg.ts, "No")
    await asyncio.gather(tg.tap(PERSON, tg_msg.message_id, "Yes"), sl.send(slack_tap))
    answer = await asyncio.wait_for(ask, 10)
    assert answer in (True, False)

    async def both_retracted() -> bool:
        tg_done = not tg.message(PERSON, tg_msg.message_id).keyboard
        sl_done = not sl.message(slack_standin.CHANNEL, sl_msg.ts).has_controls()
        return tg_done and sl_done

    await eventually(both_retracted, "both copies retracted", timeout=10)
    [late] = await inbound_messages(chats.system, 1)
    assert late["reason"] == "late"
    assert late["channel"] in ("slack", "tg") and late["value"] is (late["channel"] == "tg")


async def test_a_parked_run_resumes_on_a_telegram_reply(chats: Chats, sdk: Client) -> None:
    """Async: the run parks on a Telegram select and a typed reply to it resumes the run."""
    system, tg = chats.system, chats.tg
    worker = layby.Worker(sdk, settings=system.settings)

    @worker.flow("pick-region")
    async def pick(_: Any) -> Any:
        return await layby.ask_user(
            "Region for the replica?",
            answer_format="select",
            options=["eu-west", "us-east"],
            channel="tg",
            mode="async",
            expiry_at=datetime.now(UTC) + timedelta(minutes=5),
        )

    async with serving(worker):
        run_id = await sdk.start_run("pick-region", {})
        msg = await _question(tg)
        await tg.type(PERSON, "us-east", reply_to=msg.message_id)
        assert (await finished_run(system, run_id))["result"] == "us-east"


async def test_a_private_chat_is_a_conversation_and_the_reply_is_a_telegram_message(
    chats: Chats, sdk: Client, store: EventStore
) -> None:
    """A plain message in a private chat with no question posted there visits the route naming
    the channel, on the subject ``tg:<chat id>``, and the result comes back as a message from the
    bot (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    system, tg = chats.system, chats.tg
    worker = await echo_route(system, sdk, store, "tg-chat", "tg")
    async with serving(worker):
        await tg.type(PERSON, "ping")

        async def replies() -> list[str | None]:
            return [m.text for m in tg.messages(PERSON) if m.from_bot]

        got = await eventually(replies, "the reply in the chat", until=bool, timeout=20)
    assert got == [f"tg:{PERSON} got: ping"]


async def test_a_review_is_rejected_with_its_telegram_button(chats: Chats, sdk: Client) -> None:
    """docs/review.md#where-it-is-answered: a review's Reject button on Telegram records the reject,
    and the SDK's review says who rejected it."""
    from layby.review import review

    tg = chats.tg
    task = asyncio.create_task(review("drop_table", {"table": "users"}, client=sdk, channel="tg", timeout=30))
    msg = await _question(tg)
    assert [b["text"] for b in msg.buttons()] == ["Accept", "Reject"]
    await tg.tap(PERSON, msg.message_id, 1)
    decided = await asyncio.wait_for(task, 10)
    assert (decided.decision, decided.by, decided.approved) == ("reject", f"tg:{PERSON}", False)
