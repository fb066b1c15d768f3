"""Media on a question: validation, ``data:image`` decoding and MIME sniffing (docs/asking.md#media,
docs/doors/media.md#the-media-door).

Pure functions, shared by the SDK (before anything leaves the process) and the ask service (the
authority, before anything is stored). Every error is a ``BadInput`` naming the item's field.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from layby_contracts.errors import BadInput
from layby_contracts.events import MediaItem
from layby_contracts.limits import (
    MEDIA_CAPTION_MAX_CHARS,
    MEDIA_DATA_URI_MAX_CHARS,
    MEDIA_FILENAME_MAX_CHARS,
    MEDIA_MAX_ITEMS,
    MEDIA_ROUTE_PREFIX,
    MEDIA_TOTAL_URI_CHARS,
    MEDIA_URL_MAX_CHARS,
)

KINDS = ("image", "document", "video", "audio", "link")
FILE_KINDS = frozenset(KINDS[:4])
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
MEDIA_ID_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")
_SERVED_RE = re.compile(r"^" + re.escape(MEDIA_ROUTE_PREFIX) + r"[A-Za-z0-9_-]{43}$")
_DATA_RE = re.compile(r"^data:(image/[A-Za-z0-9.+-]+);base64,(.*)$", re.DOTALL)
_LABEL_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_FIELDS = ("kind", "url", "caption", "filename")


def is_media_id(value: object) -> bool:
    return isinstance(value, str) and bool(MEDIA_ID_RE.match(value))


def _single_line(text: str) -> bool:
    """No whitespace, and no control, format (bidi included) or separator characters."""
    return not any(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp") for ch in text)


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return False
        return True
    name = host[:-1] if host.endswith(".") else host
    if not name or len(name) > 253:
        return False
    labels = name.split(".")
    if not all(_LABEL_RE.match(label) for label in labels):
        return False
    return not labels[-1].isdigit()


def _check_remote(url: str, field: str, schemes: tuple[str, ...]) -> None:
    if len(url) > MEDIA_URL_MAX_CHARS:
        raise BadInput(f"{field} is {len(url)} characters; the limit is {MEDIA_URL_MAX_CHARS}", field=field)
    if "%" in url:
        raise BadInput(f"{field} must not contain '%' escapes", field=field)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise BadInput(f"{field} is not a valid URL (bad port or address)", field=field) from None
    if parts.scheme not in schemes:
        raise BadInput(f"{field} must be an absolute {' or '.join(schemes)} URL", field=field)
    netloc = parts.netloc
    if "@" in netloc:
        raise BadInput(f"{field} must not carry credentials (user@host)", field=field)
    host = netloc.rsplit(":", 1)[0] if port is not None or netloc.endswith(":") else netloc
    if not host or not host.isascii() or not _valid_host(host):
        raise BadInput(f"{field} must have a valid ASCII host (send IDN hosts as punycode)", field=field)
    if port is not None and not 0 < port < 65536:
        raise BadInput(f"{field} has a port out of range", field=field)


def _served_absolute(url: str) -> bool:
    """``http(s)://host/api/interactions/media/<id>``; http only for loopback hosts
    (docs/asking.md#media-urls)."""
    parts = urlsplit(url)
    if parts.query or parts.fragment or not _SERVED_RE.match(parts.path):
        return False
    host = (parts.hostname or "").lower()
    return parts.scheme == "https" or (parts.scheme == "http" and host in LOOPBACK)


def decode_data_image(url: str, field: str) -> tuple[str, bytes]:
    """``data:image/<type>;base64,<payload>`` → (MIME type, bytes); the type must be one of
    png, jpeg, gif, webp and the bytes must look like it (sniffed, docs/asking.md#inline-images)."""
    if len(url) > MEDIA_DATA_URI_MAX_CHARS:
        raise BadInput(
            f"{field} is a data: URI of {len(url)} characters; the limit is {MEDIA_DATA_URI_MAX_CHARS}",
            field=field,
        )
    match = _DATA_RE.match(url)
    if match is None:
        raise BadInput(f"{field} must be data:image/<type>;base64,<payload>", field=field)
    mime = match.group(1).lower()
    if mime not in IMAGE_TYPES:
        raise BadInput(f"{field}: {mime} is not accepted (png, jpeg, gif or webp only)", field=field)
    try:
        raw = base64.b64decode(match.group(2), validate=True)
    except (binascii.Error, ValueError):
        raise BadInput(f"{field} must carry strict base64", field=field) from None
    if not raw:
        raise BadInput(f"{field} carries an empty image", field=field)
    sniffed = sniff_image(raw)
    if sniffed != mime:
        raise BadInput(
            f"{field} declares {mime} but its bytes are {sniffed or 'not a png, jpeg, gif or webp image'}",
            field=field,
        )
    return mime, raw


def sniff_image(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def _coerce(item: object, index: int) -> dict[str, Any]:
    where = f"media[{index}]"
    if isinstance(item, MediaItem):
        return {k: getattr(item, k) for k in _FIELDS}
    if not isinstance(item, dict):
        raise BadInput(f"{where} must be a MediaItem or a dict", field=where)
    for key in item:
        if key not in _FIELDS:
            raise BadInput(f"{where} has an unknown field {key!r}", field=f"{where}.{key}")
    return {k: item.get(k) for k in _FIELDS}


def validate_media(media: object) -> list[MediaItem] | None:
    """Validate a question's media (docs/asking.md#media); ``data:`` images stay inline here (the ask
    service stores them and swaps in served references). Caps are checked on the raw list.

    The errors come in this order: the list (its shape, its count, every item's fields, the total
    of its urls), then each item in turn: kind, url, caption, filename."""
    if media is None:
        return None
    items = _check_list(media)
    return [_check_item(f"media[{index}]", item) for index, item in enumerate(items)]


def _check_list(media: object) -> list[dict[str, Any]]:
    """A non-empty list of at most ``MEDIA_MAX_ITEMS`` items whose urls together stay within
    ``MEDIA_TOTAL_URI_CHARS``, checked before any item is looked at closer (or any image decoded)."""
    if not isinstance(media, list | tuple):
        raise BadInput("media must be a list of media items", field="media")
    if not media:
        raise BadInput("media must be a non-empty list when present", field="media")
    if len(media) > MEDIA_MAX_ITEMS:
        raise BadInput(f"media has {len(media)} items; the limit is {MEDIA_MAX_ITEMS}", field="media")
    items = [_coerce(item, i) for i, item in enumerate(media)]
    total = sum(len(it["url"]) for it in items if isinstance(it["url"], str))
    if total > MEDIA_TOTAL_URI_CHARS:
        raise BadInput(
            f"media urls total {total} characters; the limit is {MEDIA_TOTAL_URI_CHARS}", field="media"
        )
    return items


def _check_item(where: str, item: dict[str, Any]) -> MediaItem:
    kind, url, caption, filename = item["kind"], item["url"], item["caption"], item["filename"]
    if kind not in KINDS:
        raise BadInput(f"{where}.kind must be one of {', '.join(KINDS)}", field=f"{where}.kind")
    _check_url(kind, url, f"{where}.url")
    if caption is not None:
        _check_caption(caption, f"{where}.caption")
    if filename is not None:
        _check_filename(kind, filename, f"{where}.filename")
    return MediaItem(kind=kind, url=url, caption=caption, filename=filename)


def _check_url(kind: str, url: object, field: str) -> None:
    """One line of text whose form decides its rules (docs/asking.md#media-urls): an inline
    ``data:`` image, a served ``/api/interactions/media/<id>`` path (file kinds), an http(s) link,
    or an https file URL (or an absolute served one)."""
    if not isinstance(url, str) or not url.strip():
        raise BadInput(f"{field} must be a non-blank string", field=field)
    if not _single_line(url):
        raise BadInput(f"{field} must be a single line with no spaces or control characters", field=field)
    if url.startswith("data:"):
        if kind != "image":
            raise BadInput(f"{field}: a data: URI is accepted on an image only", field=field)
        decode_data_image(url, field)
    elif url.startswith("/"):
        if kind == "link" or not _SERVED_RE.match(url):
            raise BadInput(
                f"{field} must be an absolute URL or {MEDIA_ROUTE_PREFIX}<id> (file kinds only)", field=field
            )
    elif kind == "link":
        _check_remote(url, field, ("http", "https"))
    elif not _served_absolute(url):
        _check_remote(url, field, ("https",))


def _check_caption(caption: object, field: str) -> None:
    if not isinstance(caption, str) or not caption.strip() or len(caption) > MEDIA_CAPTION_MAX_CHARS:
        raise BadInput(
            f"{field} must be non-blank text of at most {MEDIA_CAPTION_MAX_CHARS} characters", field=field
        )


def _check_filename(kind: str, filename: object, field: str) -> None:
    """Only a document has a file name: one plain name (spaces allowed, no slashes)."""
    if kind != "document":
        raise BadInput(f"{field} is only for a document", field=field)
    if (
        not isinstance(filename, str)
        or not filename.strip()
        or len(filename) > MEDIA_FILENAME_MAX_CHARS
        or not _single_line(filename.replace(" ", "_"))
        or any(c in filename for c in "/\\")
    ):
        raise BadInput(
            f"{field} must be a plain file name of at most {MEDIA_FILENAME_MAX_CHARS} characters", field=field
        )
