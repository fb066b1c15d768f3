"""A client's NATS identity, derived from its Layby token (docs/security.md#nats-identities).

Under NATS authorization every Layby token is also a NATS key: its seed is derived from the
token with SHA-256, so a client that holds its token needs nothing else, NATS never sees the
token (the client signs the server's nonce instead), and the server's configuration holds only
public keys. The *key id* names the subjects only that token may read: its request inbox
(``_INBOX.<kid>``) and its wakes (``<ns>.wake.<kid>.…``).
"""

from __future__ import annotations

import hashlib

import nkeys

_SEED_CONTEXT = b"layby nats user seed v1\x00"
_KID_CONTEXT = b"layby nats key id v1\x00"
KID_LENGTH = 20


def client_seed(token: str) -> str:
    """The NATS user seed (``SU…``) of a Layby token."""
    raw = hashlib.sha256(_SEED_CONTEXT + token.encode("utf-8", "surrogatepass")).digest()
    return bytes(nkeys.encode_seed(raw, nkeys.PREFIX_BYTE_USER)).decode("ascii")


def public_key(seed: str) -> str:
    """The public key (``U…``) of a NATS user seed."""
    pair = nkeys.from_seed(bytearray(seed.strip().encode("ascii")))
    try:
        return bytes(pair.public_key).decode("ascii")
    finally:
        pair.wipe()


def key_id(token: str) -> str:
    """The one subject token that names what only this token's holder may read."""
    return hashlib.sha256(_KID_CONTEXT + token.encode("utf-8", "surrogatepass")).hexdigest()[:KID_LENGTH]


def client_inbox(token: str) -> str:
    """The request-reply inbox prefix of a token's connections."""
    return f"_INBOX.{key_id(token)}"


def service_inbox(role: str) -> str:
    """The request-reply inbox prefix of a service's connections."""
    return f"_INBOX.layby-{role}"
