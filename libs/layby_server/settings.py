"""The server's settings: the SDK's settings plus what the services need.

One frozen Struct, loaded once from the environment at start-up and passed down; business code
never reads ``os.environ``. Invalid values fail at start-up naming the variable. Every variable is
listed with its meaning in docs/configuration.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from layby.settings import (
    CLIENT_FIELDS,
    ClientSettings,
    Parser,
    SettingsError,
    check_public_base_url,
    parse_duration,
    parse_max_concurrent,
    parse_name_token,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    parse_retention,
    parse_text,
    read_fields,
)
from layby_contracts.limits import KEEPALIVE_SECONDS, MAX_BODY_BYTES_DEFAULT
from layby_server.store.limits import check_log_horizon
from layby_server.store.sealing import parse_keys

__all__ = [
    "WAITING_OUTCOME_RETENTION_SECONDS",
    "Settings",
    "SettingsError",
    "check_public_base_url",
    "load_settings",
]

WAITING_OUTCOME_RETENTION_SECONDS = 7 * 86400.0


class Settings(ClientSettings, frozen=True, kw_only=True):
    database_url: str | None = None
    """LAYBY_DATABASE_URL: PostgreSQL DSN; unset means embedded (``layby up``)."""
    db_schema: str = "layby"
    """LAYBY_DB_SCHEMA: PostgreSQL schema that holds the projections."""
    api_tokens: str | None = None
    """LAYBY_API_TOKENS: comma-separated TOKEN:IDENTITY:ROLE (ROLE is operator or user)."""
    http_host: str = "127.0.0.1"
    """LAYBY_HTTP_HOST: address the door binds."""
    http_port: int = 8000
    """LAYBY_HTTP_PORT: port the door binds."""
    http_reuse_port: bool = False
    """LAYBY_HTTP_REUSE_PORT: on lets several door processes on one host share the port, the
    kernel spreading connections among them (``layby up --replicas``; Linux's SO_REUSEPORT)."""
    health_port: int | None = None
    """LAYBY_HEALTH_PORT: where every service serves /metrics, and a service without a door
    /healthz and /readyz too (on LAYBY_HTTP_HOST); unset serves nothing (docs/kubernetes.md#probes,
    docs/observability.md)."""
    access_log: bool = True
    """LAYBY_ACCESS_LOG: on or off (default on) — the door's one log line per request
    (docs/observability.md#the-access-log)."""
    metrics_interval_seconds: float = 15.0
    """LAYBY_METRICS_INTERVAL_SECONDS: how often the gauges read from JetStream and the read
    models are refreshed (docs/observability.md#the-metrics)."""
    nats_monitor_url: str | None = None
    """LAYBY_NATS_MONITOR_URL: NATS's monitoring endpoints (``http://nats:8222``, every node's,
    comma-separated); only ``layby doctor`` reads them, for what NATS tells nobody else: its sync
    setting, its cluster's size, its clock (docs/operations.md#layby-doctor)."""
    stream_replicas: int = 1
    """LAYBY_STREAM_REPLICAS: JetStream replicas of the event log (3 on a clustered deployment)."""
    sse_resume_window: int = 10000
    """LAYBY_SSE_RESUME_WINDOW: how many recent events a Last-Event-ID may reach back over."""
    sse_max_clients: int = 20000
    """LAYBY_SSE_MAX_CLIENTS: stream door clients one door process serves at once; more get 503
    with Retry-After (docs/doors/stream.md#capacity)."""
    sse_client_buffer: int = 1000
    """LAYBY_SSE_CLIENT_BUFFER: frames a stream client may have waiting; a client further behind
    is dropped with a final ``stream.evicted`` frame and resumes (docs/doors/stream.md#slow-clients).
    The shared tail also keeps this many recent frames for resuming clients."""
    http_poll_max_wait_seconds: float = 30.0
    """LAYBY_HTTP_POLL_MAX_WAIT_SECONDS: the longest an outcome long poll waits
    (``GET /api/interactions/{id}/outcome?wait=``; a larger ``wait`` is cut to this;
    docs/doors/asks.md#the-outcome)."""
    http_max_long_polls: int = 1000
    """LAYBY_HTTP_MAX_LONG_POLLS: outcome long polls one door process holds at once; more get 503
    with Retry-After (docs/doors/asks.md#the-bound)."""
    sse_keepalive_seconds: float = KEEPALIVE_SECONDS
    """LAYBY_SSE_KEEPALIVE_SECONDS: idle time before the stream sends ': keepalive' (spec: 15)."""
    sweep_interval_seconds: float = 1.0
    """LAYBY_SWEEP_INTERVAL_SECONDS: how often the sweeper looks for passed deadlines."""
    idle_ttl_seconds: float = 86400.0
    """INTERACTIONS_IDLE_TTL_SECONDS: how long answered records and secrets are kept."""
    max_body_bytes: int = MAX_BODY_BYTES_DEFAULT
    """INTERACTIONS_CALLBACK_MAX_BODY_BYTES: cap on every body the doors read (actual bytes)."""
    max_concurrent: int | None = 1000
    """INTERACTIONS_MAX_CONCURRENT: open to-user questions platform-wide; unset/none = unlimited."""
    max_concurrent_caller: int | None = 10000
    """INTERACTIONS_MAX_CONCURRENT_CALLER: open caller asks and the waiting outcomes they leave,
    platform-wide, apart from the to-user cap; unset/none = unlimited."""
    waiting_outcome_retention_seconds: float = WAITING_OUTCOME_RETENTION_SECONDS
    """LAYBY_WAITING_OUTCOME_RETENTION: how long a waiting outcome nobody takes is kept, and
    counted, before it is dropped (seconds, or a duration such as 7d / 12h / 90m; default 7 days).
    Never ``forever``: an outcome nobody takes would hold its caller slot for good."""
    blocking_grace_seconds: float = 5.0
    """INTERACTIONS_BLOCKING_GRACE_SECONDS: grace before an abandoned sync question is swept."""
    checkpoint_retention_seconds: float | None = None
    """LAYBY_CHECKPOINT_RETENTION: how long a parked run's checkpoint is kept (seconds, or a
    duration such as 30d / 12h / 90m); unset or ``forever`` keeps it forever. A park whose
    ``expiry_at`` lies beyond now + retention is refused."""
    secrets_key: str | None = None
    """LAYBY_SECRETS_KEY: KEY[,KEY...] that seal sensitive answers at rest (the first seals, all
    open: docs/security.md#sensitive-answers-at-rest). The door and the resume service need it."""
    webhook_secrets: str | None = None
    """LAYBY_WEBHOOK_SECRETS: NAME:SECRET,... — the secrets webhook verifiers name (door only)."""
    media_retention_seconds: float = 30 * 86400.0
    """LAYBY_MEDIA_RETENTION_SECONDS: how long inline images of questions are served (default 30
    days); a question that would outlive it with an inline image is refused."""
    expiry_poll_seconds: float = 0.2
    """LAYBY_EXPIRY_POLL_SECONDS: how often the sweeper looks for async parks past ``expiry_at``."""
    channels: str | None = None
    """LAYBY_CHANNELS: JSON {"<name>": {"plugin": "webhook" or "module:attr", ...config}} (see
    docs/channels.md); the ask service checks asks against it, the delivery service sends."""
    notifications_feed_max: int = 1000
    """INTERACTIONS_NOTIFICATIONS_FEED_MAX: notifications each feed keeps, newest first (the shared
    feed and each identity's; docs/notifications.md#the-feed)."""
    notifications_feed_ttl_seconds: float = 2592000.0
    """INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS: an identity's own feed expires once its newest
    notification is this old (default 30 days); the shared feed never expires."""
    delivery_max_attempts: int = 3
    """INTERACTIONS_DELIVERY_MAX_ATTEMPTS: send attempts per channel question (retryable faults only)."""
    delivery_backoff_seconds: float = 1.0
    """LAYBY_DELIVERY_BACKOFF_SECONDS: the first retry's pause; each later one doubles it."""
    webhooks_out_secrets: str | None = None
    """LAYBY_WEBHOOKS_OUT_SECRETS: JSON {"<identity>": "whsec_<base64>"}: the key each asking
    identity's webhooks are signed with (docs/webhooks.md#secrets)."""
    webhooks_allow_http: bool = False
    """LAYBY_WEBHOOKS_ALLOW_HTTP: accept http:// notify URLs (tests, a trusted network)."""
    webhooks_allow_private: bool = False
    """LAYBY_WEBHOOKS_ALLOW_PRIVATE: accept notify URLs whose host is or resolves to a private,
    loopback, link-local, multicast or reserved address."""
    webhooks_deadline_seconds: float = 86400.0
    """LAYBY_WEBHOOKS_DEADLINE_SECONDS: how long after the outcome a webhook is retried."""
    webhooks_timeout_seconds: float = 10.0
    """LAYBY_WEBHOOKS_TIMEOUT_SECONDS: one attempt's bound (connect, send and the response)."""
    webhooks_backoff_seconds: float = 5.0
    """LAYBY_WEBHOOKS_BACKOFF_SECONDS: the first retry's pause; each later one doubles it."""
    webhooks_backoff_max_seconds: float = 3600.0
    """LAYBY_WEBHOOKS_BACKOFF_MAX_SECONDS: the longest pause between two attempts."""
    callback_ask_wait_seconds: float = 5.0
    """LAYBY_CALLBACK_ASK_WAIT_SECONDS: how long a callback on a bound ticket waits for its
    question to be recorded (an outside system may call back before the ask lands)."""
    rate_limits: bool = False
    """LAYBY_RATE_LIMITS: on or off (default off) — per-client fixed-window limits at the doors
    (docs/doors/common.md#rate-limits); on in the shipped compose and Kubernetes manifests."""
    http_max_headers: int = 100
    """LAYBY_HTTP_MAX_HEADERS: header fields a request may carry; more is a 431."""
    http_max_header_bytes: int = 16384
    """LAYBY_HTTP_MAX_HEADER_BYTES: total bytes of a request's header names and values; more is a 431."""
    http_header_timeout_seconds: float = 10.0
    """LAYBY_HTTP_HEADER_TIMEOUT_SECONDS: time a client has to send a request's head; then 408."""
    jq_timeout_seconds: float = 1.0
    """LAYBY_JQ_TIMEOUT_SECONDS: how long one visit's door programs may run together."""
    jq_processes: int = 2
    """LAYBY_JQ_PROCESSES: child processes that run door programs, per service process."""
    visit_wait_max_seconds: float = 30.0
    """LAYBY_VISIT_WAIT_MAX_SECONDS: the longest ``wait`` a visit may ask for its next outcome."""
    events_max_age_seconds: float | None = None
    """LAYBY_EVENTS_MAX_AGE: how long the event log keeps an event (a duration such as 400d);
    unset or ``forever`` keeps every event (docs/operations.md#retention)."""
    events_max_bytes: int | None = None
    """LAYBY_EVENTS_MAX_BYTES: the event log's size cap in bytes, oldest events dropped first;
    unset or ``forever`` means no cap (docs/operations.md#retention)."""
    tickets_max_age_seconds: float | None = None
    """LAYBY_TICKETS_MAX_AGE: how long a callback ticket is kept after it was last written;
    unset or ``forever`` keeps tickets (docs/operations.md#retention)."""
    resolved_retention_seconds: float | None = 30 * 86400.0
    """LAYBY_RESOLVED_RETENTION: how long an answered or removed question stays in the
    ``interactions`` table and the done list (default 30d; ``forever`` keeps it)."""
    run_retention_seconds: float | None = 30 * 86400.0
    """LAYBY_RUN_RETENTION: how long a finished or cancelled run stays in the ``runs`` table
    (default 30d; ``forever`` keeps it); a failed run, which may be retried, stays."""
    gone_entry_retention_seconds: float | None = 7 * 86400.0
    """LAYBY_GONE_ENTRY_RETENTION: how long a caller ask that is gone (taken, removed, settled as
    parked) stays in ``parked_entries`` (default 7d; ``forever`` keeps it)."""
    tracing: bool = False
    """LAYBY_TRACING: on, off or auto (the default): auto traces when OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER (not ``none``) is set, unless
    OTEL_SDK_DISABLED is true (docs/tracing.md#turning-it-on)."""
    traces_exporter: str = "otlp"
    """OTEL_TRACES_EXPORTER: where spans go when tracing is on — ``otlp`` (OTLP over HTTP, the
    standard OTEL_EXPORTER_OTLP_* variables configure it) or ``console``; ``none`` turns auto off."""
    explicit: frozenset[str] = frozenset()
    """The variables the environment (or an override) set: a stream limit is Layby's to rewrite
    on a stream that exists only when its variable is here (docs/operations.md#who-owns-a-limit)."""


def _switch(var: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("on", "true", "1", "yes"):
        return True
    if value in ("off", "false", "0", "no"):
        return False
    raise SettingsError(f"{var} must be on or off, got {raw!r}")


def _tracing(var: str, raw: str) -> bool | None:
    """on / off, or None for auto (decided from the OpenTelemetry variables in ``load_settings``)."""
    return None if raw.strip().lower() == "auto" else _switch(var, raw)


TRACES_EXPORTERS = ("otlp", "console", "none")


def _traces_exporter(var: str, raw: str) -> str:
    # The SDK's variable may list several exporters; Layby sends spans to one.
    name = raw.split(",", maxsplit=1)[0].strip().lower() or "otlp"
    if name not in TRACES_EXPORTERS:
        raise SettingsError(f"{var} must be one of {', '.join(TRACES_EXPORTERS)}, got {raw!r}")
    return name


def _tracing_auto(source: Mapping[str, str]) -> bool:
    """Auto: an exporter was configured the standard OpenTelemetry way."""
    if source.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = source.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter.startswith("none"):
        return False
    return bool(
        exporter
        or source.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or source.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


def _channels(var: str, raw: str) -> str:
    from layby_server.channels import parse_channels

    return _checked(var, raw, parse_channels)


def _webhook_secrets(var: str, raw: str) -> str:
    from layby_domain.webhooks import parse_webhook_secrets

    return _checked(var, raw, parse_webhook_secrets)


def _checked(var: str, raw: str, check: Callable[[str], object]) -> str:
    """``raw`` once ``check`` took it; its ValueError, prefixed with the variable, fails start-up."""
    try:
        check(raw)
    except ValueError as exc:
        raise SettingsError(f"{var} {exc}") from None
    return raw


def _monitor_urls(var: str, raw: str) -> str:
    from urllib.parse import urlsplit

    urls = [part.strip() for part in raw.split(",") if part.strip()]
    if not urls:
        raise SettingsError(f"{var} must name at least one http:// or https:// URL")
    for index, url in enumerate(urls, start=1):
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise SettingsError(f"{var} URL {index} must be http:// or https:// with a host")
    return ",".join(urls)


def _max_bytes(var: str, raw: str) -> int | None:
    text = raw.strip().lower()
    if text in {"", "forever", "none"}:
        return None
    return parse_positive_int(var, raw)


SERVER_FIELDS: dict[str, tuple[str, Parser]] = {
    "LAYBY_DATABASE_URL": ("database_url", parse_text),
    "LAYBY_DB_SCHEMA": ("db_schema", parse_name_token),
    "LAYBY_API_TOKENS": ("api_tokens", parse_text),
    "LAYBY_HTTP_HOST": ("http_host", parse_text),
    "LAYBY_HTTP_PORT": ("http_port", parse_port),
    "LAYBY_HEALTH_PORT": ("health_port", parse_port),
    "LAYBY_ACCESS_LOG": ("access_log", _switch),
    "LAYBY_HTTP_REUSE_PORT": ("http_reuse_port", _switch),
    "LAYBY_METRICS_INTERVAL_SECONDS": ("metrics_interval_seconds", parse_positive_float),
    "LAYBY_NATS_MONITOR_URL": ("nats_monitor_url", _monitor_urls),
    "LAYBY_STREAM_REPLICAS": ("stream_replicas", parse_positive_int),
    "LAYBY_SSE_RESUME_WINDOW": ("sse_resume_window", parse_positive_int),
    "LAYBY_SSE_KEEPALIVE_SECONDS": ("sse_keepalive_seconds", parse_positive_float),
    "LAYBY_SSE_MAX_CLIENTS": ("sse_max_clients", parse_positive_int),
    "LAYBY_SSE_CLIENT_BUFFER": ("sse_client_buffer", parse_positive_int),
    "LAYBY_HTTP_POLL_MAX_WAIT_SECONDS": ("http_poll_max_wait_seconds", parse_positive_float),
    "LAYBY_HTTP_MAX_LONG_POLLS": ("http_max_long_polls", parse_positive_int),
    "LAYBY_SWEEP_INTERVAL_SECONDS": ("sweep_interval_seconds", parse_positive_float),
    "INTERACTIONS_IDLE_TTL_SECONDS": ("idle_ttl_seconds", parse_positive_float),
    "INTERACTIONS_CALLBACK_MAX_BODY_BYTES": ("max_body_bytes", parse_positive_int),
    "INTERACTIONS_MAX_CONCURRENT": ("max_concurrent", parse_max_concurrent),
    "INTERACTIONS_MAX_CONCURRENT_CALLER": ("max_concurrent_caller", parse_max_concurrent),
    "LAYBY_WAITING_OUTCOME_RETENTION": ("waiting_outcome_retention_seconds", parse_duration),
    "INTERACTIONS_BLOCKING_GRACE_SECONDS": ("blocking_grace_seconds", parse_positive_float),
    "LAYBY_CHECKPOINT_RETENTION": ("checkpoint_retention_seconds", parse_retention),
    "LAYBY_EXPIRY_POLL_SECONDS": ("expiry_poll_seconds", parse_positive_float),
    "LAYBY_MEDIA_RETENTION_SECONDS": ("media_retention_seconds", parse_positive_float),
    "LAYBY_WEBHOOK_SECRETS": ("webhook_secrets", parse_text),
    "LAYBY_SECRETS_KEY": ("secrets_key", parse_keys),
    "LAYBY_CHANNELS": ("channels", _channels),
    "INTERACTIONS_DELIVERY_MAX_ATTEMPTS": ("delivery_max_attempts", parse_positive_int),
    "INTERACTIONS_NOTIFICATIONS_FEED_MAX": ("notifications_feed_max", parse_positive_int),
    "INTERACTIONS_NOTIFICATIONS_FEED_TTL_SECONDS": ("notifications_feed_ttl_seconds", parse_positive_float),
    "LAYBY_DELIVERY_BACKOFF_SECONDS": ("delivery_backoff_seconds", parse_positive_float),
    "LAYBY_WEBHOOKS_OUT_SECRETS": ("webhooks_out_secrets", _webhook_secrets),
    "LAYBY_WEBHOOKS_ALLOW_HTTP": ("webhooks_allow_http", _switch),
    "LAYBY_WEBHOOKS_ALLOW_PRIVATE": ("webhooks_allow_private", _switch),
    "LAYBY_WEBHOOKS_DEADLINE_SECONDS": ("webhooks_deadline_seconds", parse_positive_float),
    "LAYBY_WEBHOOKS_TIMEOUT_SECONDS": ("webhooks_timeout_seconds", parse_positive_float),
    "LAYBY_WEBHOOKS_BACKOFF_SECONDS": ("webhooks_backoff_seconds", parse_positive_float),
    "LAYBY_WEBHOOKS_BACKOFF_MAX_SECONDS": ("webhooks_backoff_max_seconds", parse_positive_float),
    "LAYBY_CALLBACK_ASK_WAIT_SECONDS": ("callback_ask_wait_seconds", parse_positive_float),
    "LAYBY_RATE_LIMITS": ("rate_limits", _switch),
    "LAYBY_HTTP_MAX_HEADERS": ("http_max_headers", parse_positive_int),
    "LAYBY_HTTP_MAX_HEADER_BYTES": ("http_max_header_bytes", parse_positive_int),
    "LAYBY_HTTP_HEADER_TIMEOUT_SECONDS": ("http_header_timeout_seconds", parse_positive_float),
    "LAYBY_JQ_TIMEOUT_SECONDS": ("jq_timeout_seconds", parse_positive_float),
    "LAYBY_JQ_PROCESSES": ("jq_processes", parse_positive_int),
    "LAYBY_VISIT_WAIT_MAX_SECONDS": ("visit_wait_max_seconds", parse_positive_float),
    "LAYBY_EVENTS_MAX_AGE": ("events_max_age_seconds", parse_retention),
    "LAYBY_EVENTS_MAX_BYTES": ("events_max_bytes", _max_bytes),
    "LAYBY_TICKETS_MAX_AGE": ("tickets_max_age_seconds", parse_retention),
    "LAYBY_RESOLVED_RETENTION": ("resolved_retention_seconds", parse_retention),
    "LAYBY_RUN_RETENTION": ("run_retention_seconds", parse_retention),
    "LAYBY_GONE_ENTRY_RETENTION": ("gone_entry_retention_seconds", parse_retention),
    "LAYBY_TRACING": ("tracing", _tracing),
    "OTEL_TRACES_EXPORTER": ("traces_exporter", _traces_exporter),
}


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Read every known variable from ``env`` (default ``os.environ``), validate, and freeze."""
    fields = {**CLIENT_FIELDS, **SERVER_FIELDS}
    values = read_fields(fields, env)
    values.update(overrides)
    source = os.environ if env is None else env
    if values.get("tracing") is None:
        values["tracing"] = _tracing_auto(source)
    by_field = {field: var for var, (field, _) in fields.items()}
    values["explicit"] = frozenset(
        {var for var in fields if source.get(var)}
        | {by_field[name] for name in overrides if name in by_field}
    )
    settings = Settings(**values)
    check_log_horizon(settings)
    if settings.api_tokens is not None:
        from layby_server.auth import parse_tokens

        parse_tokens(settings.api_tokens)
    return settings
