"""The interaction aggregate: one question's life, decided without I/O.

An interaction is asked once, then resolved once: answered (by a person, a callback, a channel
reply or the expiry of an async park) or removed (timed out, cancelled, abandoned by its waiter,
or undeliverable). ``evolve`` applies a recorded event to the state; the ``decide_*`` functions
look at a state and return the one event to append, or the reason nothing is appended. The event
store appends what they return with the state's sequence expected, so a concurrent resolution
makes the append fail and the decision is taken again on the newer state
(docs/aggregates/interaction.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal, assert_never

import msgspec

from layby_contracts.channels import InboundReply
from layby_contracts.errors import BadInput, Conflict, Forbidden, NotFound
from layby_contracts.events import (
    EXPIRY_ANSWER,
    EXPIRY_ANSWERER,
    ChannelTarget,
    InteractionAnswered,
    InteractionAsked,
    InteractionEvent,
    InteractionRemoved,
    InteractionRouted,
    InteractionSettled,
    InteractionTaken,
    InteractionWithdrawn,
    Progress,
    Vote,
)
from layby_domain import routing
from layby_domain.formats import format_named
from layby_domain.validation import validate_answer

Status = Literal["absent", "pending", "answered", "removed"]
RemovalReason = Literal["timeout", "cancelled", "abandoned", "delivery_failed"]
NOT_FOUND = "Interaction not found"
ALREADY_ANSWERED = "Interaction already answered"
NOT_ADDRESSED = "restricted identities may answer only interactions addressed to them"
ADDRESSED_TO_ANOTHER = "interaction is addressed to another identity"


class Facts(msgspec.Struct, frozen=True, kw_only=True):
    """What every resolution copies from the question it resolves: where the answer must go
    (``waiter``, ``run_id``), who may see it (``audience``) and whether it is secret."""

    interaction_id: str
    group_id: str
    audience: str | None = None
    waiter: str | None = None
    run_id: str | None = None
    sensitive: bool = False
    channels: list[str] | None = None
    to: Literal["caller"] | None = None
    """``caller``: a caller ask. Every resolution copies it, so each of its events stays hidden
    from people (docs/caller-asks.md#hidden-from-the-inbox)."""
    offered: list[str] | None = None
    """A routed question: who it was offered to beyond ``audience`` (docs/routing.md)."""


def of_caller_ask(event: object) -> bool:
    """Whether ``event`` belongs to a caller ask, which no person ever sees or answers
    (docs/caller-asks.md#hidden-from-the-inbox): its asked, answered and removed events say
    ``to="caller"``, and only caller asks are ever settled or taken."""
    if isinstance(event, InteractionSettled | InteractionTaken):
        return True
    return (
        isinstance(event, InteractionAsked | InteractionAnswered | InteractionRemoved)
        and event.to == "caller"
    )


def targets_of(asked: InteractionAsked) -> list[ChannelTarget]:
    """Every channel a question goes to, with its recipient (docs/channels.md#several-channels)."""
    if asked.chat is not None and asked.chat.targets:
        return list(asked.chat.targets)
    return (
        [ChannelTarget(channel=asked.channel, recipient=asked.recipient)] if asked.channel is not None else []
    )


def current_targets(asked: InteractionAsked, progress: Progress) -> list[ChannelTarget]:
    """Every channel a routed question is on now: its own, and each escalation's so far."""
    targets = targets_of(asked)
    return targets + [t for t in routing.escalated_targets(asked, progress) if t not in targets]


def channels_of(asked: InteractionAsked) -> list[str] | None:
    """The names of the channels a question was delivered to (None: the inbox only)."""
    return [target.channel for target in targets_of(asked)] or None


def facts_of(asked: InteractionAsked) -> Facts:
    return Facts(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        audience=asked.audience,
        waiter=asked.waiter,
        run_id=asked.run_id,
        sensitive=asked.sensitive,
        channels=channels_of(asked),
        to=asked.to,
        offered=routing.offered_at_first(asked),
    )


@dataclass(frozen=True, slots=True)
class Interaction:
    """The state of one interaction as far as its log has been read.

    ``seq`` is the stream sequence of the last event applied: the expected sequence of the next
    append. ``asked`` is None when only a resolution was read (its question is then known by
    ``facts`` alone, or not at all) or when a pending state was built from a projection row.
    """

    seq: int = 0
    facts: Facts | None = None
    asked: InteractionAsked | None = None
    answered: InteractionAnswered | None = None
    removed: InteractionRemoved | None = None
    progress: Progress | None = None
    """A routed question's votes, escalations, reminders and delegations so far."""
    asked_seq: int = 0
    """The stream sequence of the asked event (a routing event names it)."""

    @property
    def status(self) -> Status:
        if self.answered is not None:
            return "answered"
        if self.removed is not None:
            return "removed"
        if self.facts is not None:
            return "pending"
        return "absent"

    @property
    def of_caller(self) -> bool:
        """A caller ask, as far as the events read tell."""
        if self.facts is not None and self.facts.to == "caller":
            return True
        return any(of_caller_ask(ev) for ev in (self.asked, self.answered, self.removed))

    @classmethod
    def pending(cls, facts: Facts, seq: int) -> Interaction:
        """A pending question known from a read model (its Asked event at ``seq``)."""
        return cls(seq=seq, facts=facts)


def evolve(state: Interaction, event: InteractionEvent, seq: int) -> Interaction:
    """Apply one recorded event (at stream sequence ``seq``)."""
    match event:
        case InteractionAsked():
            return Interaction(seq=seq, facts=facts_of(event), asked=event, asked_seq=seq)
        case InteractionAnswered():
            return replace(state, seq=seq, answered=event)
        case InteractionRemoved():
            return replace(state, seq=seq, removed=event)
        case InteractionRouted():
            facts = state.facts or Facts(
                interaction_id=event.interaction_id,
                group_id=event.group_id,
                audience=event.audience,
                waiter=event.waiter,
                run_id=event.run_id,
                channels=event.channels,
            )
            offered = event.progress.offered or None
            return replace(
                state,
                seq=seq,
                progress=event.progress,
                facts=msgspec.structs.replace(facts, offered=offered, channels=event.channels),
                asked_seq=event.asked_seq,
            )
        case _:
            assert_never(event)


def answered_event(
    facts: Facts,
    *,
    by: str,
    at: datetime,
    answer: Any,
    secret_ref: str | None = None,
    via: str | None = None,
    params: dict[str, Any] | None = None,
    votes: list[Vote] | None = None,
) -> InteractionAnswered:
    """The one way an answer is recorded: a sensitive answer's value never enters the log (it is
    kept under ``secret_ref``)."""
    return InteractionAnswered(
        interaction_id=facts.interaction_id,
        group_id=facts.group_id,
        audience=facts.audience,
        answered_by=by,
        answered_at=at,
        sensitive=facts.sensitive,
        answer=None if facts.sensitive else answer,
        waiter=facts.waiter,
        secret_ref=secret_ref,
        run_id=facts.run_id,
        via=via,
        params=params,
        channels=facts.channels,
        to=facts.to,
        votes=votes,
        offered=facts.offered,
    )


def removed_event(
    facts: Facts, *, reason: RemovalReason, at: datetime, detail: str | None = None
) -> InteractionRemoved:
    """The one way a removal is recorded."""
    return InteractionRemoved(
        interaction_id=facts.interaction_id,
        group_id=facts.group_id,
        audience=facts.audience,
        reason=reason,
        removed_at=at,
        waiter=facts.waiter,
        run_id=facts.run_id,
        detail=detail,
        channels=facts.channels,
        to=facts.to,
        offered=facts.offered,
    )


@dataclass(frozen=True, slots=True)
class Append:
    """Append ``event`` expecting the state's sequence. ``secret`` (an answer's value) is stored
    under the event's ``secret_ref`` before the append, never in the log."""

    event: InteractionEvent
    secret: Any = None


@dataclass(frozen=True, slots=True)
class Keep:
    """Append nothing: the state already says how this ends (``why`` tells the caller)."""

    why: Status


Decision = Append | Keep


def check_answerable(state: Interaction) -> InteractionAsked:
    """An answer needs a pending question whose Asked event was read; otherwise the door's
    refusal: a missing or removed question is not found, an answered one a conflict."""
    if state.status == "answered":
        raise Conflict(ALREADY_ANSWERED)
    if state.status != "pending" or state.asked is None:
        raise NotFound(NOT_FOUND)
    return state.asked


def decide_answer(
    state: Interaction, *, by: str, restricted: bool, answer: Any, now: datetime, via: str = "api"
) -> Append:
    """A person answers through the answer door. Raises the refusal (in the door's order: not
    found, already answered, external, audience, format); returns the Answered event.

    A caller ask is resumed only by its calling run, never by a person: to the door it does not
    exist, whatever its state (the same refusal as an unknown id, so nothing tells it apart)."""
    if state.of_caller:
        raise NotFound(NOT_FOUND)
    asked = check_answerable(state)
    if not format_named(asked.answer_format).answered_at_the_door:
        raise BadInput("external interactions are answered via their callback URL")
    if routing.routed(asked, state.progress):
        routing.check_may_decide(asked, state.progress, by=by, restricted=restricted)
    elif restricted:
        if asked.audience is None:
            raise Forbidden(NOT_ADDRESSED)
        if asked.audience != by:
            raise Forbidden(ADDRESSED_TO_ANOTHER)
    typed = validate_answer(asked.answer_format, asked.format_payload, answer)
    if routing.routed(asked, state.progress):
        return _vote(state, asked, by=by, answer=typed, now=now, via=via)
    return _answer(facts_of(asked), by=by, answer=typed, now=now, via=via)


ROUTER = "system:routing"
"""Who a timed routing step (an escalation, a reminder) is recorded as taken by."""


def _vote(
    state: Interaction,
    asked: InteractionAsked,
    *,
    by: str,
    answer: Any,
    now: datetime,
    via: str,
    params: dict[str, Any] | None = None,
) -> Append:
    """One person's decision on a routed question (docs/routing.md#quorum): the answer when it
    decides the question (a veto, or the vote that makes the quorum), else a ``voted`` step. A
    second decision by the same person is refused (409)."""
    vote = Vote(by=by, at=now, via=via, answer=None if asked.sensitive else answer)
    progress = routing.add_vote(asked, state.progress, vote)
    facts = state.facts or facts_of(asked)
    if routing.decides(asked, progress.votes):
        votes = progress.votes if asked.routing is not None else None
        return _answer(facts, by=by, answer=answer, now=now, via=via, params=params, votes=votes)
    return Append(_routed(state, asked, step="voted", by=by, now=now, progress=progress))


def _routed(
    state: Interaction,
    asked: InteractionAsked,
    *,
    step: Literal["voted", "escalated", "reminded", "delegated"],
    by: str,
    now: datetime,
    progress: Progress,
    targets: list[ChannelTarget] | None = None,
    to: list[str] | None = None,
) -> InteractionRouted:
    facts = state.facts or facts_of(asked)
    return InteractionRouted(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        audience=asked.audience,
        step=step,
        by=by,
        at=now,
        progress=progress,
        asked_seq=state.asked_seq,
        targets=targets or None,
        next_at=routing.next_due_at(asked, progress),
        to=to or None,
        waiter=facts.waiter,
        run_id=facts.run_id,
        # Every channel it is on after this step: a reply there is a reply to it, and each copy
        # is retracted when it ends.
        channels=[t.channel for t in current_targets(asked, progress)] or None,
    )


def decide_route(state: Interaction, *, now: datetime) -> Decision:
    """The sweeper's timed step (docs/routing.md#escalation): the escalation or reminder due at
    ``now``, or nothing (a question decided, gone or not yet due keeps its state)."""
    if state.status != "pending" or state.asked is None:
        return Keep(state.status)
    found = routing.due(state.asked, state.progress, now)
    if found is None:
        return Keep("pending")
    step, progress, targets = found
    if step == "reminded":
        targets = current_targets(state.asked, progress)
    to = None
    if step == "escalated" and state.asked.routing is not None and state.asked.routing.escalate:
        to = state.asked.routing.escalate[progress.escalated - 1].to
    return Append(
        _routed(state, state.asked, step=step, by=ROUTER, now=now, progress=progress, targets=targets, to=to)
    )


def decide_delegate(
    state: Interaction, *, by: str, restricted: bool, to: Any, note: Any, now: datetime
) -> Append:
    """``by`` hands a pending question to ``to`` (docs/routing.md#delegation); refused in the
    answer door's order (not found, already answered, who may decide, the body)."""
    if state.of_caller:
        raise NotFound(NOT_FOUND)
    asked = check_answerable(state)
    if not format_named(asked.answer_format).answered_at_the_door:
        raise BadInput("external interactions are answered via their callback URL")
    routing.check_may_decide(asked, state.progress, by=by, restricted=restricted)
    progress = routing.add_delegation(asked, state.progress, by=by, to=to, note=note, now=now)
    return Append(_routed(state, asked, step="delegated", by=by, now=now, progress=progress, to=[to]))


def decide_claim(state: Interaction, *, by: str, answer: Any, now: datetime) -> Decision:
    """A callback (external provider or channel reply) claims the question with an answer that
    was already checked. An answered question keeps its answer (the idempotent success); a
    removed one stays removed."""
    if state.status in ("answered", "removed", "absent"):
        return Keep(state.status)
    assert state.facts is not None
    if state.asked is not None and routing.routed(state.asked, state.progress):
        # The ticket's holder is the one it was delivered to: one vote, whoever they are.
        if any(vote.by == by for vote in (state.progress.votes if state.progress else [])):
            return Keep("pending")
        return _vote(state, state.asked, by=by, answer=answer, now=now, via="callback")
    return _answer(state.facts, by=by, answer=answer, now=now, via="callback")


def decide_expire(state: Interaction, *, now: datetime) -> Decision:
    """An async park's deadline passed with no answer: it resolves with the reserved marker,
    answered by the system, through the same race as a person's answer."""
    if state.status != "pending":
        return Keep(state.status)
    assert state.facts is not None
    # The marker is no secret, even on a sensitive question: the run must read it.
    facts = msgspec.structs.replace(state.facts, sensitive=False)
    return Append(answered_event(facts, by=EXPIRY_ANSWERER, at=now, answer=EXPIRY_ANSWER, via="expiry"))


def decide_remove(
    state: Interaction, *, reason: RemovalReason, now: datetime, detail: str | None = None
) -> Decision:
    """Remove a pending question (timeout, cancellation, abandoned waiter, failed delivery).
    A resolved question keeps its resolution: an answer that won stands."""
    if state.status != "pending":
        return Keep(state.status)
    assert state.facts is not None
    return Append(removed_event(state.facts, reason=reason, at=now, detail=detail))


def decide_prune(
    state: Interaction, *, reason: RemovalReason, now: datetime, restricted_to: str | None
) -> Decision:
    """A waiter that gave up prunes its question. A restricted identity (``restricted_to``) may
    prune only its own question. Nothing recorded yet is ``Keep("absent")``: the caller records
    a withdrawal instead (``withdrawal``), never anything on the question's own subject."""
    asker = state.asked.asked_by if state.asked is not None else None
    if state.status == "pending" and restricted_to is not None and asker != restricted_to:
        raise Forbidden("only the asker may prune its question")
    return decide_remove(state, reason=reason, now=now)


def withdrawal(interaction_id: str, *, by: str, reason: RemovalReason, now: datetime) -> InteractionWithdrawn:
    """``by`` will not ask ``interaction_id`` after all (its prune overtook its ask)."""
    return InteractionWithdrawn(interaction_id=interaction_id, by=by, reason=reason, withdrawn_at=now)


def decide_withdrawn(state: Interaction, *, by: str, reason: RemovalReason, now: datetime) -> Decision:
    """After a withdrawal by ``by``: its question, if it was recorded meanwhile, is removed; anyone
    else's question of that id is left alone."""
    if state.status == "pending" and state.asked is not None and state.asked.asked_by == by:
        return decide_remove(state, reason=reason, now=now)
    return Keep(state.status)


def _answer(
    facts: Facts,
    *,
    by: str,
    answer: Any,
    now: datetime,
    via: str,
    params: dict[str, Any] | None = None,
    votes: list[Vote] | None = None,
) -> Append:
    """A sensitive answer goes into ``secret``; the store files it under a fresh reference before
    it appends the event (one reference per attempt, so a losing answer never overwrites the
    winner's)."""
    if facts.sensitive:
        hidden = answered_event(facts, by=by, at=now, answer=None, via=via, params=params, votes=votes)
        return Append(hidden, secret=answer)
    return Append(answered_event(facts, by=by, at=now, answer=answer, via=via, params=params, votes=votes))


def decide_reply(state: Interaction, *, reply: InboundReply, by: str, now: datetime) -> Decision:
    """A person replied on a chat channel (docs/channels.md#replies). A question already answered
    or gone keeps its state (the caller treats the reply as late); a reply the question refuses
    raises ``BadInput`` with the reason (the ask's ``on_mismatch`` decides what follows); a fitting
    one is the answer, with the tapped control's ``params``."""
    if state.status != "pending" or state.asked is None:
        return Keep(state.status)
    asked = state.asked
    fmt = format_named(asked.answer_format)
    payload = fmt.typed(asked.format_payload)
    answer = fmt.check_answer(payload, fmt.reply_answer(payload, reply.kind, reply.index, reply.value))
    params = None
    reply_ids = asked.chat.reply_ids if asked.chat is not None else None
    if reply.kind == "tap" and reply_ids and reply.index is not None and reply.index < len(reply_ids):
        params = {"reply_id": reply_ids[reply.index]}
    if routing.routed(asked, state.progress):
        routing.check_may_decide(asked, state.progress, by=by, restricted=False)
        return _vote(state, asked, by=by, answer=answer, now=now, via="channel", params=params)
    return _answer(facts_of(asked), by=by, answer=answer, now=now, via="channel", params=params)


def mismatch_notice(asked: InteractionAsked, reason: str) -> str | None:
    """The line a person gets when the question refuses their reply (docs/channels.md#mismatch):
    none under ``bridge``; the ask's ``mismatch_notice`` with ``{reason}`` filled in by plain
    substitution; else the built-in line."""
    chat = asked.chat
    if chat is not None and chat.on_mismatch == "bridge":
        return None
    if chat is not None and chat.mismatch_notice is not None:
        return chat.mismatch_notice.replace("{reason}", reason)
    return f"That reply does not fit this question ({reason}). Please answer again."
