"""Settings: one frozen Struct, loaded once from the environment, passed down (CONVENTIONS 8).

Business code never reads ``os.environ``. Invalid values fail at start-up naming the variable.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from contracts.limits import KEEPALIVE_SECONDS, MAX_BODY_BYTES_DEFAULT
from contracts.subjects import Names

T = TypeVar("T")

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class SettingsError(ValueError):
    """A setting is invalid; the message names the environment variable."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    nats_url: str | None = None
    """LAYBY_NATS_URL: NATS server with JetStream; unset means embedded (``layby up``) or runtime file."""
    database_url: str | None = None
    """LAYBY_DATABASE_URL: PostgreSQL DSN; unset means embedded (``layby up``)."""
    namespace: str = "layby"
    """LAYBY_NAMESPACE: prefix of every stream, subject and consumer name."""
    db_schema: str = "layby"
    """LAYBY_DB_SCHEMA: PostgreSQL schema that holds the projections."""
    api_tokens: str | None = None
    """LAYBY_API_TOKENS: comma-separated TOKEN:IDENTITY:ROLE (ROLE is operator or user)."""
    token: str | None = None
    """LAYBY_TOKEN: the SDK's and the CLI's bearer token (the asker's identity is the token's)."""
    url: str | None = None
    """LAYBY_URL: the door's base URL, for the CLI."""
    http_host: str = "127.0.0.1"
    """LAYBY_HTTP_HOST: address the door binds."""
    http_port: int = 8000
    """LAYBY_HTTP_PORT: port the door binds."""
    data_dir: str | None = None
    """LAYBY_DATA_DIR: embedded data and the runtime file; default a per-user data directory."""
    log_format: str = "json"
    """LAYBY_LOG_FORMAT: json (production) or console (humans)."""
    log_level: str = "info"
    """LAYBY_LOG_LEVEL: debug, info, warning or error."""
    stream_replicas: int = 1
    """LAYBY_STREAM_REPLICAS: JetStream replicas of the event log (3 on a clustered deployment)."""
    sse_resume_window: int = 10000
    """LAYBY_SSE_RESUME_WINDOW: how many recent events a Last-Event-ID may reach back over."""
    sse_keepalive_seconds: float = KEEPALIVE_SECONDS
    """LAYBY_SSE_KEEPALIVE_SECONDS: idle time before the stream sends ': keepalive' (spec: 15)."""
    sweep_interval_seconds: float = 1.0
    """LAYBY_SWEEP_INTERVAL_SECONDS: how often the sweeper looks for passed deadlines."""
    answer_timeout_seconds: float = 3600.0
    """INTERACTIONS_ANSWER_TIMEOUT_SECONDS: default sync budget."""
    idle_ttl_seconds: float = 86400.0
    """INTERACTIONS_IDLE_TTL_SECONDS: how long answered records and secrets are kept."""
    public_base_url: str | None = None
    """INTERACTIONS_PUBLIC_BASE_URL: https origin for callback URLs (http only on loopback)."""
    max_body_bytes: int = MAX_BODY_BYTES_DEFAULT
    """INTERACTIONS_CALLBACK_MAX_BODY_BYTES: cap on every body the doors read (actual bytes)."""
    max_concurrent: int | None = 1000
    """INTERACTIONS_MAX_CONCURRENT: open to-user questions platform-wide; unset/none = unlimited."""
    blocking_grace_seconds: float = 5.0
    """INTERACTIONS_BLOCKING_GRACE_SECONDS: grace before an abandoned sync question is swept."""
    checkpoint_retention_seconds: float | None = None
    """LAYBY_CHECKPOINT_RETENTION: how long a parked run's checkpoint is kept (seconds, or a
    duration such as 30d / 12h / 90m); unset or ``forever`` keeps it forever. A park whose
    ``expiry_at`` lies beyond now + retention is refused."""
    webhook_secrets: str | None = None
    """LAYBY_WEBHOOK_SECRETS: NAME:SECRET,... — the secrets webhook verifiers name (door only)."""
    media_retention_seconds: float = 30 * 86400.0
    """LAYBY_MEDIA_RETENTION_SECONDS: how long inline images of questions are served (default 30
    days); a question that would outlive it with an inline image is refused."""
    expiry_poll_seconds: float = 0.2
    """LAYBY_EXPIRY_POLL_SECONDS: how often the sweeper looks for async parks past ``expiry_at``."""
    continuation_ack_wait_seconds: float = 30.0
    """LAYBY_CONTINUATION_ACK_WAIT_SECONDS: a continuation whose worker neither finishes nor
    reports progress within this time is redelivered to another worker."""
    continuation_max_attempts: int = 5
    """LAYBY_CONTINUATION_MAX_ATTEMPTS: executions of a raising continuation before the run fails."""
    channels: str | None = None
    """LAYBY_CHANNELS: JSON {"<name>": {"plugin": "webhook" or "module:attr", ...config}} (see
    docs/channels.md); the ask service checks asks against it, the delivery service sends."""
    delivery_max_attempts: int = 3
    """INTERACTIONS_DELIVERY_MAX_ATTEMPTS: send attempts per channel question (retryable faults only)."""
    delivery_backoff_seconds: float = 1.0
    """LAYBY_DELIVERY_BACKOFF_SECONDS: the first retry's pause; each later one doubles it."""
    callback_ask_wait_seconds: float = 5.0
    """LAYBY_CALLBACK_ASK_WAIT_SECONDS: how long a callback on a bound ticket waits for its
    question to be recorded (an outside system may call back before the ask lands)."""

    @property
    def names(self) -> Names:
        return Names(self.namespace)


def _positive_float(var: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{var} must be a number, got {raw!r}") from None
    if not value > 0:
        raise SettingsError(f"{var} must be > 0, got {raw!r}")
    return value


def _positive_int(var: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{var} must be an integer, got {raw!r}") from None
    if value <= 0:
        raise SettingsError(f"{var} must be > 0, got {raw!r}")
    return value


def _port(var: str, raw: str) -> int:
    value = _positive_int(var, raw)
    if value > 65535:
        raise SettingsError(f"{var} must be a port number (1-65535), got {raw!r}")
    return value


def _max_concurrent(var: str, raw: str) -> int | None:
    if raw.strip().lower() in {"", "none", "unlimited"}:
        return None
    return _positive_int(var, raw)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _retention(var: str, raw: str) -> float | None:
    text = raw.strip().lower()
    if text in {"", "forever", "none", "keep-forever"}:
        return None
    unit = _UNITS.get(text[-1:])
    number = text[:-1] if unit else text
    try:
        value = float(number) * (unit or 1.0)
    except ValueError:
        raise SettingsError(
            f"{var} must be seconds or a duration such as 30d, 12h, 90m; or 'forever'; got {raw!r}"
        ) from None
    if not (0 < value < float("inf")):
        raise SettingsError(f"{var} must be > 0 (or 'forever'), got {raw!r}")
    return value


def _name_token(var: str, raw: str) -> str:
    if not raw or not all(c.isalnum() or c in "_-" for c in raw):
        raise SettingsError(f"{var} must be letters, digits, '-' or '_', got {raw!r}")
    return raw


def _choice(*choices: str) -> Callable[[str, str], str]:
    def parse(var: str, raw: str) -> str:
        if raw.lower() not in choices:
            raise SettingsError(f"{var} must be one of {', '.join(choices)}, got {raw!r}")
        return raw.lower()

    return parse


def check_public_base_url(var: str, raw: str) -> str:
    """https origin; http only for loopback hosts (inventory A22.202)."""
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


def _text(_var: str, raw: str) -> str:
    return raw


def _channels(var: str, raw: str) -> str:
    from layby.channels import parse_channels

    try:
        parse_channels(raw)
    except ValueError as exc:
        raise SettingsError(f"{var} {exc}") from None
    return raw


_FIELDS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "LAYBY_NATS_URL": ("nats_url", _text),
    "LAYBY_DATABASE_URL": ("database_url", _text),
    "LAYBY_NAMESPACE": ("namespace", _name_token),
    "LAYBY_DB_SCHEMA": ("db_schema", _name_token),
    "LAYBY_API_TOKENS": ("api_tokens", _text),
    "LAYBY_TOKEN": ("token", _text),
    "LAYBY_URL": ("url", _text),
    "LAYBY_HTTP_HOST": ("http_host", _text),
    "LAYBY_HTTP_PORT": ("http_port", _port),
    "LAYBY_DATA_DIR": ("data_dir", _text),
    "LAYBY_LOG_FORMAT": ("log_format", _choice("json", "console")),
    "LAYBY_LOG_LEVEL": ("log_level", _choice("debug", "info", "warning", "error")),
    "LAYBY_STREAM_REPLICAS": ("stream_replicas", _positive_int),
    "LAYBY_SSE_RESUME_WINDOW": ("sse_resume_window", _positive_int),
    "LAYBY_SSE_KEEPALIVE_SECONDS": ("sse_keepalive_seconds", _positive_float),
    "LAYBY_SWEEP_INTERVAL_SECONDS": ("sweep_interval_seconds", _positive_float),
    "INTERACTIONS_ANSWER_TIMEOUT_SECONDS": ("answer_timeout_seconds", _positive_float),
    "INTERACTIONS_IDLE_TTL_SECONDS": ("idle_ttl_seconds", _positive_float),
    "INTERACTIONS_PUBLIC_BASE_URL": ("public_base_url", check_public_base_url),
    "INTERACTIONS_CALLBACK_MAX_BODY_BYTES": ("max_body_bytes", _positive_int),
    "INTERACTIONS_MAX_CONCURRENT": ("max_concurrent", _max_concurrent),
    "INTERACTIONS_BLOCKING_GRACE_SECONDS": ("blocking_grace_seconds", _positive_float),
    "LAYBY_CHECKPOINT_RETENTION": ("checkpoint_retention_seconds", _retention),
    "LAYBY_EXPIRY_POLL_SECONDS": ("expiry_poll_seconds", _positive_float),
    "LAYBY_MEDIA_RETENTION_SECONDS": ("media_retention_seconds", _positive_float),
    "LAYBY_WEBHOOK_SECRETS": ("webhook_secrets", _text),
    "LAYBY_CONTINUATION_ACK_WAIT_SECONDS": ("continuation_ack_wait_seconds", _positive_float),
    "LAYBY_CONTINUATION_MAX_ATTEMPTS": ("continuation_max_attempts", _positive_int),
    "LAYBY_CHANNELS": ("channels", _channels),
    "INTERACTIONS_DELIVERY_MAX_ATTEMPTS": ("delivery_max_attempts", _positive_int),
    "LAYBY_DELIVERY_BACKOFF_SECONDS": ("delivery_backoff_seconds", _positive_float),
    "LAYBY_CALLBACK_ASK_WAIT_SECONDS": ("callback_ask_wait_seconds", _positive_float),
}


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read every known variable from ``env`` (default ``os.environ``), validate, and freeze."""
    source = os.environ if env is None else env
    values: dict[str, Any] = {}
    for var, (field, parse) in _FIELDS.items():
        raw = source.get(var)
        if raw is None or (raw == "" and field not in ("max_concurrent", "checkpoint_retention_seconds")):
            continue
        values[field] = parse(var, raw)
    values.update(overrides)
    settings = Settings(**values)
    if settings.api_tokens is not None:
        from layby.auth import parse_tokens

        parse_tokens(settings.api_tokens)
    return settings
