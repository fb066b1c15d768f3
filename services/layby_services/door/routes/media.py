"""``GET /api/interactions/media/{media_id}``: inline images of questions
(docs/doors/media.md#the-media-door, public).

The 43-character id is the capability; no token is needed. Order: the id's shape (400
``invalid media id``), then the store (404 ``not found``, the same for unknown and expired).
A hit serves the stored bytes with their stored (sniffed) MIME type, ``nosniff`` and
``Cache-Control: private, max-age=<remaining lifetime>``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

from layby_contracts.errors import BadInput, NotFound
from layby_domain.media import is_media_id
from layby_services.door.deps import door


@get("/api/interactions/media/{media_id:path}", summary="An inline image of a question (public)")
async def media_door(request: Request[Any, Any, Any], media_id: FromPath[Path]) -> Response[bytes]:
    # Everything under the prefix is this door's, so an encoded slash or ``..`` in the id gets
    # the id's own 400, never the router's 404.
    raw_id = str(media_id).removeprefix("/")
    if not is_media_id(raw_id):
        raise BadInput("invalid media id")
    state = door(request)
    found = await state.store.get_media(raw_id)
    if found is None:
        raise NotFound("not found")
    mime, body, stored_at = found
    remaining = state.store.media_retention - (state.clock.now() - stored_at).total_seconds()
    if remaining <= 0:
        raise NotFound("not found")
    return Response(
        body,
        media_type=mime,
        headers={
            "Cache-Control": f"private, max-age={max(0, math.floor(remaining))}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'",
        },
    )
