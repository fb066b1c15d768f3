"""Channel configuration fails at start-up, naming the variable and the channel (docs/engineering.md#settings)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from layby_server.channel_webhook import WebhookChannel
from layby_server.channels import load_channels
from layby_server.settings import SettingsError, load_settings

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "LAYBY_CHANNELS must be a JSON object of channels"),
        ("[]", "LAYBY_CHANNELS must be a JSON object"),
        ('{"ops": "webhook"}', "LAYBY_CHANNELS channel 'ops' needs {\"plugin\""),
        ('{"ops": {"url": "https://x"}}', "LAYBY_CHANNELS channel 'ops' needs {\"plugin\""),
        ('{"a b": {"plugin": "webhook"}}', "LAYBY_CHANNELS channel name 'a b' must be 1-64 letters"),
    ],
)
def test_a_malformed_channels_setting_stops_start_up_naming_the_variable(raw: str, message: str) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings({"LAYBY_CHANNELS": raw})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"ops": {"plugin": "no.such.module:X"}}', "channel 'ops': cannot load plugin 'no.such.module:X'"),
        (
            '{"ops": {"plugin": "layby_server.channels:Nope"}}',
            "cannot load plugin 'layby_server.channels:Nope'",
        ),
        ('{"ops": {"plugin": "webhook"}}', "channel 'ops': webhook needs url, an absolute http(s) URL"),
        ('{"ops": {"plugin": "webhook", "url": "ftp://x"}}', "webhook needs url"),
        (
            '{"ops": {"plugin": "webhook", "url": "https://x", "secret": "s"}}',
            "'s' is not in LAYBY_WEBHOOK_SECRETS",
        ),
        ('{"ops": {"plugin": "webhook", "url": "https://x", "urls": 1}}', "unknown webhook option 'urls'"),
        ('{"ops": {"plugin": "webhook", "url": "https://x", "timeout": 0}}', "timeout must be a positive"),
        ('{"ops": {"plugin": "layby_server.channels:parse_channels"}}', "channel 'ops': "),
        ('{"ops": {"plugin": "layby_domain.tickets:ASYNC_MARGIN_SECONDS"}}', "channel 'ops': "),
    ],
)
def test_a_plugin_that_cannot_be_loaded_or_configured_is_refused_naming_the_channel(
    raw: str, message: str
) -> None:
    with pytest.raises(ValueError) as err:
        load_channels(raw, {})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("plugin", "sdk", "extra"),
    [("slack", "slack_sdk", "slack"), ("telegram", "telegram", "telegram"), ("twilio", "twilio", "twilio")],
)
def test_a_channel_whose_sdk_is_not_installed_names_the_extra_that_brings_it(
    plugin: str, sdk: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A built-in chat channel configured where its SDK's extra is not installed stops start-up
    saying which extra to install (docs/channels.md#installing-a-channel)."""
    for module in [
        m for m in sys.modules if m == sdk or m.startswith((f"{sdk}.", f"layby_server.chat.{plugin}"))
    ]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, sdk, None)  # the import system's "not installed"
    with pytest.raises(ValueError) as err:
        load_channels(f'{{"ops": {{"plugin": "{plugin}"}}}}', {})
    assert str(err.value) == (
        f"channel 'ops': plugin '{plugin}' needs the '{extra}' extra: pip install 'layby-server[{extra}]'"
    )


def test_layby_up_names_the_missing_extra_before_it_starts_a_service(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``layby up`` with a chat channel whose SDK is not installed refuses to start, naming the
    extra, before any service starts (docs/channels.md#installing-a-channel)."""
    from layby_server.operations.up import _refusal

    monkeypatch.setitem(sys.modules, "telegram", None)
    raw = '{"ops": {"plugin": "webhook", "url": "https://bridge.example/x"}, "tg": {"plugin": "telegram"}}'
    settings = load_settings({"LAYBY_CHANNELS": raw, "LAYBY_DATA_DIR": str(tmp_path)})
    assert _refusal(settings, tmp_path) == (
        "error: channel 'tg': plugin 'telegram' needs the 'telegram' extra: pip install 'layby-server[telegram]'"
    )


def test_the_webhook_channel_takes_its_options() -> None:
    raw = '{"ops": {"plugin": "webhook", "url": "https://bridge.example/x", "secret": "b", "forms": false}}'
    [(name, channel)] = load_channels(raw, {"b": b"secret"}).items()
    assert name == "ops" and isinstance(channel, WebhookChannel)
    assert channel.url == "https://bridge.example/x" and channel.supports_form_delivery is False
