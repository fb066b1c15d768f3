"""The answer door without the framework's per-request work (docs/doors/answer.md#the-fast-path).

``POST /api/interactions/{interaction_id}/answer`` is the door's hottest request: every sync cycle
ends with one. Plain ASGI in front of the application answers it with the same code the routed
handler runs — the credentials, the capped body, ``parse_answer_body``, ``submit_answer`` and the
one place errors become responses (errors.py) — and the same bytes on the wire, but without the
router, the handler's signature model, the dependency and exception plumbing and the response
object. Every other request, and this one whenever the door limits request rates (a middleware
of the application), goes to the application as before. A test holds the two paths to the same
status, headers and body for every outcome.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from litestar import Litestar
from litestar.enums import ScopeType
from litestar.types import ASGIApp, HTTPResponseBodyEvent, HTTPResponseStartEvent, Receive, Scope, Send

from layby_contracts.errors import LaybyError
from layby_contracts.http import Answered, Error
from layby_server.observability.logs import get_logger
from layby_services.door.access import IDENTITY_KEY
from layby_services.door.deps import DoorState, capped
from layby_services.door.errors import NO_STORE, layby_error
from layby_services.door.messages import INTERNAL_ERROR
from layby_services.door.routes.answer import CLIENT_HEADER, client_named, parse_answer_body, submit_answer
from layby_services.door.spans import request_trace

log = get_logger("layby.door")
ANSWER_ROUTE = "/api/interactions/{interaction_id}/answer"
"""The route's template, as the application names it (access log, metrics)."""
_ANSWER = re.compile(r"/api/interactions/([^/]+)/answer")
_enc = msgspec.json.Encoder()
_JSON = (b"content-type", b"application/json")
_ERROR_HEADERS = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in NO_STORE.items()]


class FastAnswers:
    """ASGI: ``POST`` to the answer door is answered here; everything else passes on to ``app``."""

    def __init__(self, app: ASGIApp, application: Litestar, *, enabled: bool = True) -> None:
        self._app = app
        self._application = application
        self._enabled = enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._enabled or scope["type"] != ScopeType.HTTP or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        match = _ANSWER.fullmatch(scope["path"])
        state: DoorState | None = getattr(self._application.state, "door", None)
        if match is None or state is None:
            await self._app(scope, receive, send)
            return
        scope["path_template"] = ANSWER_ROUTE
        try:
            status, headers, body = await _answer(state, scope, receive, match.group(1))
        except LaybyError as exc:
            status, extra, message = layby_error(exc)
            headers, body = [*_ERROR_HEADERS, *extra], _enc.encode(message)
        except _Disconnected:
            return  # the client left while sending its body: nobody to answer
        except Exception as exc:  # the door's last word, as the application's (errors.py)
            log.error("door.unexpected", error=repr(exc), exc_info=exc)
            status, headers, body = 500, list(_ERROR_HEADERS), _enc.encode(Error(error=INTERNAL_ERROR))
        start: HTTPResponseStartEvent = {
            "type": "http.response.start",
            "status": status,
            "headers": [_JSON, (b"content-length", b"%d" % len(body)), *headers],
        }
        await send(start)
        done: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
        await send(done)


class _Disconnected(Exception):
    pass


async def _answer(
    state: DoorState, scope: Scope, receive: Receive, interaction_id: str
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    authorization = _header(scope, b"authorization")
    who = state.auth.from_header(authorization)
    scope.setdefault("state", {})[IDENTITY_KEY] = who.identity
    raw = await capped(_chunks(receive), state.settings.max_body_bytes)  # docs/doors/common.md#body-size-cap
    answer = parse_answer_body(raw)
    via = client_named(_header(scope, CLIENT_HEADER.lower().encode()))
    data = await submit_answer(state, who, interaction_id, answer, via=via, request=request_trace(scope))
    return 200, [], _enc.encode(Answered(data=data))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


async def _chunks(receive: Receive) -> AsyncIterator[bytes]:
    """The request body's chunks as the server hands them over."""
    while True:
        message: Any = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return
