"""Routing a question to people: quorum, escalation, reminders, delegation (docs/routing.md).

Pure rules over a question (its ``InteractionAsked``) and where it stands (its ``Progress``): who
may decide it, what a set of votes decides, which timed step is due and when the next one is.
``layby_domain.interaction`` turns them into the events the log records, by the same
compare-and-set as every answer; nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any, Literal

import msgspec

from layby_contracts.errors import BadInput, Conflict, CrossIdentityAudienceError, Forbidden
from layby_contracts.events import (
    ChannelTarget,
    Delegation,
    EscalationStep,
    InteractionAsked,
    Progress,
    Routing,
    Vote,
)
from layby_domain.formats import format_named

VOTERS_MAX = 50
"""At most this many identities in ``routing.voters`` and in one escalation step's ``to``."""
REQUIRED_MAX = 50
ESCALATION_STEPS_MAX = 10
REMINDERS_MAX = 100
REMIND_EVERY_MIN = 1.0
"""Seconds: the shortest interval between reminders."""
IDENTITY_MAX_CHARS = 256
NOTE_MAX_CHARS = 1000

ALREADY_VOTED = "you have already decided this question; each person decides once"
NOT_A_VOTER = "you are not among the people who decide this question"
HANDED_ON = "you handed this question on to someone else"

Step = Literal["escalated", "reminded"]

_canonical = msgspec.json.Encoder(order="sorted")


def check_routing(
    routing: object, *, answer_format: str, sensitive: bool, timeout_seconds: float | None, to: str
) -> Routing | None:
    """The routing of an ask, checked; raises ``BadInput`` naming the field (``routing.required``,
    ``routing.escalate[1].after``...). The fields are not trusted to have their types (a Struct
    built in code is not checked)."""
    if routing is None:
        return None
    if not isinstance(routing, Routing):
        raise BadInput("routing must be an object", field="routing")
    if to == "caller":
        raise BadInput("routing is for questions to people, not to the calling run", field="routing")
    voters = _identities(routing.voters, "routing.voters")
    required = routing.required
    if isinstance(required, bool) or not isinstance(required, int) or not 1 <= required <= REQUIRED_MAX:
        raise BadInput(
            f"routing.required must be a whole number from 1 to {REQUIRED_MAX}", field="routing.required"
        )
    if not isinstance(routing.veto, bool):
        raise BadInput("routing.veto must be a boolean", field="routing.veto")
    steps = _steps(routing.escalate, timeout_seconds)
    if required > 1:
        fmt = format_named(answer_format)
        if not fmt.answered_at_the_door:
            raise BadInput(
                f"a quorum needs people who each decide; {fmt.name!r} questions are answered by one callback",
                field="routing.required",
            )
        if sensitive:
            raise BadInput(
                "a quorum compares recorded votes, and a sensitive answer is never recorded",
                field="routing.required",
            )
        if voters is not None:
            eligible = set(voters) | {who for step in steps for who in step.to or ()}
            if required > len(eligible):
                raise BadInput(
                    f"routing.required is {required} but only {len(eligible)} people may decide",
                    field="routing.required",
                )
    remind_every = routing.remind_every
    if remind_every is not None:
        if isinstance(remind_every, bool) or not isinstance(remind_every, int | float):
            raise BadInput("routing.remind_every must be a number of seconds", field="routing.remind_every")
        if not math.isfinite(remind_every) or remind_every < REMIND_EVERY_MIN:
            raise BadInput(
                f"routing.remind_every must be at least {REMIND_EVERY_MIN:g} second",
                field="routing.remind_every",
            )
    reminders = routing.reminders
    if isinstance(reminders, bool) or not isinstance(reminders, int) or not 1 <= reminders <= REMINDERS_MAX:
        raise BadInput(
            f"routing.reminders must be a whole number from 1 to {REMINDERS_MAX}", field="routing.reminders"
        )
    return routing


def _identities(value: object, field: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise BadInput(f"{field} must be a non-empty list of identities", field=field)
    if len(value) > VOTERS_MAX:
        raise BadInput(f"{field} holds {len(value)} identities; the limit is {VOTERS_MAX}", field=field)
    seen: set[str] = set()
    for index, who in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(who, str) or not who.strip() or len(who) > IDENTITY_MAX_CHARS or "\x00" in who:
            raise BadInput(
                f"{where} must be a non-blank identity of at most {IDENTITY_MAX_CHARS} characters",
                field=where,
            )
        if who in seen:
            raise BadInput(f"{where} repeats {who!r}", field=where)
        seen.add(who)
    return list(value)


def _steps(value: object, timeout_seconds: float | None) -> list[EscalationStep]:
    if value is None:
        return []
    field = "routing.escalate"
    if not isinstance(value, list) or not value:
        raise BadInput(f"{field} must be a non-empty list of steps", field=field)
    if len(value) > ESCALATION_STEPS_MAX:
        raise BadInput(f"{field} has {len(value)} steps; the limit is {ESCALATION_STEPS_MAX}", field=field)
    previous = 0.0
    for index, step in enumerate(value):
        where = f"{field}[{index}]"
        if not isinstance(step, EscalationStep):
            raise BadInput(f"{where} must be an object", field=where)
        after = step.after
        if isinstance(after, bool) or not isinstance(after, int | float) or not math.isfinite(after):
            raise BadInput(f"{where}.after must be a number of seconds", field=f"{where}.after")
        if after <= previous:
            raise BadInput(
                f"{where}.after must be greater than {previous:g} (the steps come in order)",
                field=f"{where}.after",
            )
        if timeout_seconds is not None and after >= timeout_seconds:
            raise BadInput(
                f"{where}.after is {after:g}s, not before the question's deadline ({timeout_seconds:g}s): "
                "it would never happen",
                field=f"{where}.after",
            )
        previous = float(after)
        _identities(step.to, f"{where}.to")
        if step.channel is not None and (not isinstance(step.channel, str) or not step.channel.strip()):
            raise BadInput(f"{where}.channel must be a channel's name", field=f"{where}.channel")
        if step.recipient is not None:
            if step.channel is None:
                raise BadInput(f"{where}.recipient needs a channel", field=f"{where}.recipient")
            if not isinstance(step.recipient, str) or not step.recipient.strip():
                raise BadInput(f"{where}.recipient must be a non-blank address", field=f"{where}.recipient")
        if step.to is None and step.channel is None:
            raise BadInput(f"{where} must name people (to) or a channel, or both", field=where)
    return list(value)


def clamp_routing(routing: Routing | None, *, asker: str, restricted: bool) -> None:
    """A restricted identity asks only itself (docs/asking.md#audience-clamp): its routing may name
    no one else, as voters or in an escalation."""
    if routing is None or not restricted:
        return
    named = [("routing.voters", routing.voters or [])] + [
        (f"routing.escalate[{i}].to", step.to or []) for i, step in enumerate(routing.escalate or [])
    ]
    for field, people in named:
        if any(who != asker for who in people):
            raise CrossIdentityAudienceError(
                f"identity {asker!r} may address questions only to itself", field=field
            )


def started(asked: InteractionAsked, progress: Progress | None) -> Progress:
    """Where a question stands before its first routing step: offered to its voters."""
    if progress is not None:
        return progress
    voters = asked.routing.voters if asked.routing is not None else None
    return Progress(offered=list(voters or []))


def offered_at_first(asked: InteractionAsked) -> list[str] | None:
    """Who beyond its audience sees a question when it is asked: its voters."""
    voters = asked.routing.voters if asked.routing is not None else None
    return list(voters) if voters else None


def routed(asked: InteractionAsked, progress: Progress | None) -> bool:
    """Whether a question's decisions go through the routing rules (a policy, or a delegation)."""
    return asked.routing is not None or progress is not None


def check_may_decide(
    asked: InteractionAsked, progress: Progress | None, *, by: str, restricted: bool
) -> None:
    """Raise ``Forbidden`` unless ``by`` may decide the question now (docs/routing.md#who-decides):
    not someone who handed it on; one of the voters, escalated-to people or delegates when the
    routing names voters; otherwise, for a restricted identity, its audience or someone it was
    offered to."""
    progress = started(asked, progress)
    if any(d.by == by for d in progress.delegations):
        raise Forbidden(HANDED_ON)
    voters = asked.routing.voters if asked.routing is not None else None
    if voters is not None:
        if by not in voters and by not in progress.offered:
            raise Forbidden(NOT_A_VOTER)
        return
    if restricted and by != asked.audience and by not in progress.offered:
        raise Forbidden(
            NOT_A_VOTER
            if asked.audience is not None
            else "restricted identities may answer only interactions addressed to them"
        )


def may_see(asked_audience: str | None, offered: list[str] | None, identity: str) -> bool:
    """Whether a restricted identity sees a question: its audience, or someone it was offered to."""
    return identity == asked_audience or (offered is not None and identity in offered)


def decides(asked: InteractionAsked, votes: list[Vote]) -> bool:
    """Whether the last of ``votes`` decides the question: a veto (when the routing lets one), or
    the vote that brings ``required`` votes agreeing with it (docs/routing.md#quorum)."""
    routing = asked.routing or Routing()
    fmt = format_named(asked.answer_format)
    last = votes[-1]
    if routing.veto and fmt.vetoes(last.answer):
        return True
    key = _canonical.encode(fmt.agreement(last.answer))
    agreeing = sum(1 for vote in votes if _canonical.encode(fmt.agreement(vote.answer)) == key)
    return agreeing >= routing.required


def add_vote(asked: InteractionAsked, progress: Progress | None, vote: Vote) -> Progress:
    """The votes with ``vote`` added; a second vote by the same person is refused (409)."""
    progress = started(asked, progress)
    if any(v.by == vote.by for v in progress.votes):
        raise Conflict(ALREADY_VOTED, field="answer")
    return msgspec.structs.replace(progress, votes=[*progress.votes, vote])


def add_delegation(
    asked: InteractionAsked, progress: Progress | None, *, by: str, to: Any, note: Any, now: datetime
) -> Progress:
    """``by`` hands the question to ``to`` (docs/routing.md#delegation): refused when ``to`` is no
    identity, is ``by``, or already decides it; or when ``by`` already voted."""
    progress = started(asked, progress)
    if not isinstance(to, str) or not to.strip() or len(to) > IDENTITY_MAX_CHARS or "\x00" in to:
        raise BadInput(
            f"to must be a non-blank identity of at most {IDENTITY_MAX_CHARS} characters", field="to"
        )
    if note is not None and (not isinstance(note, str) or len(note) > NOTE_MAX_CHARS or "\x00" in note):
        raise BadInput(f"note must be a string of at most {NOTE_MAX_CHARS} characters", field="note")
    if to == by:
        raise BadInput("to must be someone else", field="to")
    if any(v.by == by for v in progress.votes):
        raise Conflict("you have already decided this question; a decision is not handed on", field="to")
    if to in progress.offered or to == asked.audience:
        raise Conflict(f"{to!r} already decides this question", field="to")
    delegation = Delegation(by=by, to=to, at=now, note=note or None)
    return msgspec.structs.replace(
        progress, delegations=[*progress.delegations, delegation], offered=[*progress.offered, to]
    )


def due(
    asked: InteractionAsked, progress: Progress | None, now: datetime
) -> tuple[Step, Progress, list[ChannelTarget]] | None:
    """The timed step due at ``now``, if any, with the progress after it and the channels to
    deliver on: the next escalation first (its own channel), then a reminder (every channel the
    question is on, which the caller knows: ``interaction.current_targets``)
    (docs/routing.md#escalation)."""
    routing = asked.routing
    if routing is None:
        return None
    progress = started(asked, progress)
    steps = routing.escalate or []
    if progress.escalated < len(steps):
        step = steps[progress.escalated]
        if now >= asked.created_at + timedelta(seconds=step.after):
            offered = [*progress.offered, *(who for who in step.to or () if who not in progress.offered)]
            after = msgspec.structs.replace(progress, escalated=progress.escalated + 1, offered=offered)
            targets = [ChannelTarget(channel=step.channel, recipient=step.recipient)] if step.channel else []
            return "escalated", after, targets
    reminder = _next_reminder(asked, progress)
    if reminder is not None and now >= reminder:
        after = msgspec.structs.replace(progress, reminded=progress.reminded + 1)
        return "reminded", after, []  # every channel it is on: the caller adds its own
    return None


def _next_reminder(asked: InteractionAsked, progress: Progress) -> datetime | None:
    routing = asked.routing
    if routing is None or routing.remind_every is None or progress.reminded >= routing.reminders:
        return None
    return asked.created_at + timedelta(seconds=routing.remind_every * (progress.reminded + 1))


def next_due_at(asked: InteractionAsked, progress: Progress | None) -> datetime | None:
    """When the next timed step of a pending question is due (None: no more, or not before its
    deadline): what the sweeper waits for."""
    routing = asked.routing
    if routing is None:
        return None
    progress = progress or Progress()
    times: list[datetime] = []
    steps = routing.escalate or []
    if progress.escalated < len(steps):
        times.append(asked.created_at + timedelta(seconds=steps[progress.escalated].after))
    reminder = _next_reminder(asked, progress)
    if reminder is not None:
        times.append(reminder)
    soonest = min(times, default=None)
    return soonest if soonest is not None and soonest < asked.timeout_at else None


def escalated_targets(asked: InteractionAsked, progress: Progress) -> list[ChannelTarget]:
    """The channels the escalation steps taken so far added to the question's own."""
    steps = (asked.routing.escalate or []) if asked.routing is not None else []
    return [
        ChannelTarget(channel=step.channel, recipient=step.recipient)
        for step in steps[: progress.escalated]
        if step.channel is not None
    ]
