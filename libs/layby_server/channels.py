"""Channels: how a question reaches a person outside the inbox
(docs/aggregates/interaction.md#channel-delivery).

A channel plugin is registered under a name in ``LAYBY_CHANNELS``, a JSON object mapping each
name to ``{"plugin": "<built-in name or module:attr>", ...config}``. The plugin factory is called
with the config (every key but ``plugin``) and returns an object with:

- ``async deliver(delivery: ChannelDelivery) -> Posted | None``: **one** send attempt. Success
  returns where the question was posted (a chat channel) or nothing (a bridge); every failure
  raises ``ChannelDeliveryError(retryable=..., retry_after=...)``. The delivery service retries
  only retryable failures, within the question's own budget.
- optional capability flags (absent means False): ``supports_form_delivery``.
- an optional hook ``validate_form_schema(schema, question)`` that raises ``ValueError`` to refuse
  a form at ask time (the medium's own limits).

The person's reply comes back through the callback URL in the delivery: ``{"answer": <value>}``
POSTed to it, or, for confirm and external questions, a tap on the link (its page posts back).
The ticket inside the URL is minted per delivery and stored only as a hash.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from layby_contracts.channels import Channel, ChannelDelivery, ChatChannel
from layby_contracts.events import InteractionAsked
from layby_domain.ask import ChannelAbilities
from layby_domain.formats import FORMATS

Factory = Callable[..., Channel]
BUILTIN: dict[str, str] = {
    "webhook": "layby_server.channel_webhook:WebhookChannel",
    "slack": "layby_server.chat.slack:SlackChannel",
    "telegram": "layby_server.chat.telegram:TelegramChannel",
    "whatsapp": "layby_server.chat.whatsapp:WhatsAppChannel",
    "twilio": "layby_server.chat.twilio:TwilioChannel",
}
EXTRAS = {"slack_sdk": "slack", "telegram": "telegram", "twilio": "twilio"}
"""The package extra that brings each channel SDK a built-in plugin imports
(docs/channels.md#installing-a-channel)."""
SDKS = {"slack": "slack_sdk", "telegram": "telegram", "twilio": "twilio"}
"""The SDK each built-in chat plugin imports (WhatsApp and the webhook channel need none)."""


def needs_extra(name: str, plugin: str) -> str:
    """What stops a channel whose plugin's SDK is not installed: the extra that brings it."""
    extra = EXTRAS[SDKS[plugin]]
    return (
        f"channel {name!r}: plugin {plugin!r} needs the {extra!r} extra: pip install 'layby-server[{extra}]'"
    )


def missing_extras(raw: str | None) -> list[str]:
    """For each configured built-in channel whose SDK is not installed, what stops it (``layby
    up`` says so before it starts a service)."""
    return [
        needs_extra(name, config["plugin"])
        for name, config in parse_channels(raw).items()
        if config["plugin"] in SDKS and not _installed(SDKS[config["plugin"]])
    ]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: an import already failed (None in sys.modules)
        return False


def parse_channels(raw: str | None) -> dict[str, dict[str, Any]]:
    """``LAYBY_CHANNELS`` as ``{name: {"plugin": ..., **config}}``; raises naming what is wrong."""
    if not raw:
        return {}
    try:
        value = msgspec.json.decode(raw.encode())
    except msgspec.DecodeError as exc:
        raise ValueError(f"must be a JSON object of channels: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(  # noqa: TRY004 - a setting's value error
            'must be a JSON object: {"<name>": {"plugin": "<plugin>", ...config}}'
        )
    for name, config in value.items():
        plain = name.replace("-", "").replace("_", "")
        if not name or not plain.isascii() or not plain.isalnum() or len(name) > 64:
            raise ValueError(f"channel name {name!r} must be 1-64 letters, digits, '-' or '_'")
        if not isinstance(config, dict) or not isinstance(config.get("plugin"), str) or not config["plugin"]:
            raise ValueError(f'channel {name!r} needs {{"plugin": "<built-in name or module:attr>"}}')
    return value


def load_channels(raw: str | None, secrets: Mapping[str, bytes]) -> dict[str, Channel]:
    """Instantiate every configured channel. A plugin that cannot be loaded fails start-up."""
    loaded: dict[str, Channel] = {}
    for name, config in parse_channels(raw).items():
        target = BUILTIN.get(config["plugin"], config["plugin"])
        module_name, _, attr = target.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except ImportError as exc:
            sdk = (exc.name or "").partition(".")[0]
            if sdk in EXTRAS:
                plugin = next((p for p, m in SDKS.items() if m == sdk), config["plugin"])
                raise ValueError(needs_extra(name, plugin)) from None
            raise ValueError(f"channel {name!r}: cannot load plugin {config['plugin']!r}: {exc}") from None
        except (AttributeError, ValueError) as exc:
            raise ValueError(f"channel {name!r}: cannot load plugin {config['plugin']!r}: {exc}") from None
        options = {k: v for k, v in config.items() if k != "plugin"}
        try:
            channel = factory(name=name, config=options, secrets=secrets)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"channel {name!r}: {exc}") from None
        if not isinstance(channel, Channel):
            raise ValueError(  # noqa: TRY004 - a setting's value error
                f"channel {name!r}: plugin {config['plugin']!r} has no async deliver(delivery)"
            )
        loaded[name] = channel
    return loaded


async def close_channels(channels: Mapping[str, Channel]) -> None:
    """Close every plugin that holds connections (``aclose``), when its service stops; a plugin
    failing to close does not keep the others open."""
    for channel in channels.values():
        close = getattr(channel, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


def abilities(channels: Mapping[str, Channel]) -> dict[str, ChannelAbilities]:
    """What each registered channel can deliver, as the ask decision needs to know it
    (docs/asking.md#channel-checks)."""
    return {
        name: ChannelAbilities(
            forms=bool(getattr(plugin, "supports_form_delivery", False)),
            check_form=getattr(plugin, "validate_form_schema", None),
        )
        for name, plugin in channels.items()
    }


def chat_channels(channels: Mapping[str, Channel]) -> dict[str, ChatChannel]:
    """The channels with their own inbound webhook (docs/channels.md#chat-channels)."""
    return {name: plugin for name, plugin in channels.items() if isinstance(plugin, ChatChannel)}


def delivery_of(
    ev: InteractionAsked, *, callback_url: str, public_base_url: str, recipient: str | None
) -> ChannelDelivery:
    """What a channel is handed for a recorded question: media under absolute URLs, the
    format's own fields (docs/aggregates/interaction.md#channel-delivery)."""
    payload = ev.format_payload or {}
    base = public_base_url.rstrip("/")
    media = [
        msgspec.structs.replace(m, url=base + m.url) if m.url.startswith("/") else m for m in ev.media or []
    ]
    fmt = FORMATS[ev.answer_format]
    typed = fmt.typed(ev.format_payload)
    return ChannelDelivery(
        interaction_id=ev.interaction_id,
        question=fmt.chat_text(ev.question, typed, callback_url),
        answer_format=ev.answer_format,
        callback_url=callback_url,
        timeout_at=ev.timeout_at,
        recipient=recipient,
        media=media or None,
        data=payload.get("data"),
        pages=payload.get("pages"),
        reply_ids=ev.chat.reply_ids if ev.chat is not None else None,
        **fmt.delivery(typed),
    )
