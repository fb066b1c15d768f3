"""The doors' fixed refusal texts, each written once: raised with it, and documented with it
(``openapi.py`` and the route handlers' response specs)."""

from __future__ import annotations

from typing import Final

NOT_FOUND: Final = "not found"
METHOD_NOT_ALLOWED: Final = "method not allowed"
PAYLOAD_TOO_LARGE: Final = "payload too large"
INTERNAL_ERROR: Final = "internal server error"
UNAVAILABLE: Final = "service temporarily unavailable; retry"
TOO_MANY_REQUESTS: Final = "too many requests"
HEADER_TIMEOUT: Final = "request header timeout"
HEADERS_TOO_LARGE: Final = "request header fields too large"
MALFORMED: Final = "invalid HTTP request"
NOT_READY: Final = "not ready"
INVALID_MEDIA_ID: Final = "invalid media id"
TOO_MANY_STREAMS: Final = "too many open streams; retry later"
STREAM_UNAVAILABLE: Final = "the stream is unavailable; retry later"
WEBHOOK_FAILED: Final = "webhook verification failed"
WEBHOOK_ERROR: Final = "webhook verification error"
UNAUTHORIZED_CHANNEL: Final = "the request is not signed by the channel's provider"
NOT_FOUND_TEXT: Final = "Not Found"
"""The callback page's uniform 404, in plain text."""
SERVER_ERROR_TEXT: Final = "Internal Server Error"
"""The callback page's 500 for a form it cannot render, in plain text."""
