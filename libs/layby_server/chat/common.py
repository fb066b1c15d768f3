"""What every chat plugin shares: settings checks, the text fallbacks, the tap ids and the lines
a retracted question shows (docs/channels.md#chat-channels)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar
from urllib.parse import urlsplit

from layby_contracts.channels import ChannelDelivery, ChannelInputError, Retraction
from layby_contracts.events import MediaItem
from layby_domain.clock import Clock, SystemClock
from layby_domain.formats import format_named
from layby_domain.formats._base import Control

PICK_ONE = "Reply with the text of one option."
YES_OR_NO = "Reply yes or no."
TAP_SEPARATOR = ":"
ELLIPSIS = "…"
Fits = Callable[[str], object]
"""A text setting's check: truthy when the value is acceptable (``re.Pattern.fullmatch``)."""


def check_options(config: Mapping[str, Any], plugin: str, allowed: set[str]) -> None:
    """Refuse an unknown setting by name (a typo must fail start-up, not be ignored)."""
    unknown = set(config) - allowed
    if unknown:
        raise ValueError(f"unknown {plugin} option {sorted(unknown)[0]!r} ({', '.join(sorted(allowed))})")


def secret(config: Mapping[str, Any], key: str, secrets: Mapping[str, bytes], plugin: str) -> str:
    """The secret a setting names: ``config[key]`` is a name in ``LAYBY_WEBHOOK_SECRETS`` (the
    value never appears in ``LAYBY_CHANNELS``, a log line or an error)."""
    name = config.get(key)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{plugin} needs {key}: the name of a secret in LAYBY_WEBHOOK_SECRETS")
    if name not in secrets:
        raise ValueError(f"{plugin} {key} {name!r} is not in LAYBY_WEBHOOK_SECRETS")
    return secrets[name].decode()


def base_url(config: Mapping[str, Any], key: str, default: str, plugin: str) -> str:
    """A provider API base URL setting (for GovSlack, a self-hosted Bot API server, a stand-in)."""
    value = config.get(key, default)
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{plugin} {key} must be an absolute http(s) URL")
    return str(value)


def timeout(config: Mapping[str, Any], plugin: str, default: float = 10) -> float:
    """A plugin's ``timeout`` setting: seconds each call to its provider may take."""
    value = config.get("timeout", default)
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{plugin} timeout must be a positive number of seconds")
    return float(value)


class PluginConfig:
    """One plugin's entry of ``LAYBY_CHANNELS``, read setting by setting: an unknown setting is
    refused at once, and every refusal names the plugin and the setting (start-up fails)."""

    def __init__(
        self, plugin: str, config: Mapping[str, Any], secrets: Mapping[str, bytes], allowed: set[str]
    ) -> None:
        check_options(config, plugin, allowed)
        self.plugin = plugin
        self._config = config
        self._secrets = secrets

    def get(self, key: str, default: Any = None) -> Any:
        return self._config.get(key, default)

    def secret(self, key: str) -> str:
        return secret(self._config, key, self._secrets, self.plugin)

    def base_url(self, key: str, default: str) -> str:
        return base_url(self._config, key, default, self.plugin)

    def timeout(self) -> float:
        return timeout(self._config, self.plugin)

    def flag(self, key: str) -> bool:
        """A true/false setting, false when absent."""
        value = self._config.get(key, False)
        if not isinstance(value, bool):
            raise ValueError(f"{self.plugin} {key} must be true or false")  # noqa: TRY004
        return value

    def text(self, key: str, fits: Fits, must: str, *, default: str | None = None, ids: bool = False) -> str:
        """A required text setting that ``fits``; ``must`` says what it must be."""
        value = self.optional_text(key, fits, must, default=default, ids=ids)
        if value is None:
            raise ValueError(f"{self.plugin} {key} {must}")
        return value

    def optional_text(
        self,
        key: str,
        fits: Fits,
        must: str,
        *,
        default: str | None = None,
        ids: bool = False,
    ) -> str | None:
        """A text setting that ``fits``, or None when absent. ``ids``: an id given as a JSON
        number (a phone number's id, a Flow's) counts as its digits."""
        value = self._config.get(key, default)
        if ids and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if value is not None and (not isinstance(value, str) or not fits(value)):
            raise ValueError(f"{self.plugin} {key} {must}")
        return value


class ChatPlugin:
    """The base of every chat plugin's class: its capabilities (none unless the plugin names it,
    docs/channels.md#capability-matrix) and its constructor, which reads the plugin's entry of
    ``LAYBY_CHANNELS`` through a PluginConfig and hands it to ``_configure``."""

    PLUGIN: ClassVar[str]
    OPTIONS: ClassVar[set[str]]
    supports_form_delivery = False
    supports_media_notifications = False
    supports_template_notifications = False
    supports_interactive_notifications = False
    supports_form_notifications = False

    def __init_subclass__(cls, *, plugin: str, options: set[str], **kwargs: Any) -> None:
        """``class XChannel(ChatPlugin, plugin="x", options=OPTIONS)``: its name in errors and the
        settings its entry may hold."""
        super().__init_subclass__(**kwargs)
        cls.PLUGIN = plugin
        cls.OPTIONS = options

    def __init__(
        self,
        *,
        name: str,
        config: Mapping[str, Any],
        secrets: Mapping[str, bytes],
        clock: Clock | None = None,
    ) -> None:
        settings = PluginConfig(self.PLUGIN, config, secrets, self.OPTIONS)
        self.name = name
        self._clock: Clock = clock or SystemClock()
        self._configure(settings)

    def _configure(self, settings: PluginConfig) -> None:
        """Read the plugin's own settings; a refusal fails start-up."""
        raise NotImplementedError

    def _refuse_late(self, delivery: ChannelDelivery) -> None:
        """A question past its timeout is never sent."""
        refuse_late(f"{self.PLUGIN} {self.name!r}", delivery.timeout_at, self._clock.now())


def refuse_late(where: str, timeout_at: datetime, now: datetime) -> None:
    """A question past its timeout is never sent (``where``: the plugin and the channel's name)."""
    if timeout_at <= now:
        raise ChannelInputError(
            f"{where}: the question already timed out at {timeout_at.isoformat()}; nothing was sent"
        )


def tap_id(interaction_id: str, index: int) -> str:
    """The id a control carries for option ``index`` of a question: never the option's text."""
    return f"{interaction_id}{TAP_SEPARATOR}{index}"


def parse_tap_id(value: str) -> tuple[str, int] | None:
    """``(interaction_id, index)`` of a well-formed tap id, else None (a stale or forged tap)."""
    interaction_id, sep, index = value.rpartition(TAP_SEPARATOR)
    if not sep or not interaction_id or not index.isdigit() or len(index) > 4:
        return None
    return interaction_id, int(index)


def control_of(delivery: ChannelDelivery) -> Control:
    """How a chat channel offers this question's answer: the format registry says, so a plugin
    never tells formats apart by name (docs/channels.md#capability-matrix)."""
    return format_named(delivery.answer_format).control


def numbered_prompt(delivery: ChannelDelivery) -> str:
    """A select question as numbered text, for a medium whose controls cannot hold its options."""
    options = delivery.options or []
    lines = [delivery.question, ""]
    lines += [f"{n}. {option}" for n, option in enumerate(options, 1)]
    lines += ["", PICK_ONE]
    return "\n".join(lines)


def retraction_line(retraction: Retraction) -> str:
    """What a question's message says once it is resolved elsewhere (or here)."""
    if retraction.outcome == "answered":
        by = f" by {retraction.by}" if retraction.by else ""
        where = (
            f" in the {retraction.via}"
            if retraction.via in ("inbox", "cli")
            else (f" via {retraction.via}" if retraction.via else "")
        )
        return f"Answered{by}{where}."
    if retraction.outcome == "expired":
        return "This question expired."
    return "This question was withdrawn."


def utf16_units(text: str) -> int:
    """A text's length in UTF-16 code units (an emoji counts two): how Telegram and Twilio count
    characters, the stricter reading of a provider's "characters"."""
    return len(text.encode("utf-16-le")) // 2


def cut(text: str, limit: int, measure: Callable[[str], int] = utf16_units) -> str:
    """``text`` within ``limit`` (as ``measure`` counts), an ellipsis marking a cut; a character
    is never split (nor a surrogate pair, counted in UTF-16 units)."""
    if measure(text) <= limit:
        return text
    kept, used = [], 0
    for char in text:
        size = measure(char)
        if used + size > limit - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + ELLIPSIS


def fit(question: str, suffix: str, limit: int, measure: Callable[[str], int] = utf16_units) -> str:
    """The question followed by ``suffix`` within ``limit``: the question is shortened first, so
    the options and links after it survive; only when they alone are too long is the whole cut."""
    room = limit - measure(suffix)
    if room >= 2:
        return cut(question, room, measure) + suffix
    return cut(question + suffix, limit, measure)


def link_line(item: MediaItem) -> str:
    """A media item as a line of text (``caption: url``), for a medium that cannot show it."""
    return f"{item.caption}: {item.url}" if item.caption else item.url
