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
from typing import Annotated

from litestar import Response, get
from litestar.params import PathParameter

from layby_contracts.errors import BadInput, NotFound
from layby_domain.media import IMAGE_TYPES, is_media_id
from layby_services.door.deps import Door
from layby_services.door.messages import INVALID_MEDIA_ID, MALFORMED
from layby_services.door.messages import NOT_FOUND as UNKNOWN
from layby_services.door.openapi import CAPABILITY, documented, refusal
from layby_services.door.openapi.components import NOSNIFF, UNAVAILABLE_503, header, text

_MEDIA_DOC = documented(
    ok={
        "description": "The stored bytes, with their stored (sniffed) type.",
        "headers": {
            "Cache-Control": header(
                {"type": "string", "pattern": "^private, max-age=[0-9]+$"}, "Whole seconds of retention left."
            ),
            "X-Content-Type-Options": NOSNIFF,
            "Content-Security-Policy": header(text("default-src 'none'"), "Inert."),
        },
        "content": {mime: {} for mime in sorted(IMAGE_TYPES)},
    },
    responses=UNAVAILABLE_503,
)


@get(
    "/api/interactions/media/{media_id:path}",
    operation_id="getMedia",
    tags=["interactions"],
    operation_class=_MEDIA_DOC,
    summary="An inline image of a question (public: the id is the capability)",
    responses={
        400: refusal(
            "An id that is not 43 characters of `[A-Za-z0-9_-]`, decided before any lookup; or a request "
            "the HTTP parser cannot read.",
            INVALID_MEDIA_ID,
            MALFORMED,
        ),
        404: refusal("Unknown, or past its retention: the same response.", UNKNOWN),
    },
)
async def media_door(
    door: Door,
    media_id: Annotated[
        Path,
        PathParameter(
            description="43 characters of `[A-Za-z0-9_-]`; anything else under the prefix is 400.",
            schema_extra={"pattern": CAPABILITY},
        ),
    ],
) -> Response[bytes]:
    # Everything under the prefix is this door's, so an encoded slash or ``..`` in the id gets
    # the id's own 400, never the router's 404.
    raw_id = str(media_id).removeprefix("/")
    if not is_media_id(raw_id):
        raise BadInput(INVALID_MEDIA_ID)
    found = await door.store.get_media(raw_id)
    if found is None:
        raise NotFound(UNKNOWN)
    mime, body, stored_at = found
    remaining = door.store.media_retention - (door.clock.now() - stored_at).total_seconds()
    if remaining <= 0:
        raise NotFound(UNKNOWN)
    return Response(
        body,
        media_type=mime,
        headers={
            "Cache-Control": f"private, max-age={max(0, math.floor(remaining))}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'",
        },
    )
