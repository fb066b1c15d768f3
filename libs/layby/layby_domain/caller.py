"""Caller asks and their parked entries, decided without I/O (docs/caller-asks.md).

A caller ask is an interaction with ``to="caller"``: it parks the asking run on its chain's
subject instead of asking a person. Its *entry* on that subject is read from two events of the
interaction's own log — the ``InteractionAsked`` (what was asked) and the last event (where it
stands):

- asked, nothing since: ``asking``;
- answered (a visit resumed it with a payload): ``running``, until the resumed chain's next
  outcome settles it;
- settled ``finished``/``failed``: a *waiting outcome*, until it is taken or dropped;
- settled ``parked``, taken, removed (cancelled, killed at its deadline, dropped): gone.

Every change is appended expecting the entry's last sequence, so two visits racing for the same
entry are decided by the log: one resumes (or takes) it, the other is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from layby_contracts.doors import Entry, Outcome
from layby_contracts.errors import BadInput, Conflict, NotFound
from layby_contracts.events import (
    EXPIRY_ANSWER,
    EXPIRY_ANSWERER,
    Event,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionSettled,
    InteractionTaken,
)

NOT_PARKED = "is not parked on this subject"


@dataclass(frozen=True, slots=True)
class Parked:
    """One caller ask as far as its log was read: ``seq`` is its last event's sequence."""

    asked: InteractionAsked
    last: Event
    seq: int

    @property
    def entry(self) -> Entry | None:
        return entry_of(self.asked, self.last)


def entry_of(asked: InteractionAsked, last: Event) -> Entry | None:
    """The entry ``$parked`` shows, or None once it left the subject. Optional fields that are
    not set are absent (msgspec omits the defaults), never null."""
    ix = asked.interaction_id
    match last:
        case InteractionAsked():
            return Entry(
                id=ix,
                status="asking",
                to="caller",
                asked_by=list(asked.chain or []),
                question=asked.question,
                answer_format=asked.answer_format,
                group_id=asked.group_id,
                payload=asked.payload,
            )
        case InteractionAnswered():
            return Entry(id=ix, status="running")
        case InteractionSettled(outcome="finished" | "failed"):
            return Entry(id=ix, status="finished" if last.outcome == "finished" else "failed")
        case _:
            return None


def is_caller(event: object) -> bool:
    return isinstance(event, InteractionAsked) and event.to == "caller"


def decide_resume(
    parked: Parked | None, ix: str, *, payload: Any, by: str, visit: str, now: datetime
) -> InteractionAnswered:
    """A visit resumes an asking entry: the payload is its answer, and the visit waits for the
    resumed chain's next outcome. Raises when the entry is not asking any more."""
    entry = _entry(parked, ix)
    assert parked is not None
    if entry.status != "asking":
        raise Conflict(f"entry {ix} is {entry.status}; only an asking entry can be resumed")
    return _answered(parked.asked, by=by, now=now, answer=payload, via="caller", visit=visit)


def decide_take(
    parked: Parked | None, ix: str, *, by: str, visit: str | None, now: datetime
) -> InteractionTaken:
    """A subject's owner takes a waiting outcome. Raises when there is none to take."""
    entry = _entry(parked, ix)
    assert parked is not None
    if entry.status not in ("finished", "failed"):
        raise Conflict(
            f"entry {ix} is {entry.status}; only a finished or failed waiting outcome can be taken"
        )
    return InteractionTaken(
        interaction_id=ix, group_id=parked.asked.group_id, by=by, visit=visit, taken_at=now
    )


def taken_outcome(parked: Parked) -> InteractionSettled:
    """The waiting outcome a take returns (the entry's last event before the take)."""
    if not isinstance(parked.last, InteractionSettled):
        raise Conflict(f"entry {parked.asked.interaction_id} holds no waiting outcome")
    return parked.last


def decide_settle(
    parked: Parked, *, visit: str, outcome: Outcome, now: datetime
) -> InteractionSettled | None:
    """The chain a visit resumed reached its next outcome: an entry that visit resumed (and that
    is still running) settles with it. None: not this visit's resume, or settled already."""
    last = parked.last
    if not isinstance(last, InteractionAnswered) or last.visit != visit:
        return None
    asked = parked.asked
    return InteractionSettled(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        outcome=outcome.status,
        result=outcome.result if outcome.status == "finished" else None,
        error=outcome.error if outcome.status == "failed" else None,
        run_id=outcome.run_id,
        subject=asked.subject,
        visit=visit,
        settled_at=now,
    )


def decide_deadline(parked: Parked, *, now: datetime) -> InteractionAnswered | InteractionRemoved | None:
    """A caller ask's ``expiry_at`` passed while it was still asking (docs/caller-asks.md#expiry):
    ``on_expiry="resume"`` resumes its run with the reserved expiry marker; ``kill`` (the
    default) removes it, and the resume service then tears its whole chain down. None: it is
    not asking any more (a visit won the race), or not due."""
    asked = parked.asked
    if not isinstance(parked.last, InteractionAsked):
        return None
    if asked.expiry_at is None or asked.expiry_at > now:
        return None
    if asked.on_expiry == "resume":
        return _answered(asked, by=EXPIRY_ANSWERER, now=now, answer=EXPIRY_ANSWER, via="expiry")
    return _removed(asked, reason="timeout", now=now)


def decide_drop(parked: Parked, *, now: datetime, retention: timedelta) -> InteractionRemoved | None:
    """A waiting outcome nobody took within the retention horizon is dropped, by an event the
    platform publishes (never silently). None: not a waiting outcome, or not due yet."""
    last = parked.last
    if not isinstance(last, InteractionSettled) or last.outcome == "parked":
        return None
    if last.settled_at + retention > now:
        return None
    detail = f"a {last.outcome} outcome nobody took within {int(retention.total_seconds())} s"
    return _removed(parked.asked, reason="dropped", now=now, detail=detail)


def _answered(
    asked: InteractionAsked, *, by: str, now: datetime, answer: Any, via: str, visit: str | None = None
) -> InteractionAnswered:
    """A caller ask's answer: it goes back to the caller (``to="caller"``), never to an inbox."""
    return InteractionAnswered(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        answered_by=by,
        answered_at=now,
        answer=answer,
        run_id=asked.run_id,
        via=via,
        to="caller",
        visit=visit,
    )


def _removed(
    asked: InteractionAsked,
    *,
    reason: Literal["timeout", "dropped"],
    now: datetime,
    detail: str | None = None,
) -> InteractionRemoved:
    """A caller ask's removal (``to="caller"``)."""
    return InteractionRemoved(
        interaction_id=asked.interaction_id,
        group_id=asked.group_id,
        reason=reason,
        removed_at=now,
        run_id=asked.run_id,
        detail=detail,
        to="caller",
    )


def is_gone(event: Event) -> bool:
    """Whether an entry's last event takes it off its subject."""
    return isinstance(event, InteractionTaken | InteractionRemoved) or (
        isinstance(event, InteractionSettled) and event.outcome == "parked"
    )


def _entry(parked: Parked | None, ix: str) -> Entry:
    if parked is None:
        raise NotFound(f"entry {ix} {NOT_PARKED}")
    entry = parked.entry
    if entry is None:
        raise NotFound(f"entry {ix} {NOT_PARKED}")
    return entry


def check_payload_allowed(to: str, payload: Any) -> None:
    """``payload`` rides caller asks only."""
    if to != "caller" and payload is not None:
        raise BadInput("payload is only for to='caller' asks", field="payload")
