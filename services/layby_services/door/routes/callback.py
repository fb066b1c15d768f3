"""``POST`` and ``GET /api/interactions/callback/{ticket}``: the public callback doors
(docs/doors/callback.md#the-callback-doors).

The ticket is the capability (no token). It is looked up by its SHA-256 only, and unknown,
expired, malformed and pruned tickets all get one byte-identical 404. POST, in order: the size
cap (413, before any lookup), the ticket, the bound verifier on the raw body (401 bad signature,
500 broken binding; nothing recorded, the ticket not consumed), already answered (200
``already_answered``), the payload (a JSON object body, or the query parameters when the body is
empty), the question's schema (400, before the claim), then the claim: the same log-decided
append as the answer door, so the first resolution wins. GET never mutates: it serves
byte-constant pages that interpolate nothing from the request.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Annotated, Any, cast

import msgspec
from litestar import Request, Response, get, post
from litestar.openapi import ResponseSpec
from litestar.params import PathParameter
from opentelemetry.util.types import AttributeValue

from layby_contracts.errors import BadInput, Transient
from layby_contracts.events import InteractionAnswered, InteractionAsked, InteractionRemoved
from layby_contracts.http import AlreadyAnswered, AlreadyAnsweredData, Answered, AnsweredData
from layby_contracts.limits import ANSWERED_BY_EXTERNAL
from layby_domain.formats import FORMATS, Page
from layby_domain.interaction import decide_claim, of_caller_ask
from layby_domain.tickets import ticket_hash
from layby_domain.validation import check_submitted_answer, validate_answer
from layby_domain.verifiers import POST_ONLY, VerificationFailed, VerifierError, parse_secrets, verify
from layby_domain.verifiers import Request as SignedRequest
from layby_server.observability import tracing
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import Stored
from layby_server.write.resolve import complete, resolve
from layby_services.door.bodies import decode_object
from layby_services.door.callback_pages import (
    AWAITING_PAGE,
    CONFIRM_PAGE,
    DONE_PAGE,
    FORM_PAGE_CSP,
    PAGE_CSP,
    Unrenderable,
    form_page,
    review_page,
)
from layby_services.door.deps import Door, DoorState, read_capped_body
from layby_services.door.errors import PayloadTooLarge
from layby_services.door.messages import (
    INTERNAL_ERROR,
    NOT_FOUND,
    NOT_FOUND_TEXT,
    PAYLOAD_TOO_LARGE,
    SERVER_ERROR_TEXT,
    UNAVAILABLE,
    WEBHOOK_ERROR,
    WEBHOOK_FAILED,
)
from layby_services.door.openapi import CAPABILITY, documented, refusal
from layby_services.door.openapi.components import (
    ERROR_HEADERS,
    JSON,
    TEXT,
    UNAVAILABLE_503,
    closed_error_schema,
    header,
    text,
)

log = get_logger("layby.door.callback")
TICKET_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")
MAX_ASK_WAITS = 256
"""Callbacks that may wait for their question at once (per door process)."""
BASE_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
PAGE_HEADERS = {
    **BASE_HEADERS,
    "Content-Security-Policy": PAGE_CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
FORM_PAGE_HEADERS = {**PAGE_HEADERS, "Content-Security-Policy": FORM_PAGE_CSP}
NOT_AN_OBJECT = "body must be a JSON object"
Ticket = Annotated[
    str,
    PathParameter(
        description="The callback ticket (43 characters of `[A-Za-z0-9_-]`); any other value is the "
        "uniform 404.",
        schema_extra={"pattern": CAPABILITY},
    ),
]


def _json(status: int, body: dict[str, Any] | msgspec.Struct) -> Response[bytes]:
    return Response(
        msgspec.json.encode(body), status_code=status, media_type="application/json", headers=BASE_HEADERS
    )


NOT_FOUND_JSON = (404, {"error": NOT_FOUND})
ALREADY_ANSWERED = AlreadyAnswered(data=AlreadyAnsweredData())


def _page(status: int, body: bytes, headers: dict[str, str] = PAGE_HEADERS) -> Response[bytes]:
    return Response(body, status_code=status, media_type="text/html", headers=headers)


def _not_found_text() -> Response[bytes]:
    return Response(NOT_FOUND_TEXT.encode(), status_code=404, media_type="text/plain", headers=BASE_HEADERS)


def _server_error_text() -> Response[bytes]:
    return Response(
        SERVER_ERROR_TEXT.encode(),
        status_code=500,
        media_type="text/plain",
        headers=BASE_HEADERS,
    )


def _form_page(asked: InteractionAsked) -> Response[bytes]:
    try:
        return _page(200, form_page(asked), FORM_PAGE_HEADERS)
    except Unrenderable as exc:
        log.error("callback.form_unrenderable", interaction_id=asked.interaction_id, reason=str(exc))
        return _server_error_text()


_PAGES: dict[Page, Callable[[InteractionAsked], Response[bytes]]] = {
    "form": _form_page,
    "confirm": lambda _: _page(200, CONFIRM_PAGE),
    "awaiting": lambda _: _page(200, AWAITING_PAGE),
    "review": lambda asked: _page(200, review_page(asked), FORM_PAGE_HEADERS),
}
"""The public page of a ticketed question, by what its format shows (``Format.page``)."""


async def _resolve(
    state: DoorState, ticket: str, leader: bool = False, *, cached: bool = False
) -> tuple[InteractionAsked, Stored] | None:
    """The question behind a live ticket and its last event; None for the uniform 404.

    ``cached``: a pending question the door's asked cache holds stands in for the read of its
    last event (docs/doors/callback.md#what-a-callback-costs); the caller decides any refusal
    again without it.
    """
    if not TICKET_RE.match(ticket):
        return None
    found = await state.store.get_ticket(ticket_hash(ticket))
    if found is None:
        return None
    interaction_id, expires_at = found
    if expires_at <= state.clock.now():
        return None
    subject = state.store.names.ix(interaction_id)
    last = state.asked.get(interaction_id) if cached else None
    if last is None:
        last = await state.store.last(subject, leader=leader)
    if last is None:
        last = await _await_ask(state, subject)
    if last is None or isinstance(last.event, InteractionRemoved):
        return None
    if isinstance(last.event, InteractionAsked):
        asked = last.event
    else:
        first = await state.store.first(subject)
        if first is None or not isinstance(first.event, InteractionAsked):
            return None
        asked = first.event
    if of_caller_ask(asked) or of_caller_ask(last.event):
        # A caller ask never gets a ticket; one bound to it anyway (a client's mistake) reaches
        # nothing (docs/caller-asks.md#hidden-from-the-inbox).
        return None
    if not FORMATS[asked.answer_format].has_ticket(asked.channel):
        return None  # only ticketed and channel questions have tickets: nothing else is reachable
    return asked, last


async def _await_ask(state: DoorState, subject: str) -> Stored | None:
    """A bound ticket whose question is not recorded yet: the SDK binds the ticket before it
    builds the link, so an outside system may call back before the ask lands. Wait for it
    (bounded); only a holder of a real ticket ever waits, so the wait reveals nothing."""
    if state.ask_waits >= MAX_ASK_WAITS:
        return None  # bounded: a flood of callbacks on bound tickets cannot pile up here
    state.ask_waits += 1
    try:
        loop = asyncio.get_running_loop()  # a bound on this request's real time, not business time
        deadline = loop.time() + state.settings.callback_ask_wait_seconds
        pause = 0.01
        while loop.time() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.1)
            last = await state.store.last(subject, leader=True)
            if last is not None:
                return last
        return None
    finally:
        state.ask_waits -= 1


def _json_object(raw: bytes) -> dict[str, Any] | Response[bytes]:
    """A callback body that must be one JSON object, or the door's constant 400."""
    try:
        return decode_object(raw, invalid=NOT_AN_OBJECT, too_deep=NOT_AN_OBJECT)
    except BadInput as exc:
        return _refused(exc)


def _refused(exc: BadInput) -> Response[bytes]:
    """The 400 of a refused payload: its message, and the field when one is to blame."""
    return _json(400, {"error": exc.message, **({"field": exc.field} if exc.field else {})})


def _query_answer(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Query parameters as the answer: a repeated key maps to a list, in order (no last-wins)."""
    out: dict[str, Any] = {}
    for key, value in request.query_params.multi_items():
        if key in out:
            out[key] = [*out[key], value] if isinstance(out[key], list) else [out[key], value]
        else:
            out[key] = value
    return out


_POST_DOC = documented(
    headers=ERROR_HEADERS,
    parameters=[
        {
            "name": "answer",
            "in": "query",
            "required": False,
            "style": "form",
            "explode": True,
            "schema": {"type": "object", "additionalProperties": {"type": "string"}},
            "description": "An external question with an empty body: the query parameters are the answer (a "
            "repeated key maps to the list of its values). Ignored otherwise.",
        }
    ],
    body={
        "required": False,
        "content": {
            JSON: {
                "schema": {
                    "type": "object",
                    "additionalProperties": True,
                    "description": "An external question: the whole answer. A channel-delivered question: "
                    '`{"answer": <value>}`, validated as at the answer door.',
                }
            }
        },
    },
    responses=UNAVAILABLE_503,
)


@post(
    "/api/interactions/callback/{ticket:str}",
    operation_id="postCallback",
    tags=["callback"],
    operation_class=_POST_DOC,
    status_code=200,
    summary="Deliver an external or channel answer (public: the ticket is the capability)",
    description="Checks, in order: the size cap (413), the ticket (404), a bound verifier (401 or 500), "
    "already answered (200), the payload (400), the claim (docs/doors/callback.md#post-order-of-checks).",
    responses={
        200: ResponseSpec(
            # a union is a valid body type; litestar's hint says otherwise once pydantic is installed
            cast(Any, Answered | AlreadyAnswered),
            description="Recorded, or already answered (provider retries are idempotent).",
            generate_examples=False,
        ),
        400: refusal(
            "The payload: not a JSON object, no `answer` (channel questions), the reserved key, a NUL "
            "character, an unsigned body for a verifier, or an answer the question's schema or format "
            "refuses; or a request the HTTP parser cannot read (docs/doors/callback.md).",
            field=True,
        ),
        401: refusal(
            "A bound verifier refused the signature; nothing recorded, the ticket not consumed.",
            WEBHOOK_FAILED,
        ),
        404: refusal(
            "The uniform 404: unknown, expired, malformed or dead ticket, a question that was removed, or "
            "a caller ask (docs/doors/callback.md#uniform-404).",
            NOT_FOUND,
        ),
        500: refusal(
            "A bound verifier that cannot be checked (logged; nothing recorded), or something unexpected.",
            WEBHOOK_ERROR,
            INTERNAL_ERROR,
        ),
    },
)
async def callback_post(request: Request[Any, Any, Any], ticket: Ticket, door: Door) -> Response[bytes]:
    limit = door.settings.max_body_bytes
    if len(request.scope.get("query_string", b"")) > limit:
        raise PayloadTooLarge(PAYLOAD_TOO_LARGE)
    raw = await read_capped_body(request, limit)
    response = await _callback(door, request, ticket, raw, cached=True)
    if response.status_code != 200:
        # Decided on the asked cache, which may lag the log by a moment: a refusal is decided
        # again on the log's own reads, so every outcome is the one the log holds. A refusal
        # recorded nothing, so deciding twice changes nothing.
        response = await _callback(door, request, ticket, raw, cached=False)
    return response


async def _callback(
    state: DoorState, request: Request[Any, Any, Any], ticket: str, raw: bytes, *, cached: bool
) -> Response[bytes]:
    resolved = await _resolve(state, ticket, cached=cached)
    if resolved is None:
        return _json(*NOT_FOUND_JSON)
    asked, last = resolved
    payload = asked.format_payload or {}
    binding = payload.get("verifier")
    if binding is not None:
        signed = SignedRequest(
            body=raw,
            headers={k.lower(): v for k, v in request.headers.items()},
            now=state.clock.now().timestamp(),
        )
        try:
            verify(binding, signed, parse_secrets(state.settings.webhook_secrets))
        except VerificationFailed:
            return _json(401, {"error": WEBHOOK_FAILED})
        except VerifierError as exc:
            log.error("callback.verifier_error", error=str(exc))
            return _json(500, {"error": WEBHOOK_ERROR})
    if isinstance(last.event, InteractionAnswered):
        return _json(200, ALREADY_ANSWERED)
    fmt = FORMATS[asked.answer_format]
    if not fmt.ticketed:
        return await _channel_answer(state, ticket, asked, last, raw)
    if not raw.strip():
        if binding is not None and binding.get("name") in POST_ONLY:
            return _json(400, {"error": "verified callback requires a signed request body"})
        answer: Any = _query_answer(request)
    else:
        parsed = _json_object(raw)
        if isinstance(parsed, Response):
            return parsed
        answer = parsed
    try:
        check_submitted_answer(answer)
    except BadInput as exc:
        return _refused(exc)
    try:
        answer = fmt.check_callback_answer(fmt.typed(asked.format_payload), answer)
    except BadInput as exc:
        return _json(400, {"error": exc.message})  # an outside system's answer: no form field named
    return await _claim(state, ticket, asked, last, answer)


async def _channel_answer(
    state: DoorState, ticket: str, asked: InteractionAsked, last: Stored, raw: bytes
) -> Response[bytes]:
    """Step 5a (docs/doors/callback.md#channel-delivered-answers): a channel-delivered
    text/confirm/select/form question.

    The body is ``{"answer": <value>}``, validated exactly as at the answer door; an empty body
    confirms a ``confirm`` question (its page's button posts nothing). Query parameters never
    carry the answer here.
    """
    if not raw.strip():
        answer: Any = FORMATS[asked.answer_format].empty_callback_answer()
        if answer is None:
            return _json(400, {"error": "body must contain 'answer'"})
    else:
        body = _json_object(raw)
        if isinstance(body, Response):
            return body
        if "answer" not in body:
            return _json(400, {"error": "body must contain 'answer'"})
        answer = body["answer"]
    try:
        check_submitted_answer(answer)
        typed = validate_answer(asked.answer_format, asked.format_payload, answer)
    except BadInput as exc:
        return _refused(exc)
    return await _claim(state, ticket, asked, last, typed)


def _attributes(asked: InteractionAsked) -> dict[str, AttributeValue]:
    if not tracing.enabled():
        return {}
    attributes = tracing.event_attributes(asked)
    attributes["layby.answered_via"] = "callback"
    return attributes


async def _claim(
    state: DoorState, ticket: str, asked: InteractionAsked, last: Stored, answer: Any
) -> Response[bytes]:
    try:
        # The callback continues the question's trace, linked to this request's span.
        with tracing.joining("door callback", last.trace, _attributes(asked)):
            resolved = await resolve(
                state.store,
                asked.interaction_id,
                lambda s: decide_claim(s, by=ANSWERED_BY_EXTERNAL, answer=answer, now=state.clock.now()),
                seed=await complete(state.store, state.store.names.ix(asked.interaction_id), last),
            )
    except Transient:
        return _json(503, {"error": UNAVAILABLE})
    if resolved.appended is None:
        # Another resolution won. An answer: the idempotent 200. A removal (timeout, prune,
        # failed delivery): the question is gone, the uniform 404 (a channel then bridges the
        # reply into the conversation instead of dropping it).
        if resolved.state.status == "answered":
            return _json(200, ALREADY_ANSWERED)
        return _json(*NOT_FOUND_JSON)
    # Provider retries keep getting the idempotent 200 for the idle TTL. The answer is recorded
    # already: the refresh goes on after the response (docs/doors/callback.md#what-a-callback-costs).
    expires = state.clock.now() + timedelta(seconds=state.settings.idle_ttl_seconds)
    state.background(_refresh_ticket(state, ticket_hash(ticket), asked.interaction_id, expires))
    return _json(200, Answered(data=AnsweredData(interaction_id=asked.interaction_id)))


async def _refresh_ticket(state: DoorState, hashed: str, interaction_id: str, expires: datetime) -> None:
    try:
        await state.store.put_ticket(hashed, interaction_id, expires, new=False)
    except Transient:
        pass  # the answer is recorded; only the retry window keeps its original length


_PAGE_DOC = documented(
    responses={
        "404": {
            "description": "The uniform 404, in plain text: unknown, expired, malformed or dead ticket, or a "
            "verifier-bound question.",
            "headers": ERROR_HEADERS,
            "content": {TEXT: {"schema": text(NOT_FOUND_TEXT)}},
        },
        "500": {
            "description": "A stored form schema the page cannot render (plain text, logged), or something "
            "unexpected (the JSON envelope).",
            "headers": ERROR_HEADERS,
            "content": {
                TEXT: {"schema": text(SERVER_ERROR_TEXT)},
                JSON: {"schema": closed_error_schema(INTERNAL_ERROR)},
            },
        },
        "200": {
            "description": "The constant Done, confirm or awaiting page, or the question's form "
            "(docs/doors/callback.md#the-pages-behind-a-link).",
            "headers": {
                **ERROR_HEADERS,
                "Content-Security-Policy": header(
                    text(PAGE_CSP, FORM_PAGE_CSP),
                    "The form page's policy adds what its one inline script needs.",
                ),
                "X-Frame-Options": header(text("DENY"), "Never framed."),
                "Referrer-Policy": header(text("no-referrer"), "The ticket never leaks in a Referer."),
            },
            "content": {"text/html": {"schema": {"type": "string"}}},
        },
        **UNAVAILABLE_503,
    }
)


@get(
    "/api/interactions/callback/{ticket:str}",
    operation_id="getCallbackPage",
    tags=["callback"],
    operation_class=_PAGE_DOC,
    summary="The page behind a callback link (public, never changes anything)",
)
async def callback_get(ticket: Ticket, door: Door) -> Response[bytes]:
    resolved = await _resolve(door, ticket)
    if resolved is None:
        return _not_found_text()
    asked, last = resolved
    if (asked.format_payload or {}).get("verifier") is not None:
        return _not_found_text()  # a verifier-bound question is answered by its provider only
    if isinstance(last.event, InteractionAnswered):
        return _page(200, DONE_PAGE)
    return _PAGES[FORMATS[asked.answer_format].page](asked)
