"""Signed webhooks out, the I/O part (docs/webhooks.md): resolving a notify URL's host for the
ask-time and send-time checks. The rules themselves are ``layby_domain.webhooks``."""

from __future__ import annotations

import asyncio
import functools
import socket

from layby_domain.ask import WebhookPolicy
from layby_domain.webhooks import check_notify_url, literal_address, parse_webhook_secrets
from layby_server.settings import Settings

RESOLVE_TIMEOUT_SECONDS = 5.0


async def resolve_host(host: str, timeout: float = RESOLVE_TIMEOUT_SECONDS) -> tuple[str, ...]:
    """Every address ``host`` resolves to (empty when it does not resolve in time)."""
    literal = literal_address(host)
    if literal is not None:
        return (literal,)
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), timeout=timeout)
    except (OSError, TimeoutError, UnicodeError):
        return ()
    return tuple(dict.fromkeys(str(info[4][0]) for info in infos))


@functools.cache
def _signers(raw: str | None) -> frozenset[str]:
    return frozenset(parse_webhook_secrets(raw))


async def webhook_policy(settings: Settings, notify_url: str | None) -> WebhookPolicy:
    """The facts an ask's ``notify_url`` is judged on; the URL's shape is checked first, so a
    malformed one is refused before any name is looked up."""
    signers = _signers(settings.webhooks_out_secrets)
    if notify_url is None:
        return WebhookPolicy(signers=signers)
    host = check_notify_url(notify_url, allow_http=settings.webhooks_allow_http)
    return WebhookPolicy(
        allow_http=settings.webhooks_allow_http,
        allow_private=settings.webhooks_allow_private,
        signers=signers,
        addresses=(await resolve_host(host)) or None,
    )
