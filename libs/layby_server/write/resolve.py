"""Resolving an interaction: read, decide, compare-and-set, and on a lost race read again.

Every door and service that answers, expires or removes a question goes through ``resolve``
with one of the pure decisions of ``layby_domain.interaction``. The append expects the sequence
of the state the decision was taken on, so two resolutions racing each other are decided by the
log: the loser's append fails, it reads the winner from the stream leader, and decides again on
that (docs/aggregates/interaction.md#first-resolution-wins).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import msgspec

from layby_contracts.events import (
    EXPIRY_ANSWERER,
    Event,
    InteractionAnswered,
    InteractionAsked,
    InteractionEvent,
    InteractionRemoved,
    InteractionRouted,
)
from layby_contracts.subjects import Names
from layby_domain.interaction import Append, Decision, Interaction, Keep, evolve
from layby_server.store.eventlog import ATTEMPTS, StoredEvent, decide_and_append

_enc = msgspec.json.Encoder()


class InteractionLog(Protocol):
    """The part of ``EventLog`` resolving needs (the stores and a test's stand-in honour it)."""

    names: Names

    async def last(self, subject: str, *, leader: bool = False) -> StoredEvent | None: ...

    async def first(self, subject: str) -> StoredEvent | None: ...

    async def append(self, subject: str, event: Event, *, msg_id: str, expected_seq: int | None) -> int: ...

    async def put_secret(self, interaction_id: str, ref: str, payload: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class Resolved:
    """How a resolve ended. ``appended`` is the event this call recorded (None when the decision
    was to keep the state, or when every attempt lost its race); ``state`` is the state the last
    decision was taken on."""

    state: Interaction
    appended: InteractionEvent | None = None
    seq: int | None = None
    lost: bool = False

    @property
    def kept(self) -> str | None:
        return None if self.appended is not None or self.lost else self.state.status


def state_of(stored: StoredEvent | None) -> Interaction:
    """The state known from one read of a subject's last event."""
    if stored is None:
        return Interaction()
    event = stored.event
    if isinstance(event, InteractionAsked | InteractionAnswered | InteractionRemoved | InteractionRouted):
        return evolve(Interaction(), event, stored.seq)
    return Interaction(seq=stored.seq)  # not an interaction's subject: nothing to resolve


async def read_state(log: InteractionLog, subject: str, *, leader: bool = False) -> Interaction:
    """The state of the interaction on ``subject``: its last event, and when that is a routing
    step (docs/routing.md), the asked event it stands on (the first on the subject)."""
    return await complete(log, subject, await log.last(subject, leader=leader))


async def complete(
    log: InteractionLog, subject: str, last: StoredEvent | None, *, known: Interaction | None = None
) -> Interaction:
    """The state from a subject's last event, with the asked event read when the last is a routing
    step (which carries where the question stands, not the question) — unless ``known``, a state
    read before, already holds that asked event."""
    state = state_of(last)
    if last is not None and isinstance(last.event, InteractionRouted):
        routed = last.event
        if known is not None and known.asked is not None and known.asked_seq == routed.asked_seq:
            return evolve(evolve(Interaction(), known.asked, known.asked_seq), routed, last.seq)
        first = await log.first(subject)
        if first is not None and isinstance(first.event, InteractionAsked):
            state = evolve(evolve(Interaction(), first.event, first.seq), routed, last.seq)
    return state


def cached_state(asked: StoredEvent, routed: StoredEvent | None) -> Interaction:
    """The state a cache holds without a read: an asked event and, for a routed question, the
    latest routing step seen after it (a stale one only costs a failed append)."""
    state = state_of(asked)
    if routed is not None and isinstance(routed.event, InteractionRouted) and routed.seq > asked.seq:
        state = evolve(state, routed.event, routed.seq)
    return state


def _msg_id(event: Event) -> str:
    assert isinstance(event, InteractionAsked | InteractionAnswered | InteractionRemoved | InteractionRouted)
    if isinstance(event, InteractionAnswered):
        kind = "expired" if event.answered_by == EXPIRY_ANSWERER else "answered"
    elif isinstance(event, InteractionRemoved):
        kind = "removed"
    elif isinstance(event, InteractionRouted):
        kind = event.step
    else:
        kind = "asked"
    # A fresh id per attempt: a retry after a lost race is a new decision, never a duplicate.
    return f"{kind}-{event.interaction_id}-{uuid.uuid4().hex}"


async def resolve(
    log: InteractionLog,
    interaction_id: str,
    decide: Callable[[Interaction], Decision],
    *,
    seed: Interaction | None = None,
    trusted: bool = True,
    retry: bool = True,
    attempts: int = ATTEMPTS,
) -> Resolved:
    """Decide on the interaction's state and append the decision with that state's sequence
    expected; after a lost race, read the leader and decide again (``retry=False``: report the
    loss instead, for sweeps whose next pass will look again).

    ``seed`` is a state already at hand (a read model row, a cache, a read just made). A seed
    that is not ``trusted`` (a cache) may be stale: a refusal decided on it is decided again on
    the log before it is raised. ``decide`` raises a refusal (a ``LaybyError``) or returns
    ``Append``/``Keep``.
    """
    subject = log.names.ix(interaction_id)

    known = seed

    async def read(leader: bool) -> Interaction:
        # A routed question's asked event never changes: once known, a re-read needs only the last.
        nonlocal known
        known = await complete(log, subject, await log.last(subject, leader=leader), known=known)
        return known

    def appending(state: Interaction) -> Append | None:
        decision = decide(state)
        return None if isinstance(decision, Keep) else decision

    async def event_of(decision: Append) -> Event:
        return await _with_secret(log, decision)

    outcome = await decide_and_append(
        log,
        subject,
        read=read,
        decide=appending,
        event_of=event_of,
        msg_id=_msg_id,
        seed=seed,
        trusted=trusted,
        retry=retry,
        attempts=attempts,
    )
    appended = outcome.event
    assert appended is None or isinstance(
        appended, InteractionAsked | InteractionAnswered | InteractionRemoved | InteractionRouted
    )
    return Resolved(outcome.state, appended, outcome.seq, outcome.lost)


async def _with_secret(log: InteractionLog, decision: Append) -> InteractionEvent:
    """File a sensitive answer's value under a fresh reference, and point the event at it."""
    event = decision.event
    if decision.secret is None or not isinstance(event, InteractionAnswered):
        return event
    ref = uuid.uuid4().hex
    await log.put_secret(event.interaction_id, ref, _enc.encode(decision.secret))
    return msgspec.structs.replace(event, secret_ref=ref)
