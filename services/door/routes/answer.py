"""``POST /api/interactions/{id}/answer``: the human answer door (inventory A16).

Order: body size (413), JSON (400), ``answer`` key (400), then the log: unknown or pruned
(404), external (400), already answered (409), audience (403), format (400). The first answer
wins: the append expects the Asked event's sequence, so a concurrent second answer loses the
race in the log and gets 409.
"""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Request, post
from litestar.params import FromPath

from contracts.events import EXPIRY_KEY, InteractionAnswered, InteractionAsked, InteractionRemoved
from layby.auth import Principal
from layby.errors import BadInput, Conflict, Forbidden, NotFound
from layby.eventstore import Stored
from layby.validation import is_interaction_id, nul_path, validate_answer
from services.door.deps import DoorState, door, principal_of, read_capped_body

_enc = msgspec.json.Encoder()
NOT_FOUND = "Interaction not found"


def parse_answer_body(raw: bytes) -> Any:
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise BadInput("invalid JSON body") from None
    except RecursionError:
        raise BadInput("answer is nested too deeply") from None
    if not isinstance(body, dict) or "answer" not in body:
        raise BadInput("body must contain 'answer'")
    if isinstance(body["answer"], dict) and EXPIRY_KEY in body["answer"]:
        # Only the sweeper resolves a park as expired; a person cannot fake the marker.
        raise BadInput(f"answer must not carry the reserved key {EXPIRY_KEY!r}", field=f"answer.{EXPIRY_KEY}")
    where = nul_path(body["answer"])
    if where is not None:
        raise BadInput("answer must not contain NUL characters", field=where or None)
    return body["answer"]


def _check(asked: InteractionAsked, who: Principal, answer: Any) -> Any:
    """Format, audience and value checks, in the door's order; returns the typed answer."""
    if asked.answer_format == "external":
        raise BadInput("external interactions are answered via their callback URL")
    if who.restricted:
        if asked.audience is None:
            raise Forbidden("restricted identities may answer only interactions addressed to them")
        if asked.audience != who.identity:
            raise Forbidden("interaction is addressed to another identity")
    return validate_answer(asked.answer_format, asked.format_payload, answer)


async def answered_event(
    state: DoorState, asked: InteractionAsked, answered_by: str, typed: Any
) -> InteractionAnswered:
    """The resolution a door appends. A sensitive value goes first to its own secret message,
    never into the log event; one secret per attempt, so a losing concurrent answer never
    overwrites the winner's."""
    secret_ref = None
    if asked.sensitive:
        secret_ref = uuid.uuid4().hex
        await state.store.put_secret(asked.interaction_id, secret_ref, _enc.encode(typed))
    return InteractionAnswered(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        audience=asked.audience,
        answered_by=answered_by,
        answered_at=state.clock.now(),
        sensitive=asked.sensitive,
        answer=None if asked.sensitive else typed,
        waiter=asked.waiter,
        secret_ref=secret_ref,
        run_id=asked.run_id,
    )


async def submit_answer(state: DoorState, who: Principal, interaction_id: str, answer: Any) -> None:
    store = state.store
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    subject = store.names.ix(interaction_id)
    cached = state.asked.get(interaction_id)
    leader = False
    for _ in range(5):
        last: Stored | None
        from_cache = cached is not None
        if cached is not None:
            last, cached = cached, None
        else:
            last = await store.last(subject, leader=leader)
        if last is None or isinstance(last.event, InteractionRemoved):
            raise NotFound(NOT_FOUND)
        if isinstance(last.event, InteractionAnswered):
            raise Conflict("Interaction already answered")
        if not isinstance(last.event, InteractionAsked):
            raise NotFound(NOT_FOUND)
        asked: InteractionAsked = last.event
        try:
            typed = _check(asked, who, answer)
        except (BadInput, Forbidden):
            if from_cache:
                continue  # the cache may be stale: a refusal is decided against the log (409 first)
            raise
        event = await answered_event(state, asked, who.identity, typed)
        try:
            await store.append(
                subject, event, msg_id=f"answered-{interaction_id}-{uuid.uuid4().hex}", expected_seq=last.seq
            )
        except Conflict:
            leader = True
            continue  # another resolution won: re-read from the leader, report what the log decided
        return
    raise Conflict("Interaction already answered")


@post("/api/interactions/{interaction_id:str}/answer", status_code=200, summary="Answer a pending question")
async def answer_door(request: Request[Any, Any, Any], interaction_id: FromPath[str]) -> dict[str, Any]:
    """Body ``{"answer": <value>}``; 200 ``{"data": {"interaction_id", "status": "answered"}}``."""
    state = door(request)
    who = principal_of(request)
    raw = await read_capped_body(request, state.settings.max_body_bytes)
    answer = parse_answer_body(raw)
    await submit_answer(state, who, interaction_id, answer)
    return {"data": {"interaction_id": interaction_id, "status": "answered"}}
