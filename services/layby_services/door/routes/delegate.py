"""``POST /api/interactions/{id}/delegate``: a person hands a pending question to someone else
(docs/routing.md#delegation).

The same order and the same compare-and-set as the answer door: unknown (404), already answered
(409), external (400), who may decide (403), then the body (400 naming ``to`` or ``note``); the
delegation is a routing step on the question's subject, appended expecting the state it was
decided on, so it cannot pass an answer that landed first.
"""

from __future__ import annotations

from litestar import post
from litestar.di import NamedDependency

from layby_contracts.errors import Conflict, NotFound
from layby_contracts.http import Delegated, DelegatedData, DelegateRequest
from layby_domain.interaction import ALREADY_ANSWERED, NOT_FOUND, decide_delegate
from layby_domain.routing import HANDED_ON, NOT_A_VOTER
from layby_domain.validation import is_interaction_id
from layby_server.write.resolve import resolve
from layby_services.door.bodies import decode_struct
from layby_services.door.deps import Door, Who, json_body
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.routes.asks import InteractionId


def parse_delegate_body(raw: bytes) -> DelegateRequest:
    return decode_struct(raw, DelegateRequest)


@post(
    "/api/interactions/{interaction_id:str}/delegate",
    operation_id="delegateInteraction",
    tags=["interactions"],
    operation_class=documented(body=DelegateRequest, responses=UNAVAILABLE_503),
    dependencies={"payload": json_body(parse_delegate_body)},
    status_code=200,
    summary="Hand a pending question to someone else",
    description="Checks, in order: credentials, the body's shape, unknown question (404), already answered "
    "(409), external question (400), whether the caller decides this question (403), then `to` and `note` "
    "(400, or 409 when `to` already decides it or the caller already voted). The delegate may then decide "
    "it and the caller no longer; both see the delegation in its history (docs/routing.md#delegation).",
    responses={
        400: refusal("The body, an external question, or `to` / `note`.", field=True),
        403: refusal(
            "The caller does not decide this question (not its audience or a voter), or handed it on.",
            NOT_A_VOTER,
            HANDED_ON,
            "restricted identities may answer only interactions addressed to them",
            name="MayNotDelegate",
        ),
        404: refusal(
            "Not a lowercase uuid4, unknown, removed, or a caller ask: indistinguishable.", NOT_FOUND
        ),
        409: refusal(
            "Already answered; `to` already decides it; or the caller already decided it.",
            field=True,
        ),
    },
)
async def delegate_door(
    door: Door, who: Who, payload: NamedDependency[DelegateRequest], interaction_id: InteractionId
) -> Delegated:
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    resolved = await resolve(
        door.store,
        interaction_id,
        lambda s: decide_delegate(
            s,
            by=who.identity,
            restricted=who.restricted,
            to=payload.to,
            note=payload.note,
            now=door.clock.now(),
        ),
    )
    if resolved.appended is None:
        raise Conflict(ALREADY_ANSWERED)
    return Delegated(data=DelegatedData(interaction_id=interaction_id, to=payload.to))
