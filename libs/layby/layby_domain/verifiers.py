"""Webhook verifiers for external questions (docs/asking.md#verifiers,
docs/doors/callback.md#verifiers).

An author binds a verifier to an external question: ``{"name": "stripe", "config": {"secret":
"payments"}}``. The callback door verifies the **raw body** with it before anything about the
question is revealed, parsed or recorded, and fails closed: a bad signature is
``VerificationFailed`` (401), a broken binding — unknown verifier, malformed config, a secret
that is not configured — is ``VerifierError`` (500). Secrets never travel with the question; the
binding names one of ``LAYBY_WEBHOOK_SECRETS`` (``NAME:SECRET,...``), known to the door only.
Every comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from layby_contracts.errors import BadInput


class VerificationFailed(Exception):
    """The request is not signed by the holder of the secret."""


class VerifierError(Exception):
    """The binding cannot be checked (unknown verifier, bad config, missing secret, a crash)."""


@dataclass(frozen=True)
class Request:
    body: bytes
    headers: Mapping[str, str]  # lower-case names
    now: float


Check = Callable[[Request, dict[str, Any], bytes], None]


def _header(request: Request, name: str) -> str:
    value = request.headers.get(name.lower())
    if not value:
        raise VerificationFailed(f"missing {name} header")
    return value


def hmac_sha256(request: Request, config: dict[str, Any], secret: bytes) -> None:
    """Generic: ``<header>: [sha256=]<hex HMAC-SHA256 of the raw body>`` (default X-Signature)."""
    header = config.get("header", "X-Signature")
    if not isinstance(header, str) or not header:
        raise VerifierError("hmac-sha256: config.header must be a header name")
    given = _header(request, header).strip().removeprefix("sha256=")
    expected = hmac.new(secret, request.body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise VerificationFailed("signature mismatch")


def github(request: Request, config: dict[str, Any], secret: bytes) -> None:
    """GitHub: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>``."""
    given = _header(request, "X-Hub-Signature-256").strip()
    if not given.startswith("sha256="):
        raise VerificationFailed("X-Hub-Signature-256 must start with sha256=")
    expected = "sha256=" + hmac.new(secret, request.body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise VerificationFailed("signature mismatch")


def stripe(request: Request, config: dict[str, Any], secret: bytes) -> None:
    """Stripe: ``Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">[,v1=...]``,
    the timestamp within ``config.tolerance`` seconds (default 300) of now."""
    tolerance = config.get("tolerance", 300)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or tolerance <= 0:
        raise VerifierError("stripe: config.tolerance must be a positive number of seconds")
    parts: dict[str, list[str]] = {}
    for item in _header(request, "Stripe-Signature").split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    try:
        stamp = int(parts.get("t", [""])[0])
    except ValueError:
        raise VerificationFailed("Stripe-Signature has no valid timestamp") from None
    if abs(request.now - stamp) > tolerance:
        raise VerificationFailed("Stripe-Signature timestamp is outside the tolerance")
    signed = str(stamp).encode() + b"." + request.body
    expected = hmac.new(secret, signed, hashlib.sha256).hexdigest().encode()
    if not any(hmac.compare_digest(sig.encode(), expected) for sig in parts.get("v1", [])):
        raise VerificationFailed("signature mismatch")


VERIFIERS: dict[str, Check] = {"hmac-sha256": hmac_sha256, "github": github, "stripe": stripe}
POST_ONLY = frozenset(VERIFIERS)  # every built-in signs the body: an empty-body GET-style confirm is refused


def check_binding(verifier: object) -> dict[str, Any]:
    """The ask-time check (docs/asking.md#verifiers): a dict with a registered ``name`` and a ``config`` dict
    naming
    its ``secret``; raises ``BadInput`` naming the field."""
    if not isinstance(verifier, dict) or set(verifier) - {"name", "config"}:
        raise BadInput("verifier must be {name, config}", field="verifier")
    name = verifier.get("name")
    if not isinstance(name, str) or not name:
        raise BadInput("verifier.name must be a non-empty string", field="verifier.name")
    if name not in VERIFIERS:
        raise BadInput(
            f"verifier.name {name!r} is not a registered verifier ({', '.join(sorted(VERIFIERS))})",
            field="verifier.name",
        )
    config = verifier.get("config", {})
    if not isinstance(config, dict):
        raise BadInput("verifier.config must be an object", field="verifier.config")
    secret = config.get("secret")
    if not isinstance(secret, str) or not secret:
        raise BadInput(
            "verifier.config.secret must name one of LAYBY_WEBHOOK_SECRETS", field="verifier.config.secret"
        )
    return {"name": name, "config": config}


def parse_secrets(raw: str | None) -> dict[str, bytes]:
    """``LAYBY_WEBHOOK_SECRETS``: ``NAME:SECRET,...`` (a secret may contain ':')."""
    out: dict[str, bytes] = {}
    for entry in (raw or "").split(","):
        name, sep, secret = entry.strip().partition(":")
        if sep and name and secret:
            out[name] = secret.encode()
    return out


def verify(binding: Any, request: Request, secrets: Mapping[str, bytes]) -> None:
    """Raise ``VerificationFailed`` or ``VerifierError``; return only for a good signature."""
    try:
        bound = check_binding(binding)
    except BadInput as exc:
        raise VerifierError(f"malformed verifier binding: {exc}") from None
    secret = secrets.get(bound["config"]["secret"])
    if secret is None:
        raise VerifierError(f"secret {bound['config']['secret']!r} is not in LAYBY_WEBHOOK_SECRETS")
    try:
        VERIFIERS[bound["name"]](request, bound["config"], secret)
    except (VerificationFailed, VerifierError):
        raise
    except Exception as exc:  # noqa: BLE001 - a verifier crash fails closed
        raise VerifierError(f"verifier {bound['name']!r} crashed: {type(exc).__name__}") from None
