"""The one place where errors become HTTP responses (docs/engineering.md#errors-say-what-happens-next).

Every failure body is ``{"error": "<message>"}`` (plus ``field`` where a field is to blame).
No stack trace and no exception text of an unexpected failure ever reaches a client.
"""

from __future__ import annotations

from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException

from layby.logs import get_logger
from layby_contracts.errors import (
    BadInput,
    Conflict,
    Forbidden,
    LaybyError,
    NotFound,
    Transient,
    Unauthorized,
)
from layby_services.door.messages import (
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    UNAVAILABLE,
)

log = get_logger("layby.door")

NO_STORE = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


class PayloadTooLarge(LaybyError):
    """The body's actual bytes exceed ``INTERACTIONS_CALLBACK_MAX_BODY_BYTES``."""


class Busy(LaybyError):
    """The door cannot take this client now (its open streams are at the cap): 503 + Retry-After."""

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def error_response(
    status: int, message: str, *, retry_after: int | None = None, **extra: Any
) -> Response[dict[str, Any]]:
    body: dict[str, Any] = {"error": message}
    body.update({k: v for k, v in extra.items() if v is not None})
    headers = dict(NO_STORE)
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="layby"'
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return Response(body, status_code=status, headers=headers)


def _layby(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    match exc:
        case BadInput():
            return error_response(400, exc.message, field=exc.field)
        case Unauthorized():
            return error_response(401, str(exc))
        case Forbidden():
            return error_response(403, str(exc))
        case NotFound():
            return error_response(404, str(exc))
        case Conflict():
            return error_response(409, str(exc))
        case PayloadTooLarge():
            return error_response(413, PAYLOAD_TOO_LARGE)
        case Busy():
            log.warning("door.busy", error=str(exc))
            return error_response(503, str(exc), retry_after=exc.retry_after)
        case Transient():
            log.warning("door.transient", error=str(exc))
            return error_response(503, UNAVAILABLE)
    log.error("door.unexpected", error=repr(exc))
    return error_response(500, INTERNAL_ERROR)


def _http(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
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


def _unexpected(_: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.error("door.unexpected", error=repr(exc), exc_info=exc)
    return error_response(500, INTERNAL_ERROR)


EXCEPTION_HANDLERS = {LaybyError: _layby, HTTPException: _http, Exception: _unexpected}
