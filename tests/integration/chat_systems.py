"""The whole system with chat channels pointed at their stand-ins (docs/channels.md): each
provider's channel config and webhook secrets written once, and the system started and stopped
around a test."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import msgspec

import layby
from layby.sdk import Client
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import System, start_system, stop_system
from tests.helpers import eventually, route
from tests.standins import slack, telegram, whatsapp

TELEGRAM_HOOK = "tg-hook_0123456789"
"""The Telegram channel's webhook secret token (the secret ``tg-hook``)."""

SLACK_SECRETS = {"slack-bot": slack.BOT_TOKEN, "slack-signing": slack.SIGNING_SECRET}
TELEGRAM_SECRETS = {"tg-bot": telegram.TOKEN, "tg-hook": TELEGRAM_HOOK}
WHATSAPP_SECRETS = {
    "wa-token": whatsapp.TOKEN,
    "wa-app": whatsapp.APP_SECRET,
    "wa-verify": whatsapp.VERIFY_TOKEN,
}


ECHO_START = '{text, subject: "\\(.channel):\\(.chat)"}'
"""A conversation route's start program: the message's text, on the subject ``<channel>:<chat>``."""


async def echo_route(system: System, sdk: Client, store: EventStore, name: str, channel: str) -> layby.Worker:
    """A conversation route ``name`` on ``channel`` to the flow ``echo`` (it answers
    ``<subject> got: <text>``), listed by the door; the worker it returns serves that flow."""
    worker = layby.Worker(sdk, settings=system.settings)

    @worker.flow("echo")
    async def echo(inp: dict[str, Any]) -> str:
        return f"{inp['subject']} got: {inp['text']}"

    await route(
        system, store, name, kind="conversation", target="echo", channel=channel, start_expr=ECHO_START
    )
    return worker


def door_url(settings: Settings) -> str:
    """The door's base URL (the public base URL of a system started by ``chat_system``)."""
    return f"http://127.0.0.1:{settings.http_port}"


def _on_standin(plugin: str, api_url: str, **fields: Any) -> dict[str, Any]:
    """A ``plugin`` channel whose provider API is the stand-in at ``api_url``; ``fields``: the rest
    of its config (its secrets by name, the test's extras last)."""
    return {"plugin": plugin, "api_url": api_url, **fields}


def slack_channel(standin: slack.SlackStandin, **extra: Any) -> dict[str, Any]:
    """A ``slack`` channel on the stand-in, its secrets in ``SLACK_SECRETS``."""
    return _on_standin(
        "slack", standin.api_url, bot_token="slack-bot", signing_secret="slack-signing", **extra
    )


def telegram_channel(standin: telegram.TelegramStandin, recipient: int, **extra: Any) -> dict[str, Any]:
    """A ``telegram`` channel on the stand-in, sending to chat ``recipient`` unless told; its
    secrets in ``TELEGRAM_SECRETS``."""
    return _on_standin(
        "telegram",
        standin.api_url,
        bot_token="tg-bot",
        secret_token="tg-hook",
        file_url=standin.file_url,
        **{"default_recipient": str(recipient), **extra},
    )


def whatsapp_channel(standin: whatsapp.WhatsAppStandin, recipient: str, **extra: Any) -> dict[str, Any]:
    """A ``whatsapp`` channel on the Cloud API stand-in, sending to ``recipient`` unless told; its
    secrets in ``WHATSAPP_SECRETS``."""
    return _on_standin(
        "whatsapp",
        standin.api_url,
        access_token="wa-token",
        app_secret="wa-app",
        verify_token="wa-verify",
        phone_number_id=whatsapp.PHONE_NUMBER_ID,
        **{"default_recipient": recipient, **extra},
    )


async def inbound_messages(system: System, n: int) -> list[dict[str, Any]]:
    """The first ``n`` inbound messages on the messages stream (fewer if it ends first)."""
    got: list[dict[str, Any]] = []
    async with (
        system.http() as http,
        http.stream("GET", "/api/messages/stream", headers={"Last-Event-ID": "0"}) as stream,
    ):
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                got.append(json.loads(line[5:]))
                if len(got) == n:
                    return got
    return got


async def answer_in_the_inbox(system: System, answer: Any) -> tuple[str, httpx.Response]:
    """Once the inbox lists a question, the first it lists answered with ``answer`` as the inbox
    page answers (``Layby-Client: inbox``): its id and the door's response."""
    async with system.http() as http:

        async def pending() -> list[Any]:
            items: list[Any] = (await http.get("/api/interactions")).json()["data"]["items"]
            return items

        # Posted to a chat can come a moment before the inbox's read model has the question.
        listed = await eventually(pending, "the question in the inbox list", until=bool)
        interaction_id: str = listed[0]["interaction_id"]
        return interaction_id, await http.post(
            f"/api/interactions/{interaction_id}/answer",
            json={"answer": answer},
            headers={"Layby-Client": "inbox"},
        )


@contextlib.asynccontextmanager
async def telegram_and_slack(
    settings: Settings, person: int, **tg_config: Any
) -> AsyncIterator[tuple[telegram.TelegramStandin, slack.SlackStandin, dict[str, Any]]]:
    """Both stand-ins for the block's length, ``person`` a Telegram user, with the channels ``tg``
    (sending to ``person``; ``tg_config``: more of its config) and ``slack`` (sending to the stand-in's
    channel, its events posted to the door of a system started with ``settings``); their secrets
    are ``TELEGRAM_SECRETS | SLACK_SECRETS``."""
    async with telegram.serve_telegram_standin() as tg, slack.serve_slack_standin() as sl:
        tg.add_person(person)
        sl.target = f"{door_url(settings)}/api/channels/slack/events"
        channels = {
            "tg": telegram_channel(tg, person, **tg_config),
            "slack": slack_channel(sl, default_recipient=slack.CHANNEL),
        }
        yield tg, sl, channels


@contextlib.asynccontextmanager
async def chat_system(
    settings: Settings, channels: Mapping[str, Any], secrets: Mapping[str, str], **changes: Any
) -> AsyncIterator[System]:
    """The whole system with ``channels`` configured, ``secrets`` (name -> value) as its webhook
    secrets and the door as its public base URL (``changes``: other settings), for the block's
    length."""
    configured = msgspec.structs.replace(
        settings,
        channels=json.dumps(channels),
        public_base_url=door_url(settings),
        webhook_secrets=",".join(f"{name}:{value}" for name, value in secrets.items()),
        **changes,
    )
    system = await start_system(configured)
    try:
        yield system
    finally:
        await stop_system(system)
