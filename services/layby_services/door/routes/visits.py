"""Doors that drive parkable runs (docs/doors/hooks.md): ``POST /api/hooks/{name}``,
``POST /api/conversations/{subject}/messages`` and ``GET /api/subjects/{subject}/parked``.

A hook's body is the input document its door contract runs over. A hook whose door binds a
webhook verifier is public (the sender's signature authenticates it, checked over the raw body
before anything else is read); any other hook needs a bearer token, and so does an unknown name,
so an unauthenticated caller learns nothing of which hooks exist. ``wait`` (seconds, bounded by
``LAYBY_VISIT_WAIT_MAX_SECONDS``) holds the response until the next outcome of what the visit
resumed or started. A conversation visit is its route's receiver: an outcome it receives inline
is taken, so it does not also wait on the subject.
"""

from __future__ import annotations

import asyncio
import fnmatch
import uuid
from typing import Annotated, Any

import msgspec
from litestar import Request, get, post
from litestar.openapi.spec import Operation
from litestar.params import PathParameter, QueryParameter

from layby_contracts.commands import Explicit
from layby_contracts.doors import Outcome, VisitResult
from layby_contracts.errors import BadInput, Forbidden, NotFound, Unauthorized
from layby_contracts.events import DoorSaved, VisitSettled, decode_event
from layby_contracts.http import Parked, ParkedData, Visited
from layby_domain.doors import is_door_name
from layby_domain.validation import is_subject
from layby_domain.verifiers import Request as SignedRequest
from layby_domain.verifiers import VerificationFailed, VerifierError, parse_secrets, verify
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_services.door.bodies import decode_body
from layby_services.door.deps import Door, DoorState, Raw, Who, authenticate
from layby_services.door.messages import NOT_FOUND, WEBHOOK_ERROR, WEBHOOK_FAILED
from layby_services.door.openapi import BEARER, documented, refusal
from layby_services.door.openapi.components import JSON

log = get_logger("layby.door.visits")
DOOR_NAME = "^[a-z0-9_-]{1,64}$"
SUBJECT = "^[A-Za-z0-9_:@-]{1,128}$"
_CONVERSATIONS = """
SELECT name FROM doors WHERE kind = 'conversation' AND NOT deleted ORDER BY name
"""

Wait = Annotated[
    float,
    QueryParameter(
        name="wait",
        ge=0,
        description="Seconds to hold the response for the next outcome of what the visit resumed or "
        "started (at most `LAYBY_VISIT_WAIT_MAX_SECONDS`).",
    ),
]


def _input(raw: bytes) -> Any:
    """The door's input document: the JSON body (an empty body is ``{}``)."""
    if not raw.strip():
        return {}
    return decode_body(raw, too_deep="the body is nested too deeply")


async def _until_settled(state: DoorState, visit_id: str, act: Any, wait: float) -> VisitResult:
    """Run ``act`` (the visit) listening on its subject first, so an outcome that comes at once
    is not missed; then hold on for it up to ``wait`` seconds."""
    wait = min(wait, state.settings.visit_wait_max_seconds)
    if wait <= 0:
        result: VisitResult = await act()
        return result
    settled: asyncio.Future[VisitSettled] = asyncio.get_running_loop().create_future()

    async def on_message(msg: Any) -> None:
        try:
            event = decode_event(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        if isinstance(event, VisitSettled) and not settled.done():
            settled.set_result(event)

    sub = await state.store.nc.subscribe(state.store.names.visit(visit_id), cb=on_message)
    try:
        result = await act()
        if result.outcome is None and (result.resumed or result.run_id):
            outcome: Outcome | None
            try:
                outcome = (await asyncio.wait_for(asyncio.shield(settled), timeout=wait)).outcome
            except TimeoutError:
                found = await state.visitor.status(visit_id)  # one last look: it may have just come
                outcome = found.outcome if found is not None else None
            result = msgspec.structs.replace(result, outcome=outcome)
        return result
    finally:
        await sub.unsubscribe()


def _reads_input(description: str) -> type[Operation]:
    """A visit door's operation: its body is the door's input document, any JSON (``_input``)."""
    return documented(body={"required": False, "description": description, "content": {JSON: {"schema": {}}}})


@post(
    "/api/hooks/{name:str}",
    operation_id="visitHook",
    tags=["doors"],
    operation_class=_reads_input("The hook's input document (any JSON; an empty body is `{}`)."),
    # A bearer token, or (a hook whose door binds a webhook verifier) the sender's signature.
    security=[*BEARER, {}],
    status_code=200,
    summary="Visit a hook: run its door contract over the body, then act",
    description="Cancels first, then at most one of resume / take / start (docs/doors/hooks.md).",
    responses={
        400: refusal("The body, or a door program that fails, loops or yields a wrong shape.", field=True),
        401: refusal("No valid bearer token, or a bad signature for a verified hook: nothing happens."),
        404: refusal("No hook of that name (after authentication).", NOT_FOUND),
        409: refusal("An entry the visit names was resumed or taken by another visit first."),
        413: refusal("The body is larger than the door's cap."),
    },
)
async def hook_door(
    request: Request[Any, Any, Any],
    door: Door,
    raw: Raw,
    name: Annotated[str, PathParameter(description="The hook's name.", schema_extra={"pattern": DOOR_NAME})],
    wait: Wait = 0,
) -> Visited:
    found = await door.visitor.door(name) if is_door_name(name) else None
    verified = found is not None and found.spec.kind == "hook" and found.spec.verifier is not None
    if verified:
        assert found is not None
        _verify(door, found, raw, request)
        who = Principal(identity=f"door:{name}", role="operator")
    else:
        # Public only when its door binds a verifier: any other hook (and an unknown name) is
        # authenticated as the guarded doors are, so the caller learns nothing of which exist.
        who = authenticate(request)
        if found is None or found.spec.kind != "hook":
            raise NotFound(NOT_FOUND)
    assert found is not None
    return Visited(data=await _visit(door, found, who, _input(raw), wait, subject=None))


async def _visit(
    state: DoorState, found: DoorSaved, who: Principal, document: Any, wait: float, *, subject: str | None
) -> VisitResult:
    """One visit of ``found`` under the identity that saved it, recorded as ``who``'s, held up to
    ``wait`` seconds for its next outcome."""
    visit_id = str(uuid.uuid4())
    return await _until_settled(
        state,
        visit_id,
        lambda: state.visitor.visit(
            visit_id=visit_id,
            kind="conversation" if found.spec.kind == "conversation" else "hook",
            by=Principal(identity=found.by, role="operator"),
            door=found,
            subject=subject,
            input=document,
            label=who.identity,
            fresh=True,
        ),
        wait,
    )


def _verify(state: DoorState, found: DoorSaved, raw: bytes, request: Request[Any, Any, Any]) -> None:
    signed = SignedRequest(
        body=raw,
        headers={k.lower(): v for k, v in request.headers.items()},
        now=state.clock.now().timestamp(),
    )
    try:
        verify(found.spec.verifier, signed, parse_secrets(state.settings.webhook_secrets))
    except VerificationFailed:
        raise Unauthorized(WEBHOOK_FAILED) from None
    except VerifierError as exc:
        log.error("hook.verifier_error", door=found.name, error=str(exc))
        raise RuntimeError(WEBHOOK_ERROR) from None


@post(
    "/api/conversations/{subject:str}/messages",
    operation_id="postConversationMessage",
    tags=["doors"],
    operation_class=_reads_input("The message: the route's input document (any JSON)."),
    status_code=200,
    summary="Post a message to a conversation: its route's contract runs over it, then acts",
    description="The route is `door` when given, else the first conversation door (by name) whose "
    "`subjects` glob matches (docs/doors/hooks.md#conversations).",
    responses={
        400: refusal(
            "The body, the subject, or a door program that fails or yields a wrong shape.", field=True
        ),
        404: refusal("No conversation route serves this subject.", NOT_FOUND),
        409: refusal("An entry the visit names was resumed or taken by another visit first."),
    },
)
async def conversation_door(
    door: Door,
    who: Who,
    raw: Raw,
    *,
    subject: Annotated[
        str, PathParameter(description="The conversation.", schema_extra={"pattern": SUBJECT})
    ],
    wait: Wait = 0,
    route: Annotated[str | None, QueryParameter(name="door", description="The route's name.")] = None,
) -> Visited:
    if not is_subject(subject):
        raise BadInput("subject must be 1-128 of [A-Za-z0-9_:@-]", field="subject")
    found = await _route(door, subject, route)
    result = await _visit(door, found, who, _input(raw), wait, subject=subject)
    return Visited(data=await _receive(door, result, who))


async def _route(state: DoorState, subject: str, name: str | None) -> DoorSaved:
    names = [name] if name is not None else [r["name"] for r in await state.pool.fetch(_CONVERSATIONS)]
    for candidate in names:
        found = await state.visitor.door(candidate) if is_door_name(candidate) else None
        if found is None or found.spec.kind != "conversation":
            continue
        if fnmatch.fnmatchcase(subject, found.spec.subjects or "*"):
            return found
    raise NotFound(NOT_FOUND)


async def _receive(state: DoorState, result: VisitResult, who: Principal) -> VisitResult:
    """The conversation takes a finished or failed outcome it received inline."""
    outcome = result.outcome
    if outcome is None or outcome.status == "parked" or not result.resumed:
        return result
    await state.visitor.visit(
        visit_id=str(uuid.uuid4()),
        kind="conversation",
        by=Principal(identity=who.identity, role="operator"),
        subject=result.subject,
        explicit=Explicit(takes=list(result.resumed)),
        label=who.identity,
    )
    return result


@get(
    "/api/subjects/{subject:str}/parked",
    operation_id="listParked",
    tags=["doors"],
    summary="Every entry parked on a subject",
    description="Operators only (docs/doors/hooks.md#parked-entries).",
    responses={
        400: refusal("A subject that is not 1-128 of [A-Za-z0-9_:@-].", field=True),
        403: refusal("A `user` identity."),
    },
)
async def parked_door(
    door: Door,
    who: Who,
    subject: Annotated[str, PathParameter(description="The subject.", schema_extra={"pattern": SUBJECT})],
) -> Parked:
    if who.restricted:
        raise Forbidden("only an operator may list a subject's parked entries")
    if not is_subject(subject):
        raise BadInput("subject must be 1-128 of [A-Za-z0-9_:@-]", field="subject")
    return Parked(data=ParkedData(subject=subject, entries=await door.visitor.entries(subject)))
