"""The one place where errors become HTTP responses (docs/engineering.md#errors-say-what-happens-next).

Every failure body is ``{"error": "<message>"}`` (plus ``field`` where a field is to blame).
No stack trace and no exception text of an unexpected failure ever reaches a client.
"""

from __future__ import annotations

import math
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException
from msgspec import UNSET

from layby_contracts import errors
from layby_contracts.http import Error
from layby_server.observability.logs import get_logger
from layby_services.door.messages import (
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    UNAVAILABLE,
)

log = get_logger("layby.door")

NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class PayloadTooLarge(errors.LaybyError):
    """The body's actual bytes exceed ``INTERACTIONS_CALLBACK_MAX_BODY_BYTES``."""

    kind = "too_large"


class Busy(errors.LaybyError):
    """The door cannot take this client now (its open streams are at the cap): 503 + Retry-After."""

    kind = "busy"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @classmethod
    def from_wire(cls, message: str, *, field: str | None, interaction_id: str = "") -> errors.LaybyError:
        return cls(message, retry_after=1)


STATUS: dict[type[errors.LaybyError], int] = {
    errors.BadInput: 400,
    errors.ParkExpiryExceedsRetentionError: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.CrossIdentityAudienceError: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.RunCancelledError: 409,
    PayloadTooLarge: 413,
    errors.InteractionLimitError: 429,
    errors.Transient: 503,
    errors.Unavailable: 503,
    Busy: 503,
    errors.ChannelUnavailableError: 503,
    errors.UnsupportedError: 501,
    errors.ChannelFailedError: 502,
    errors.InteractionTimeoutError: 504,
    errors.Permanent: 500,
    errors.NonDeterministicRunError: 500,
    errors.NotConfiguredError: 500,
    errors.RunRequiredError: 500,
    errors.WorkerSetupError: 500,
    errors.StepFailedError: 500,
    errors.CallFailedError: 500,
    errors.LaybyError: 500,
}
"""Every error class's HTTP status; a class not listed takes its nearest listed base's."""


def status_of(exc: errors.LaybyError) -> int:
    """The HTTP status of an error: its class's own, else its nearest base's."""
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def _error_headers(status: int, retry_after: int | None) -> dict[str, str]:
    """The headers a failure carries beyond ``NO_STORE``."""
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="layby"'
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return headers


def error_response(
    status: int, message: str, *, field: str | None = None, retry_after: int | None = None
) -> Response[Error]:
    """The failure body of every JSON door (``Error``): the message, and the field to blame."""
    body = Error(error=message, field=UNSET if field is None else field)
    return Response(body, status_code=status, headers={**NO_STORE, **_error_headers(status, retry_after)})


def _refusal(exc: errors.LaybyError) -> tuple[int, str, str | None, int | None]:
    """(status, message, field, Retry-After) of an error, logging what a client is not told."""
    status = status_of(exc)
    match exc:
        case PayloadTooLarge():
            return 413, PAYLOAD_TOO_LARGE, None, None
        case Busy():
            log.warning("door.busy", error=str(exc))
            return 503, str(exc), None, exc.retry_after
        case errors.ChannelUnavailableError():
            # A channel's failed send (docs/notifications.md#statuses): its message names the
            # channel only, and Retry-After carries the medium's pause when it named one.
            wait = None if exc.retry_after is None else max(1, math.ceil(exc.retry_after))
            return 503, exc.message, exc.field, wait
        case errors.UnsupportedError() | errors.ChannelFailedError():
            return status, exc.message, exc.field, None
        case errors.Transient():
            log.warning("door.transient", error=str(exc))
            return 503, UNAVAILABLE, None, None
    if status >= 500:
        # Never the text of a failure the client cannot act on: it is logged instead.
        log.error("door.unexpected", error=repr(exc))
        return status, INTERNAL_ERROR, None, None
    if status in (400, 409):
        # A conflict may name what no longer matches (a review's arguments_sha256).
        return status, exc.message, exc.field, None
    return status, str(exc), None, None


def layby_error(exc: errors.LaybyError) -> tuple[int, list[tuple[bytes, bytes]], Error]:
    """An error as the raw parts of its response (the answer door's fast path, fast.py): its
    status, the headers beyond ``NO_STORE`` and the body — what ``_layby`` makes a Response of."""
    status, message, field, retry_after = _refusal(exc)
    headers = [
        (k.lower().encode("latin-1"), v.encode("latin-1"))
        for k, v in _error_headers(status, retry_after).items()
    ]
    return status, headers, Error(error=message, field=UNSET if field is None else field)


def _layby(_: Request[Any, Any, Any], exc: Exception) -> Response[Error]:
    assert isinstance(exc, errors.LaybyError)
    status, message, field, retry_after = _refusal(exc)
    return error_response(status, message, field=field, retry_after=retry_after)


def _http(_: Request[Any, Any, Any], exc: Exception) -> Response[Error]:
    assert isinstance(exc, HTTPException)
    status = exc.status_code
    if status >= 500:
        log.error("door.http_error", status=status, error=str(exc.detail))
        return error_response(status, INTERNAL_ERROR)
    messages = {404: NOT_FOUND, 405: METHOD_NOT_ALLOWED, 413: PAYLOAD_TOO_LARGE}
    response = error_response(status, messages.get(status, str(exc.detail)))
    allow = (exc.headers or {}).get("allow")
    if status == 405 and allow:
        response.headers["Allow"] = allow  # RFC 9110: a 405 names the methods the path allows
    return response


def _unexpected(_: Request[Any, Any, Any], exc: Exception) -> Response[Error]:
    log.error("door.unexpected", error=repr(exc), exc_info=exc)
    return error_response(500, INTERNAL_ERROR)


EXCEPTION_HANDLERS = {errors.LaybyError: _layby, HTTPException: _http, Exception: _unexpected}
