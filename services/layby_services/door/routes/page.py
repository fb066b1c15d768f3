"""The inbox web page (docs/doors/inbox-page.md): ``/`` and ``/inbox``, and its static files
under ``/static``.

Plain HTML, CSS and three ES modules (the inbox, the runs dashboard, their DOM helper) shipped
inside the package (no build step, no Node.js on the user's machine; ADR 0008). A strict
Content-Security-Policy: scripts and styles from the door only, images from https:, data: and the
door (the media rules assume exactly this), media from https: and the door, connections to the
door only, no frames, no third-party requests.
"""

from __future__ import annotations

from importlib import resources

from litestar import Response, get
from litestar.params import FromPath

from layby_contracts.errors import NotFound

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; "
    "media-src 'self' https:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_TYPES = {
    "inbox.js": "text/javascript",
    "inbox.css": "text/css",
    "runs.js": "text/javascript",
    "runs.css": "text/css",
    "dom.js": "text/javascript",
}
_ROOT = resources.files("layby_services.door") / "static"
_INDEX = (_ROOT / "index.html").read_bytes()
_FILES = {name: (_ROOT / name).read_bytes() for name in _TYPES}


@get(["/", "/inbox"], summary="The inbox web page", include_in_schema=False)
async def inbox_page() -> Response[bytes]:
    return Response(_INDEX, media_type="text/html", headers={**HEADERS, "Cache-Control": "no-cache"})


@get("/static/{name:str}", include_in_schema=False)
async def static_file(name: FromPath[str]) -> Response[bytes]:
    body = _FILES.get(name)
    if body is None:
        raise NotFound("not found")
    return Response(body, media_type=_TYPES[name], headers={**HEADERS, "Cache-Control": "no-cache"})
