"""Sensitive answers sealed at rest (docs/security.md#sensitive-answers-at-rest).

A sensitive answer is kept for its waiter only, in the secrets stream, and only sealed: with
XChaCha20-Poly1305 (an AEAD; libsodium through PyNaCl) under a key from ``LAYBY_SECRETS_KEY``.
The associated data is the message's subject, so a sealed answer cannot be moved to another
question. A sealed value is ``version (1) | key id (4) | nonce (24) | ciphertext``; the key id
lets several keys be configured during a rotation: the first seals, every one opens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from typing import Protocol

from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_decrypt,
    crypto_aead_xchacha20poly1305_ietf_encrypt,
    crypto_aead_xchacha20poly1305_ietf_NPUBBYTES,
)
from nacl.exceptions import CryptoError

from layby.settings import SettingsError
from layby_contracts.errors import Permanent
from layby_server.observability.logs import get_logger

log = get_logger("layby_server.store.sealing")

VERSION = b"\x01"
KEY_BYTES = 32
_NONCE = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES


class SealError(Exception):
    """A sealed value that no configured key opens (tampered, moved, or a retired key)."""


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"layby secrets key id\x00" + key).digest()[:4]


def new_key() -> str:
    """A fresh key in LAYBY_SECRETS_KEY's form (43 characters of URL-safe base64)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii").rstrip("=")


def parse_keys(var: str, raw: str) -> str:
    """Validate ``KEY[,KEY...]``: each URL-safe base64 of 32 bytes. Never echoes a key back."""
    for index, part in enumerate(raw.split(","), start=1):
        try:
            decoded = base64.urlsafe_b64decode(part.strip() + "=" * (-len(part.strip()) % 4))
        except (binascii.Error, ValueError):
            decoded = b""
        if len(decoded) != KEY_BYTES:
            raise SettingsError(
                f"{var} key {index} must be 32 random bytes in URL-safe base64 (43 characters); "
                "make one with `layby secrets-key`"
            )
    return raw


class Sealer:
    def __init__(self, raw_keys: str) -> None:
        keys = [
            base64.urlsafe_b64decode(p.strip() + "=" * (-len(p.strip()) % 4))
            for p in raw_keys.split(",")
            if p.strip()
        ]
        self._sealing = keys[0]
        self._opening = {_key_id(k): k for k in keys}

    def seal(self, plaintext: bytes, *, bound_to: str) -> bytes:
        nonce = secrets.token_bytes(_NONCE)
        sealed = crypto_aead_xchacha20poly1305_ietf_encrypt(
            plaintext, bound_to.encode(), nonce, self._sealing
        )
        return VERSION + _key_id(self._sealing) + nonce + sealed

    def open(self, blob: bytes, *, bound_to: str) -> bytes:
        if blob[:1] != VERSION or len(blob) < 1 + 4 + _NONCE:
            raise SealError("not a sealed value")
        key = self._opening.get(blob[1:5])
        if key is None:
            raise SealError("sealed with a key that is not configured (LAYBY_SECRETS_KEY)")
        nonce, sealed = blob[5 : 5 + _NONCE], blob[5 + _NONCE :]
        try:
            return crypto_aead_xchacha20poly1305_ietf_decrypt(sealed, bound_to.encode(), nonce, key)
        except CryptoError:
            raise SealError("the sealed value does not open: tampered or bound to another question") from None


class _HasSealer(Protocol):
    sealer: Sealer | None


def sealer_of(store: _HasSealer) -> Sealer:
    """The store's sealer; a process without LAYBY_SECRETS_KEY refuses to keep a sensitive answer."""
    if store.sealer is None:
        raise Permanent(
            "LAYBY_SECRETS_KEY is not set: sensitive answers are kept only sealed "
            "(docs/security.md#sensitive-answers-at-rest)"
        )
    return store.sealer


def open_secret(store: _HasSealer, blob: bytes, subject: str) -> bytes | None:
    """The plaintext of a sealed answer, or None (logged) when no configured key opens it."""
    try:
        return sealer_of(store).open(blob, bound_to=subject)
    except SealError as exc:
        log.error("secrets.unopenable", subject=subject, error=str(exc))
        return None
