"""The inbox web page (docs/doors/inbox-page.md): ``/`` and ``/inbox``, and its static files
under ``/static``.

Plain HTML, CSS and ES modules (``inbox.js`` is the entry; it imports the others by relative
path) shipped inside the package (no build step, no Node.js on the user's machine; ADR 0008). A
strict Content-Security-Policy: scripts and styles from the door only, images from https:, data: and the
door (the media rules assume exactly this), media from https: and the door, connections to the
door only, no frames, no third-party requests.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import PurePath
from typing import Any, NamedTuple

from litestar import Request, Response, get
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
_TYPES = {".js": "text/javascript", ".css": "text/css"}
_ROOT = resources.files("layby_services.door") / "static"
_INDEX = (_ROOT / "index.html").read_bytes()


class _File(NamedTuple):
    body: bytes
    media_type: str
    etag: str  # the content's hash: a browser revalidating an unchanged module gets a 304


def _load(name: str) -> _File:
    body = (_ROOT / name).read_bytes()
    return _File(body, _TYPES[PurePath(name).suffix], f'"{hashlib.sha256(body).hexdigest()[:32]}"')


# The allow-list: the scripts and styles shipped in the package's static folder, read once at
# import. Every module the entry module imports ships there; no other name is ever served.
_FILES = {
    entry.name: _load(entry.name)
    for entry in _ROOT.iterdir()
    if entry.is_file() and PurePath(entry.name).suffix in _TYPES
}


@get(["/", "/inbox"], summary="The inbox web page", include_in_schema=False)
async def inbox_page() -> Response[bytes]:
    return Response(_INDEX, media_type="text/html", headers={**HEADERS, "Cache-Control": "no-cache"})


@get("/static/{name:str}", include_in_schema=False)
async def static_file(request: Request[Any, Any, Any], name: FromPath[str]) -> Response[bytes]:
    found = _FILES.get(name)
    if found is None:
        raise NotFound("not found")
    # no-cache: the browser asks again on every load, so a new release is never mixed with
    # modules of the old one; the ETag makes that question cheap when nothing changed.
    headers = {**HEADERS, "Cache-Control": "no-cache", "ETag": found.etag}
    if found.etag in {tag.strip() for tag in request.headers.get("if-none-match", "").split(",")}:
        return Response(b"", status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)
