"""Signed webhooks out, the pure part (docs/webhooks.md): which ``notify_url`` an ask may name,
the body of an outcome, its stable id, its signature and the retry schedule.

Nothing here resolves names or sends anything: the ask service and the delivery service resolve
the host and pass the addresses in, so the same rule judges the ask and every send.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from collections.abc import Container, Iterable
from datetime import datetime
from urllib.parse import urlsplit

import msgspec

from layby_contracts.errors import BadInput
from layby_contracts.events import EXPIRY_ANSWERER, InteractionAnswered, InteractionAsked, InteractionRemoved
from layby_contracts.webhooks import WebhookBody, WebhookData

MAX_URL_LENGTH = 2048
SECRET_PREFIX = "whsec_"  # noqa: S105 - the scheme's prefix, not a secret
FIELD = "notify_url"


def _refuse(why: str) -> BadInput:
    return BadInput(f"notify_url {why}", field=FIELD)


def blocked_address(address: str) -> bool:
    """Whether an address lies where a webhook must not go unless private targets are allowed:
    private, loopback, link-local, multicast, reserved or unspecified (an IPv4-mapped IPv6
    address is judged as the IPv4 address it carries)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip.sixtofour is not None:
            ip = ip.sixtofour
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def literal_address(host: str) -> str | None:
    """The host as an IP address when it is one (brackets of an IPv6 literal removed)."""
    try:
        return str(ipaddress.ip_address(host.strip("[]").split("%", 1)[0]))
    except ValueError:
        return None


def check_notify_url(url: str, *, allow_http: bool = False) -> str:
    """The URL's host, when the URL's own shape is acceptable: absolute https (http only when
    allowed), no credentials, at most 2048 characters; raises ``BadInput`` naming ``notify_url``."""
    if len(url) > MAX_URL_LENGTH:
        raise _refuse(f"must be at most {MAX_URL_LENGTH} characters")
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise _refuse("must not contain whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise _refuse(f"is not a valid URL: {exc}") from None
    del port
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http") or not parts.netloc:
        raise _refuse("must be an absolute https URL")
    if scheme == "http" and not allow_http:
        raise _refuse("must use https (http is allowed only with LAYBY_WEBHOOKS_ALLOW_HTTP)")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise _refuse("must not carry credentials")
    if parts.fragment:
        raise _refuse("must not carry a fragment")
    host = parts.hostname
    if not host:
        raise _refuse("must name a host")
    return host


def check_addresses(host: str, addresses: Iterable[str], *, allow_private: bool) -> None:
    """Refuse a host that is, or resolves to, a blocked address (unless private targets are
    allowed); ``addresses`` are what the host resolved to (the literal itself for an IP host)."""
    found = list(addresses)
    if not found:
        raise _refuse(f"host {host!r} does not resolve")
    if allow_private:
        return
    for address in found:
        if blocked_address(address):
            raise _refuse(
                f"host {host!r} resolves to a private, loopback, link-local, multicast or reserved "
                "address (allowed only with LAYBY_WEBHOOKS_ALLOW_PRIVATE)"
            )


def parse_webhook_secrets(raw: str | None) -> dict[str, bytes]:
    """``LAYBY_WEBHOOKS_OUT_SECRETS``: a JSON object from identity to ``whsec_<base64>``; returns the
    decoded keys. Raises ``ValueError`` naming the identity whose secret is malformed (never the
    secret)."""
    if raw is None or not raw.strip():
        return {}
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise ValueError('must be a JSON object {"<identity>": "whsec_<base64>"}') from None
    if not isinstance(value, dict):
        # A settings error, reported as ValueError like every other one.
        raise ValueError('must be a JSON object {"<identity>": "whsec_<base64>"}')  # noqa: TRY004
    secrets: dict[str, bytes] = {}
    for identity, secret in value.items():
        if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
            raise ValueError(f"secret of {identity!r} must start with {SECRET_PREFIX}")
        try:
            key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
        except ValueError:
            raise ValueError(f"secret of {identity!r} is not base64 after {SECRET_PREFIX}") from None
        if len(key) < 24:
            raise ValueError(f"secret of {identity!r} must hold at least 24 bytes")
        secrets[identity] = key
    return secrets


def check_secret(identity: str, signers: Container[str]) -> None:
    """An identity that names a notify_url must have a signing secret."""
    if identity not in signers:
        raise _refuse(
            f"needs a signing secret for identity {identity!r}: add it to LAYBY_WEBHOOKS_OUT_SECRETS "
            "(docs/webhooks.md#secrets)"
        )


def webhook_id(interaction_id: str, seq: int) -> str:
    """The id of one outcome: the interaction and the sequence of its resolving event, so every
    retry and every redelivery of that outcome carries the same id."""
    return f"msg_{interaction_id}_{seq}"


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def body_of(asked: InteractionAsked, resolution: InteractionAnswered | InteractionRemoved) -> WebhookBody:
    """The outcome of a question as its webhook tells it; a sensitive answer is never included."""
    if isinstance(resolution, InteractionRemoved):
        expired = resolution.reason == "timeout"
        data = WebhookData(
            interaction_id=resolution.interaction_id,
            group_id=resolution.group_id,
            outcome="expired" if expired else "removed",
            resolved_at=resolution.removed_at,
            reason=None if expired else resolution.reason,
            sensitive=asked.sensitive,
            run_id=asked.run_id,
        )
        return WebhookBody(type=f"interaction.{data.outcome}", timestamp=resolution.removed_at, data=data)
    expired = resolution.answered_by == EXPIRY_ANSWERER
    sensitive = asked.sensitive or resolution.sensitive
    data = WebhookData(
        interaction_id=resolution.interaction_id,
        group_id=resolution.group_id,
        outcome="expired" if expired else "answered",
        resolved_at=resolution.answered_at,
        answer=None if sensitive or expired else resolution.answer,
        sensitive=sensitive,
        answered_by=None if expired else resolution.answered_by,
        via=resolution.via,
        run_id=asked.run_id,
    )
    return WebhookBody(type=f"interaction.{data.outcome}", timestamp=resolution.answered_at, data=data)


def encode_body(body: WebhookBody) -> bytes:
    return msgspec.json.encode(body)


def retry_delay(attempt: int, *, base: float, cap: float) -> float:
    """The pause after failed attempt ``attempt`` (1-based): ``base * 2^(attempt-1)``, at most ``cap``."""
    return float(min(base * 2 ** max(attempt - 1, 0), cap))


def past_deadline(resolved_at: datetime, now: datetime, deadline_seconds: float) -> bool:
    return (now - resolved_at).total_seconds() >= deadline_seconds
