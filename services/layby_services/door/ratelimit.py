"""Rate limits at the doors: fixed windows per client address per door family
(docs/doors/common.md#rate-limits).

The callback family (the public doors an outside system calls) allows 60 requests a minute and
10 per 10 seconds; every other family 600 a minute and 120 per 10 seconds. A request over a limit
gets 429 with ``Retry-After`` (seconds until the window that refused it ends) and
``Cache-Control: no-store``. Switched on by ``LAYBY_RATE_LIMITS`` (off by default, so local use
and benchmarks are not throttled). Counters live in each door process: behind N replicas a
client gets up to N times the limit, so an ingress in front should limit too.
"""

from __future__ import annotations

import math

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from layby_domain.clock import Clock
from layby_services.door.asgi import send_error
from layby_services.door.messages import TOO_MANY_REQUESTS

CALLBACK_LIMITS = ((60, 60), (10, 10))
DEFAULT_LIMITS = ((600, 60), (120, 10))
MAX_TRACKED = 100_000
"""Counters kept before stale windows are swept (bounds memory under many client addresses)."""

_FAMILIES: tuple[tuple[str, str | None], ...] = (
    ("/api/channels/", None),
    ("/api/messages/stream", "stream"),
    ("/api/interactions/callback/", "callback"),
    ("/api/interactions/media/", "media"),
    ("/api/interactions/stream", "stream"),
    ("/api/interactions", "interactions"),
    ("/api/runs", "runs"),
    ("/api/asks", "asks"),
    ("/api/doors", "doors"),
    ("/api/notifications", "notifications"),
)


def family_of(path: str) -> str | None:
    """The door family a path belongs to; None for what is never limited: the health probes, and
    the chat providers' inbound webhooks (a provider posts from a few addresses at its users'
    pace, and a refused request only comes back as its retry; each request is authenticated by
    its signature before anything is read)."""
    if path in ("/healthz", "/readyz"):
        return None
    for prefix, family in _FAMILIES:
        if path.startswith(prefix):
            return family
    return "page"


class RateLimiter:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._counts: dict[tuple[str, str, int], tuple[int, int]] = {}

    def hit(self, family: str, client: str) -> float | None:
        """Count one request; None when allowed, else the seconds until it would be."""
        now = self._clock.now().timestamp()
        limits = CALLBACK_LIMITS if family == "callback" else DEFAULT_LIMITS
        refused: float | None = None
        if len(self._counts) > MAX_TRACKED:
            self._sweep(now)
        for limit, seconds in limits:
            window = int(now // seconds)
            key = (family, client, seconds)
            current, count = self._counts.get(key, (window, 0))
            if current != window:
                count = 0
            count += 1
            self._counts[key] = (window, count)
            if count > limit:
                wait = (window + 1) * seconds - now
                refused = max(refused or 0.0, wait)
        return refused

    def _sweep(self, now: float) -> None:
        self._counts = {key: value for key, value in self._counts.items() if value[0] == int(now // key[2])}


class RateLimitMiddleware:
    """ASGI middleware: refuses over-limit requests before any door sees them."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter) -> None:
        self._app = app
        self._limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            family = family_of(scope["path"])
            client = (scope.get("client") or ("unknown", 0))[0]
            wait = self._limiter.hit(family, client) if family is not None else None
            if wait is not None:
                retry = str(max(1, math.ceil(wait))).encode()
                await send_error(send, 429, TOO_MANY_REQUESTS, (b"retry-after", retry))
                return
        await self._app(scope, receive, send)
