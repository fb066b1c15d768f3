"""Encoded slashes in a door's path (docs/doors/common.md#encoded-slashes).

No id (interaction, run, ticket, media) can contain ``/``. The HTTP server decodes ``%2F`` into
``/`` before routing, so ``/api/runs/a%2Fb`` would reach the router as three segments and get its
generic 404 or 405 instead of the door's own answer for a malformed id. This middleware keeps an
encoded slash encoded (the segment arrives as the literal text ``a%2Fb``), so the door that owns the
path runs its usual checks in their usual order — authentication, the body, then the id — and
answers as it does for any malformed id.
"""

from __future__ import annotations

from urllib.parse import unquote

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send


class EncodedSlashMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP:
            raw = scope.get("raw_path") or b""
            if b"%2f" in raw.lower():
                text = raw.decode("latin-1").replace("%2F", "%252F").replace("%2f", "%252f")
                scope["path"] = unquote(text)
        await self._app(scope, receive, send)
