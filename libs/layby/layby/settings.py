"""The SDK's settings: one frozen Struct, read once from the environment, passed down.

Only what asking and hosting flows need (where NATS is, the bearer token, the default budget).
The server's settings (``layby_server.settings.Settings``) extend this Struct, so a server
``Settings`` can be passed wherever the SDK takes settings. Invalid values fail at start-up
naming the variable; business code never reads ``os.environ``.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

import msgspec

from layby_contracts.subjects import Names

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

Parser = Callable[[str, str], Any]


class SettingsError(ValueError):
    """A setting is invalid; the message names the environment variable."""


class ClientSettings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str | None = None
    """LAYBY_NATS_URL: NATS server with JetStream; unset means embedded (``layby up``) or runtime file."""
    namespace: str = "layby"
    """LAYBY_NAMESPACE: prefix of every stream, subject and consumer name."""
    token: str | None = None
    """LAYBY_TOKEN: the SDK's and the CLI's bearer token (the asker's identity is the token's)."""
    url: str | None = None
    """LAYBY_URL: the door's base URL, for the CLI."""
    data_dir: str | None = None
    """LAYBY_DATA_DIR: embedded data and the runtime file; default a per-user data directory."""
    log_format: str = "json"
    """LAYBY_LOG_FORMAT: json (production) or console (humans)."""
    log_level: str = "info"
    """LAYBY_LOG_LEVEL: debug, info, warning or error."""
    answer_timeout_seconds: float = 3600.0
    """INTERACTIONS_ANSWER_TIMEOUT_SECONDS: default sync budget."""
    public_base_url: str | None = None
    """INTERACTIONS_PUBLIC_BASE_URL: https origin for callback URLs (http only on loopback)."""
    continuation_ack_wait_seconds: float = 30.0
    """LAYBY_CONTINUATION_ACK_WAIT_SECONDS: a continuation whose worker neither finishes nor
    reports progress within this time is redelivered to another worker."""
    continuation_max_attempts: int = 5
    """LAYBY_CONTINUATION_MAX_ATTEMPTS: executions of a raising continuation before the run fails."""
    nats_seed: str | None = None
    """LAYBY_NATS_SEED (or the file LAYBY_NATS_SEED_FILE names): this process's NATS key seed
    (``SU…``). Services need one under NATS authorization; an SDK client derives its own from
    its token when unset (docs/security.md#nats-identities)."""
    nats_ca_file: str | None = None
    """LAYBY_NATS_CA_FILE: PEM bundle that signs the NATS server's certificate (``tls://`` URLs)."""

    @property
    def names(self) -> Names:
        return Names(self.namespace)


def parse_positive_float(var: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{var} must be a number, got {raw!r}") from None
    if not value > 0:
        raise SettingsError(f"{var} must be > 0, got {raw!r}")
    return value


def parse_positive_int(var: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{var} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise SettingsError(f"{var} must be > 0, got {raw!r}")
    return value


def parse_port(var: str, raw: str) -> int:
    value = parse_positive_int(var, raw)
    if value > 65535:
        raise SettingsError(f"{var} must be a port number (1-65535), got {raw!r}")
    return value


def parse_max_concurrent(var: str, raw: str) -> int | None:
    if raw.strip().lower() in {"", "none", "unlimited"}:
        return None
    return parse_positive_int(var, raw)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _seconds(text: str) -> float:
    """``text`` (lower case) as seconds: a number, or a number and a unit (s, m, h, d)."""
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit else text
    return float(number) * (unit or 1.0)


def parse_retention(var: str, raw: str) -> float | None:
    if raw.strip().lower() in {"", "forever", "none", "keep-forever"}:
        return None
    return _positive_seconds(var, raw, forever=True)


def parse_duration(var: str, raw: str) -> float:
    """Seconds or a duration such as 7d, 12h, 90m, as ``parse_retention`` reads them, with no
    ``forever``."""
    return _positive_seconds(var, raw, forever=False)


def _positive_seconds(var: str, raw: str, *, forever: bool) -> float:
    """``raw`` as a positive number of seconds; ``forever``: the refusals say it was allowed."""
    try:
        value = _seconds(raw.strip().lower())
    except ValueError:
        such_as = "30d, 12h, 90m; or 'forever'" if forever else "7d, 12h, 90m"
        raise SettingsError(f"{var} must be seconds or a duration such as {such_as}; got {raw!r}") from None
    if not (0 < value < float("inf")):
        or_forever = " (or 'forever')" if forever else ""
        raise SettingsError(f"{var} must be > 0{or_forever}, got {raw!r}")
    return value


def parse_name_token(var: str, raw: str) -> str:
    if not raw or not all(c.isalnum() or c in "_-" for c in raw):
        raise SettingsError(f"{var} must be letters, digits, '-' or '_', got {raw!r}")
    return raw


def parse_choice(*choices: str) -> Callable[[str, str], str]:
    def parse(var: str, raw: str) -> str:
        if raw.lower() not in choices:
            raise SettingsError(f"{var} must be one of {', '.join(choices)}, got {raw!r}")
        return raw.lower()

    return parse


def check_public_base_url(var: str, raw: str) -> str:
    """https origin; http only for loopback hosts (docs/doors/callback.md#callback-url)."""
    parts = urlsplit(raw)
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" and host:
        return raw.rstrip("/")
    if parts.scheme == "http" and host in LOOPBACK_HOSTS:
        return raw.rstrip("/")
    if parts.scheme == "http" and host:
        try:
            if ipaddress.ip_address(host).is_loopback:
                return raw.rstrip("/")
        except ValueError:
            pass
    raise SettingsError(
        f"{var} must be an https:// origin (http:// only for localhost, 127.0.0.1 or ::1), got {raw!r}"
    )


def parse_text(_var: str, raw: str) -> str:
    return raw


def parse_seed(var: str, raw: str) -> str:
    """A NATS user seed: ``SU`` and 56 base32 characters in all (never echoed back)."""
    text = raw.strip()
    if len(text) != 58 or not text.startswith("SU") or not all(c in _BASE32 for c in text):
        raise SettingsError(f"{var} must be a NATS user seed (58 characters starting with SU)")
    return text


def read_seed_file(var: str, raw: str) -> str:
    try:
        with open(raw, encoding="ascii") as handle:
            return parse_seed(var, handle.read())
    except OSError as exc:
        raise SettingsError(f"{var}: cannot read {raw!r} ({exc.strerror})") from None


def parse_readable_file(var: str, raw: str) -> str:
    if not os.path.isfile(raw) or not os.access(raw, os.R_OK):
        raise SettingsError(f"{var}: {raw!r} is not a readable file")
    return raw


_BASE32 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")


CLIENT_FIELDS: dict[str, tuple[str, Parser]] = {
    "LAYBY_NATS_URL": ("nats_url", parse_text),
    "LAYBY_NAMESPACE": ("namespace", parse_name_token),
    "LAYBY_TOKEN": ("token", parse_text),
    "LAYBY_URL": ("url", parse_text),
    "LAYBY_DATA_DIR": ("data_dir", parse_text),
    "LAYBY_LOG_FORMAT": ("log_format", parse_choice("json", "console")),
    "LAYBY_LOG_LEVEL": ("log_level", parse_choice("debug", "info", "warning", "error")),
    "INTERACTIONS_ANSWER_TIMEOUT_SECONDS": ("answer_timeout_seconds", parse_positive_float),
    "INTERACTIONS_PUBLIC_BASE_URL": ("public_base_url", check_public_base_url),
    "LAYBY_CONTINUATION_ACK_WAIT_SECONDS": ("continuation_ack_wait_seconds", parse_positive_float),
    "LAYBY_CONTINUATION_MAX_ATTEMPTS": ("continuation_max_attempts", parse_positive_int),
    "LAYBY_NATS_SEED_FILE": ("nats_seed", read_seed_file),
    "LAYBY_NATS_SEED": ("nats_seed", parse_seed),
    "LAYBY_NATS_CA_FILE": ("nats_ca_file", parse_readable_file),
}


_EMPTY_MEANS_NONE = frozenset({"max_concurrent", "max_concurrent_caller", "checkpoint_retention_seconds"})
"""Fields whose empty value is a value (no cap, no horizon), not an unset variable."""


def read_fields(fields: Mapping[str, tuple[str, Parser]], env: Mapping[str, str] | None) -> dict[str, Any]:
    """Parse every variable of ``fields`` present in ``env`` (default ``os.environ``)."""
    source = os.environ if env is None else env
    values: dict[str, Any] = {}
    for var, (field, parse) in fields.items():
        raw = source.get(var)
        if raw is None or (raw == "" and field not in _EMPTY_MEANS_NONE):
            continue
        values[field] = parse(var, raw)
    return values


def load_client_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> ClientSettings:
    """Read the SDK's variables, validate, and freeze."""
    values = read_fields(CLIENT_FIELDS, env)
    values.update(overrides)
    return ClientSettings(**values)
