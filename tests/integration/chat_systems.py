"""The whole system with chat channels pointed at their stand-ins (docs/channels.md): each
provider's channel config and webhook secrets written once, and the system started and stopped
around a test."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import msgspec

from layby_server.settings import Settings
from tests.conftest import System, start_system, stop_system
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


def door_url(settings: Settings) -> str:
    """The door's base URL (the public base URL of a system started by ``chat_system``)."""
    return f"http://127.0.0.1:{settings.http_port}"


def slack_channel(standin: slack.SlackStandin, **extra: Any) -> dict[str, Any]:
    """A ``slack`` channel on the stand-in, its secrets in ``SLACK_SECRETS``."""
    return {
        "plugin": "slack",
        "bot_token": "slack-bot",
        "signing_secret": "slack-signing",
        "api_url": standin.api_url,
        **extra,
    }


def telegram_channel(standin: telegram.TelegramStandin, recipient: int, **extra: Any) -> dict[str, Any]:
    """A ``telegram`` channel on the stand-in, sending to chat ``recipient`` unless told; its
    secrets in ``TELEGRAM_SECRETS``."""
    return {
        "plugin": "telegram",
        "bot_token": "tg-bot",
        "secret_token": "tg-hook",
        "api_url": standin.api_url,
        "file_url": standin.file_url,
        "default_recipient": str(recipient),
        **extra,
    }


def whatsapp_channel(standin: whatsapp.WhatsAppStandin, recipient: str, **extra: Any) -> dict[str, Any]:
    """A ``whatsapp`` channel on the Cloud API stand-in, sending to ``recipient`` unless told; its
    secrets in ``WHATSAPP_SECRETS``."""
    return {
        "plugin": "whatsapp",
        "access_token": "wa-token",
        "app_secret": "wa-app",
        "verify_token": "wa-verify",
        "phone_number_id": whatsapp.PHONE_NUMBER_ID,
        "api_url": standin.api_url,
        "default_recipient": recipient,
        **extra,
    }


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
