"""The HTTP ask doors (docs/doors/asks.md): ``POST /api/asks`` records a question as the SDK's
``ask_user`` does, ``GET /api/interactions/{id}/outcome?wait=`` reads what became of it (a long
poll), ``DELETE /api/interactions/{id}`` withdraws it.

- **The same ask.** The body is checked by the same rules as ``ask_user`` (``validate_ask``) and
  sent as the same ``Ask`` command to the ask service, which decides again (audience rules, caps,
  channels) and records it; every refusal names the field and nothing is recorded.
- **Sync, with no waiter** (docs/decisions/0029-http-asks.md). An HTTP ask is a ``sync`` question
  with a deadline (``timeout``, or the server's default) and no waiting process: its wake goes to
  ``<ns>.wake.<id>``, which only doors hear. Nothing depends on a poll being connected: an answer
  is recorded whether or not anyone polls, and a question nobody answers is removed at its
  deadline — by the first poll that sees the deadline pass (reason ``timeout``), else by the
  sweeper after the grace period (reason ``abandoned``); both are the outcome ``expired``.
- **Exactly one outcome.** A poll reports what the question's subject holds (its last event,
  ``state_of``); a wake only makes a waiting poll read again. The log's first resolution wins
  (compare-and-set), so every poll — concurrent ones too — reports that one outcome.
- **Who.** A ``user`` identity sees the questions it asked and those addressed to it; anything
  else is the same 404 as an unknown id. A sensitive answer's value goes only to the identity
  that asked, handed over by the ask service (the door reads no sealed answer itself).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Annotated, Any

import msgspec
from litestar import delete, get, post
from litestar.di import NamedDependency
from litestar.params import PathParameter, QueryParameter

from layby.ids import new_interaction_id, new_ticket
from layby_contracts.commands import Accepted, Ask, Prune, PruneResult, Reply
from layby_contracts.errors import BadInput, NotFound, Unavailable
from layby_contracts.events import InteractionAnswered, InteractionAsked
from layby_contracts.http import (
    AskCreated,
    AskCreatedData,
    AskRequest,
    Outcome,
    OutcomeData,
    Withdrawn,
    WithdrawnData,
)
from layby_contracts.question import Question, question_fields
from layby_domain.chat import chat_options
from layby_domain.formats import known_format
from layby_domain.interaction import NOT_FOUND, Interaction, decide_remove
from layby_domain.tickets import callback_url
from layby_domain.validation import ask_command, is_interaction_id, validate_ask
from layby_server.auth import Principal
from layby_server.write.resolve import read_state, resolve
from layby_services.door.bodies import decode_struct
from layby_services.door.commands import send
from layby_services.door.deps import Door, DoorState, Token, Who, json_body
from layby_services.door.errors import Busy
from layby_services.door.openapi import UUID4, documented, refusal
from layby_services.door.openapi.components import RETRY_503
from layby_services.door.wakes import WakeHub

LINK_PLACEHOLDER = "https://example.invalid/"
"""An external question's link while the rest of the ask is checked (its ticket comes after)."""
EXPIRED_REASONS = ("timeout", "abandoned")
"""Removals that are the question's deadline passing: reported as ``expired``."""
TOO_MANY_POLLS = "too many outcome long polls on this door; retry shortly"
_enc = msgspec.json.Encoder()

InteractionId = Annotated[
    str,
    PathParameter(
        description="A lowercase uuid4; anything else is the same 404 as an unknown question.",
        schema_extra={"pattern": UUID4},
    ),
]
Wait = Annotated[
    float,
    QueryParameter(
        ge=0,
        description="Seconds to wait for the outcome (0: answer at once). A larger value than "
        "LAYBY_HTTP_POLL_MAX_WAIT_SECONDS (default 30) is lowered to it; 400 when negative or not a number.",
    ),
]
QUESTION_NOT_FOUND = refusal(
    "Not a lowercase uuid4, unknown, a run's question, or (for a `user`) a question it neither asked "
    "nor is addressed: indistinguishable.",
    NOT_FOUND,
)


def parse_ask_body(raw: bytes) -> AskRequest:
    """The body as an ``AskRequest``: a JSON object of known keys with the right types."""
    return decode_struct(raw, AskRequest)


def command_of(body: AskRequest, token: str, state: DoorState) -> Ask:
    """The ``Ask`` the SDK's ``ask_user`` would send for these arguments (sync, no waiter), checked
    by the same rules first: the body's question, with its channels and chat options resolved."""
    channel, recipient, chat = chat_options(
        body.channel,
        body.recipient,
        on_mismatch=body.on_mismatch,
        mismatch_notice=body.mismatch_notice,
        reply_ids=body.reply_ids,
    )
    question = Question(**question_fields(body), channel=channel, recipient=recipient)
    default_timeout = state.settings.answer_timeout_seconds
    base = state.settings.public_base_url
    fmt = known_format(body.answer_format)
    ticket_hash = None
    if channel is None and fmt is not None and fmt.needs_link(None):
        link = body.link
        if link is None:
            raise BadInput(f"answer_format {body.answer_format!r} requires a link", field="link")
        if "{callback_url}" not in link:
            raise BadInput("a link template must contain the literal {callback_url}", field="link")
        spec = validate_ask(
            msgspec.structs.replace(question, link_url=LINK_PLACEHOLDER), default_timeout=default_timeout
        )
        if not base:
            raise BadInput("external questions need INTERACTIONS_PUBLIC_BASE_URL on the server", field="link")
        ticket, ticket_hash = new_ticket()
        url = link.replace("{callback_url}", callback_url(base, ticket))
        spec = validate_ask(msgspec.structs.replace(question, link_url=url), default_timeout=default_timeout)
    elif body.link is not None:
        raise BadInput("link is only for 'external' questions", field="link")
    else:
        spec = validate_ask(question, default_timeout=default_timeout)
    if channel is not None and not base:
        raise BadInput("channel questions need INTERACTIONS_PUBLIC_BASE_URL on the server", field="channel")
    return ask_command(
        spec,
        token=token,
        interaction_id=new_interaction_id(),
        ticket_hash=ticket_hash,
        chat=chat,
        notify_url=body.notify_url,
    )


async def send_command(state: DoorState, subject: str, cmd: Ask | Prune) -> Reply:
    """One request to the ask service; its refusal raised as the error it raised."""
    return await send(state.store, subject, cmd)


@post(
    "/api/asks",
    operation_id="ask",
    tags=["interactions"],
    operation_class=documented(body=AskRequest),
    status_code=201,
    dependencies={"payload": json_body(parse_ask_body)},
    summary="Ask a question over HTTP",
    description="Recorded exactly as the SDK's `ask_user` records it (the same rules, caps, audience rules "
    "and channels), as a question with a deadline (`timeout` seconds, or the server's default) and no "
    "waiting process; read what becomes of it at `GET /api/interactions/{id}/outcome` "
    "(docs/doors/asks.md).",
    responses={
        400: refusal(
            "The body (not JSON, not an object, an unknown key, a wrong type) or a rule of the ask "
            "(docs/asking.md); `field` names the input at fault. Nothing was recorded.",
            field=True,
        ),
        403: refusal("A `user` identity naming another identity's `audience`.", field=True),
        429: refusal("The server holds INTERACTIONS_MAX_CONCURRENT pending questions already."),
        501: refusal("The channel lacks a capability the question needs.", field=True),
        503: refusal("The ask service is unavailable; nothing was recorded.", field=True),
    },
)
async def ask_door(door: Door, token: Token, payload: NamedDependency[AskRequest]) -> AskCreated:
    """Body: an ``AskRequest`` (read under the body cap by the door itself)."""
    cmd = command_of(payload, token, door)
    reply = await send_command(door, door.store.names.cmd_ask, cmd)
    if not isinstance(reply, Accepted):
        raise Unavailable("the ask service answered an ask with something else")
    return AskCreated(
        data=AskCreatedData(
            interaction_id=reply.interaction_id, group_id=reply.group_id, timeout_at=reply.timeout_at
        )
    )


async def visible_ask(state: DoorState, who: Principal, interaction_id: str) -> InteractionAsked:
    """The question's ask, when the caller may see it: asked outside a run, and for a ``user``
    identity asked by it or addressed to it. Anything else is the uniform 404."""
    if not is_interaction_id(interaction_id):
        raise NotFound(NOT_FOUND)
    first = await state.store.first(state.store.names.ix(interaction_id))
    asked = None if first is None else first.event
    if not isinstance(asked, InteractionAsked) or asked.run_id is not None or asked.to == "caller":
        raise NotFound(NOT_FOUND)
    if who.restricted and who.identity not in (asked.asked_by, asked.audience):
        raise NotFound(NOT_FOUND)
    return asked


async def outcome_of(
    state: DoorState, who: Principal, token: str, asked: InteractionAsked, found: Interaction
) -> OutcomeData | None:
    """What the log's state says became of the question; None while it is pending."""
    common: dict[str, Any] = {
        "interaction_id": asked.interaction_id,
        "timeout_at": asked.timeout_at.isoformat(),
    }
    answered, removed = found.answered, found.removed
    if answered is not None:
        return OutcomeData(status="answered", **common, **await _answer(state, who, token, asked, answered))
    if removed is not None:
        if removed.detail is not None:
            common["detail"] = removed.detail
        expired = removed.reason in EXPIRED_REASONS
        return OutcomeData(status="expired" if expired else "removed", reason=removed.reason, **common)
    return None


async def _answer(
    state: DoorState, who: Principal, token: str, asked: InteractionAsked, answered: InteractionAnswered
) -> dict[str, Any]:
    """The answer's fields; a sensitive answer's value only for the identity that asked. The door
    never reads sealed answers itself: the ask service hands the value to its asker, as it does to
    an SDK waiter whose wake was lost (its reply to the asker's prune of an answered question,
    which removes nothing)."""
    out: dict[str, Any] = {
        "answered_by": answered.answered_by,
        "answered_at": answered.answered_at.isoformat(),
        "sensitive": answered.sensitive,
    }
    if answered.params is not None:
        out["params"] = answered.params
    if not answered.sensitive:
        out["answer"] = answered.answer
    elif who.identity == asked.asked_by:
        cmd = Prune(token=token, interaction_id=answered.interaction_id, reason="cancelled")
        reply = await send_command(state, state.store.names.cmd_prune, cmd)
        if isinstance(reply, PruneResult) and reply.outcome == "answered" and reply.answer is not None:
            out["answer"] = reply.answer
    return out


async def _read(state: DoorState, interaction_id: str, *, leader: bool) -> Interaction:
    return await read_state(state.store, state.store.names.ix(interaction_id), leader=leader)


async def _expire(state: DoorState, interaction_id: str) -> Interaction:
    """The deadline passed with the question pending: remove it (reason ``timeout``), as a sync
    asker does at its deadline; an answer or a removal that got there first stands."""
    resolved = await resolve(
        state.store, interaction_id, lambda s: decide_remove(s, reason="timeout", now=state.clock.now())
    )
    if resolved.appended is not None:
        return await _read(state, interaction_id, leader=True)
    return resolved.state


def hub_of(state: DoorState) -> WakeHub:
    if state.wakes is None:
        state.wakes = WakeHub(state.store.nc, state.store.names)
    return state.wakes


async def long_poll(
    state: DoorState, who: Principal, token: str, asked: InteractionAsked, wait: float
) -> OutcomeData:
    """The outcome as soon as the log holds it, or ``pending`` once ``wait`` has passed."""
    interaction_id = asked.interaction_id
    hub = hub_of(state)
    end = time.monotonic() + min(wait, state.settings.http_poll_max_wait_seconds)
    leader = False
    while True:
        # Listen before reading, so a resolution recorded between the read and the wait wakes us.
        woken = await hub.listen(interaction_id) if wait > 0 else None
        try:
            found = await _read(state, interaction_id, leader=leader)
            if found.status == "pending" and state.clock.now() >= asked.timeout_at:
                found = await _expire(state, interaction_id)
            outcome = await outcome_of(state, who, token, asked, found)
            if outcome is not None:
                return outcome
            remaining = end - time.monotonic()
            if woken is None or remaining <= 0:
                if not leader and state.store.replicated:
                    # A replica may lag an answer just acknowledged on another door: "pending"
                    # is said only on the leader's word (docs/reliability.md#reads-after-writes).
                    leader = True
                    continue
                return OutcomeData(
                    interaction_id=interaction_id, status="pending", timeout_at=asked.timeout_at.isoformat()
                )
            until_deadline = (asked.timeout_at - state.clock.now()).total_seconds()
            await asyncio.wait({woken}, timeout=max(0.0, min(remaining, until_deadline)))
            leader = True  # woken: the resolution is in the log; read it from the leader
        finally:
            if woken is not None:
                hub.forget(interaction_id, woken)


@get(
    "/api/interactions/{interaction_id:str}/outcome",
    operation_id="getOutcome",
    tags=["interactions"],
    operation_class=documented(responses=RETRY_503),
    summary="What became of a question (a long poll)",
    description="`answered` (with the answer), `expired` (its deadline passed), `removed` (with the "
    "reason) as soon as the log holds it, else `pending` once `wait` seconds have passed. Every poll "
    "of a question reports the one outcome the log decided (docs/doors/asks.md#the-outcome).",
    responses={
        400: refusal("`wait` is negative or not a number.", field=True),
        404: QUESTION_NOT_FOUND,
        503: refusal(
            "This door holds LAYBY_HTTP_MAX_LONG_POLLS long polls already (with `Retry-After`), or the "
            "event log is unavailable."
        ),
    },
)
async def outcome_door(
    door: Door, who: Who, token: Token, interaction_id: InteractionId, wait: Wait = 0
) -> Outcome:
    """``wait``: seconds to wait for an outcome (0 answers at once)."""
    if math.isnan(wait):
        raise BadInput("wait must be a number of seconds, 0 or more", field="wait")
    asked = await visible_ask(door, who, interaction_id)
    if wait <= 0:
        return Outcome(data=await long_poll(door, who, token, asked, 0))
    if door.long_polls >= door.settings.http_max_long_polls:
        raise Busy(TOO_MANY_POLLS, retry_after=1)
    door.long_polls += 1
    try:
        return Outcome(data=await long_poll(door, who, token, asked, wait))
    finally:
        door.long_polls -= 1


@delete(
    "/api/interactions/{interaction_id:str}",
    operation_id="withdrawInteraction",
    tags=["interactions"],
    status_code=200,
    summary="Withdraw a question",
    description="Removes a pending question (reason `cancelled`), as the SDK's cancellation does. "
    "Idempotent: again, or after it resolved, it answers what became of it (docs/doors/asks.md#withdrawing).",
    responses={
        403: refusal(
            "A `user` identity withdrawing a question addressed to it that it did not ask.", field=True
        ),
        404: QUESTION_NOT_FOUND,
        503: refusal("The ask service is unavailable; nothing was removed.", field=True),
    },
)
async def withdraw_door(door: Door, who: Who, token: Token, interaction_id: InteractionId) -> Withdrawn:
    await visible_ask(door, who, interaction_id)
    cmd = Prune(token=token, interaction_id=interaction_id, reason="cancelled")
    reply = await send_command(door, door.store.names.cmd_prune, cmd)
    if not isinstance(reply, PruneResult) or reply.outcome == "pending":
        raise Unavailable("the ask service answered a prune with something else")
    return Withdrawn(
        data=WithdrawnData(
            interaction_id=interaction_id,
            outcome=reply.outcome,
            **({"reason": reply.reason} if reply.reason is not None else {}),
        )
    )
