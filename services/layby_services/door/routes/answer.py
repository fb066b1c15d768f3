"""``POST /api/interactions/{id}/answer``: the human answer door (docs/doors/answer.md#the-answer-door).

Order: body size (413), JSON (400), ``answer`` key (400), then the log: unknown or pruned
(404), already answered (409), external (400), audience (403), format (400) — the decision is
``layby_domain.interaction.decide_answer``, appended by the store's ``resolve``. The first answer
wins: the append expects the Asked event's sequence, so a concurrent second answer loses the
race in the log and gets 409.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from litestar import Request, post
from litestar.di import NamedDependency
from opentelemetry.util.types import AttributeValue

from layby_contracts.errors import BadInput, Conflict, LaybyError, NotFound
from layby_contracts.events import EXPIRY_KEY, InteractionRouted
from layby_contracts.http import Answered, AnsweredData, AnswerRequest
from layby_domain.interaction import (
    ADDRESSED_TO_ANOTHER,
    ALREADY_ANSWERED,
    NOT_ADDRESSED,
    NOT_FOUND,
    decide_answer,
)
from layby_domain.validation import check_submitted_answer, is_interaction_id
from layby_server.auth import Principal
from layby_server.observability import tracing
from layby_server.store.eventstore import Stored
from layby_server.write.resolve import cached_state, complete, resolve
from layby_services.door.bodies import decode_body
from layby_services.door.deps import Door, DoorState, Who, json_body
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.routes.asks import InteractionId
from layby_services.door.spans import OWN_SPAN, request_trace

_enc = msgspec.json.Encoder()


def parse_answer_body(raw: bytes) -> Any:
    """The answer of a body ``{"answer": <value>}`` (an AnswerRequest); its format is checked
    against the question later (``submit_answer``)."""
    body = decode_body(raw, too_deep="answer is nested too deeply")
    if not isinstance(body, dict) or "answer" not in body:
        raise BadInput("body must contain 'answer'")
    check_submitted_answer(body["answer"], reserved_field=f"answer.{EXPIRY_KEY}")
    return body["answer"]


CLIENT_HEADER = "Layby-Client"
"""Which client sent an answer (``inbox`` or ``cli``; anything else counts as ``api``): shown in the
done list as where it was answered (docs/doors/done.md)."""
CLIENTS = frozenset({"inbox", "cli"})


def client_of(request: Request[Any, Any, Any]) -> str:
    return client_named(request.headers.get(CLIENT_HEADER))


def client_named(said: str | None) -> str:
    """The client a ``Layby-Client`` header names: ``inbox``, ``cli``, or else ``api``."""
    name = (said or "").strip().lower()
    return name if name in CLIENTS else "api"


async def submit_answer(
    state: DoorState,
    who: Principal,
    interaction_id: str,
    answer: Any,
    *,
    via: str = "api",
    request: Mapping[str, str] | None = None,
) -> AnsweredData:
    """Record a person's answer; raises the door's refusal (404, 409, 400, 403). ``request``:
    the request's own trace headers, linked from the answer's span. A routed question may record
    it as a vote that waits for more (docs/routing.md#quorum): the reply says so."""
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    found = state.asked.get(interaction_id)
    # The cache may be stale: a refusal decided on it is decided again against the log (409
    # first). Without a cached entry, the log's last event is what resolve would read first.
    trusted = found is None
    subject = state.store.names.ix(interaction_id)
    if found is None:
        found = await state.store.last(subject)
        seed = await complete(state.store, subject, found)
    else:
        seed = cached_state(found, state.asked.routed(interaction_id))
    # The answer continues the question's trace (its asked event's context), linked to the
    # trace the request came with, if any.
    trace = found.trace if found is not None else None
    with tracing.joining("door answer", trace, _attributes(found, via), request=request) as span:
        try:
            resolved = await resolve(
                state.store,
                interaction_id,
                lambda s: decide_answer(
                    s,
                    by=who.identity,
                    restricted=who.restricted,
                    answer=answer,
                    now=state.clock.now(),
                    via=via,
                ),
                seed=seed,
                trusted=trusted,
            )
        except LaybyError as exc:
            tracing.refused(span, exc)
            raise
        if resolved.appended is None:
            tracing.refused(span, Conflict(ALREADY_ANSWERED))
            raise Conflict(ALREADY_ANSWERED)
    appended = resolved.appended
    if isinstance(appended, InteractionRouted):
        # The next vote, often a moment away, decides on this step without a failed append.
        assert resolved.seq is not None
        state.asked.observe([Stored(seq=resolved.seq, event=appended)])
        asked = resolved.state.asked
        required = asked.routing.required if asked is not None and asked.routing is not None else 1
        return AnsweredData(
            interaction_id=interaction_id,
            status="voted",
            votes=len(appended.progress.votes),
            required=required,
        )
    return AnsweredData(interaction_id=interaction_id)


def _attributes(found: Stored | None, via: str) -> dict[str, AttributeValue]:
    """The answer span's attributes: the question's identifiers and format, where the answer came
    from (never the answer, nor who gave it)."""
    if not tracing.enabled():
        return {}
    attributes = tracing.event_attributes(found.event) if found is not None else {}
    attributes["layby.answered_via"] = via
    return attributes


@post(
    "/api/interactions/{interaction_id:str}/answer",
    operation_id="answerInteraction",
    tags=["interactions"],
    operation_class=documented(body=AnswerRequest, responses=UNAVAILABLE_503),
    opt={OWN_SPAN: True},  # the answer's span is this request's (submit_answer)
    dependencies={"payload": json_body(parse_answer_body)},
    status_code=200,
    summary="Answer a pending question",
    description="Checks, in order: credentials, the body, unknown question (404), already answered (409), "
    "external question (400), audience (403), the answer's format (400); the first resolution recorded "
    "wins (docs/doors/answer.md).",
    responses={
        400: refusal(
            "The body (not JSON, nested too deeply, no `answer`, a repeated key, the reserved key, a NUL "
            "character), an external question, or an answer the question's format refuses; or a request "
            "the HTTP parser cannot read (docs/doors/answer.md#body, #answer-validation).",
            field=True,
        ),
        403: refusal(
            "A `user` identity answering a question not addressed to it.",
            NOT_ADDRESSED,
            ADDRESSED_TO_ANOTHER,
            name="NotAddressedToCaller",
        ),
        404: refusal(
            "Not a lowercase uuid4, unknown, removed, or a caller ask (which only its calling run "
            "resolves): indistinguishable.",
            NOT_FOUND,
        ),
        409: refusal("Already answered (by a person, a callback or a park's expiry).", ALREADY_ANSWERED),
    },
)
async def answer_door(
    request: Request[Any, Any, Any],
    door: Door,
    who: Who,
    payload: NamedDependency[Any],
    interaction_id: InteractionId,
) -> Answered:
    """Body ``{"answer": <value>}`` (an AnswerRequest, read under the body cap by the door itself);
    200 ``{"data": {"interaction_id", "status": "answered"}}`` (``voted`` with ``votes`` and
    ``required`` when a routed question waits for more votes)."""
    data = await submit_answer(
        door, who, interaction_id, payload, via=client_of(request), request=request_trace(request.scope)
    )
    return Answered(data=data)
