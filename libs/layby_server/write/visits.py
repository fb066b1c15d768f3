"""One visit of a door, or of a run's generic tools (docs/caller-asks.md#the-door-contract).

A visit reads the subject's parked entries from the log, runs the door's contract over its input
(or takes the tool's actions as named), and decides with ``layby_domain.doors.plan_visit``:
cancels first, then at most one of resume / take / start. Nothing happens unless the whole plan
holds. Then it records the visit (``VisitRecorded``, before anything it starts or resumes can
report back) and acts, each action a compare-and-set on the log: of two visits resuming or taking
the same entry, one wins and the other is refused with ``Conflict``.

The door service runs hook and conversation visits, the sweeper schedule fires, and the ask
service the generic tools; each holds its own ``Visitor``.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

import msgspec

from layby_contracts.commands import Explicit
from layby_contracts.doors import Column, DoorSpec, Entry, Outcome, Taken, VisitResult
from layby_contracts.errors import BadInput, Conflict, NotFound, Unavailable
from layby_contracts.events import (
    DoorSaved,
    InteractionRemoved,
    InteractionSettled,
    InteractionTaken,
    RunStarted,
    VisitRecorded,
    VisitSettled,
)
from layby_domain.caller import Parked, decide_resume, decide_take
from layby_domain.doors import VisitPlan, plan_visit
from layby_domain.validation import is_subject
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog, as_event, decide_and_append, kept_changing
from layby_server.write.chains import kill_chain
from layby_server.write.parked import Entries, settle_visit

log = get_logger("layby.visits")
VisitKind = Literal["hook", "schedule", "conversation", "tool"]
TOOL_SPEC = DoorSpec(kind="hook", target="tools", start_expr="null")
"""The generic tools act only by naming entries: never a start."""


class Programs(Protocol):
    """Runs a door's jq programs (``layby_server.write.jqrun.JqRunner``)."""

    async def run(
        self, programs: Mapping[Column, str], input: Any, parked: list[dict[str, Any]]
    ) -> dict[Column, list[Any]]: ...


def door_subject(name: str, spec: DoorSpec) -> str:
    """The subject a hook or a schedule drives."""
    return spec.subject or f"door:{name}"


def programs_of(spec: DoorSpec) -> dict[Column, str]:
    found: dict[Column, str | None] = {
        "cancel": spec.cancel_expr,
        "resume": spec.resume_expr,
        "start": spec.start_expr,
        "extras": spec.extras_expr,
    }
    return {column: program for column, program in found.items() if program is not None}


@dataclass(frozen=True, slots=True)
class _Header:
    """What every record of one visit says, whatever it then did."""

    visit_id: str
    door: str | None
    kind: VisitKind
    subject: str
    by: str
    channel: str | None
    chat: str | None

    def recorded(self, visited_at: datetime, **did: Any) -> VisitRecorded:
        return VisitRecorded(
            visit_id=self.visit_id,
            door=self.door,
            kind=self.kind,
            subject=self.subject,
            by=self.by,
            visited_at=visited_at,
            channel=self.channel,
            chat=self.chat,
            **did,
        )


class Visitor:
    def __init__(
        self,
        store: EventLog,
        entries: Entries,
        now: Callable[[], datetime],
        *,
        programs: Programs | None = None,
        extras_of: Callable[[str], Awaitable[set[str]]] | None = None,
        started: Callable[[str], Awaitable[RunStarted | None]] | None = None,
    ) -> None:
        self._store = store
        self._entries = entries
        self._now = now
        self._programs = programs
        self._extras_of = extras_of
        self._started = started or self._read_started

    async def _read_started(self, run_id: str) -> RunStarted | None:
        first = await self._store.first(self._store.names.run(run_id))
        return first.event if first is not None and isinstance(first.event, RunStarted) else None

    async def entries(self, subject: str) -> list[Entry]:
        return await self._entries.entries(subject)

    async def door(self, name: str) -> DoorSaved | None:
        """A door's definition as its log says now (None: unknown or deleted)."""
        last = await self._store.last(self._store.names.door(name), leader=True)
        return last.event if last is not None and isinstance(last.event, DoorSaved) else None

    async def visit(
        self,
        *,
        visit_id: str,
        kind: VisitKind,
        by: Principal,
        door: DoorSaved | None = None,
        subject: str | None = None,
        input: Any = None,
        explicit: Explicit | None = None,
        label: str | None = None,
        fresh: bool = False,
        via: tuple[str, str] | None = None,
    ) -> VisitResult:
        """Decide and act, as ``by`` (``label``: who the log says visited, default ``by``'s
        identity; ``via``: the chat channel and chat a conversation's message came from, where
        its replies go). A visit id seen before is answered with what that visit did (``fresh``:
        the caller just drew the id, so there is nothing to look up)."""
        if not fresh:
            earlier = await self.status(visit_id)
            if earlier is not None:
                return earlier
        spec = door.spec if door is not None else TOOL_SPEC
        where = self._subject_of(door, subject)
        channel, chat = via if via is not None else (None, None)
        header = _Header(
            visit_id=visit_id,
            door=door.name if door is not None else None,
            kind=kind,
            subject=where,
            by=label or by.identity,
            channel=channel,
            chat=chat,
        )
        parked = await self._entries.on_subject(where)
        plan = await self._plan_or_refuse(
            header, door=door, spec=spec, parked=parked, input=input, explicit=explicit
        )
        run_id = str(uuid.uuid4()) if plan.start is not None and door is not None else None
        by_id = {p.asked.interaction_id: p for p in parked}
        for ix in plan.cancels:  # cancels always run first
            await self._cancel(by_id[ix], by)
        taken = [await self._take(t.id, header.by, visit_id) for t in plan.takes]
        # Recorded before anything it resumes or starts can report its outcome back to it.
        recorded = header.recorded(
            self._now(),
            cancelled=plan.cancels,
            action=_action(plan, run_id),
            resumed=[r.id for r in plan.resumes],
            taken=taken,
            run_id=run_id,
        )
        try:
            await self._store.append(
                self._store.names.visit(visit_id), recorded, msg_id=f"visit-{visit_id}", expected_seq=0
            )
        except Conflict:
            again = await self.status(visit_id)
            if again is None:
                raise
            return again
        for r in plan.resumes:
            await self._resume(r.id, r.payload, header.by, visit_id, seed=by_id[r.id])
        if run_id is not None and door is not None and plan.start is not None:
            await self._start(
                door, run_id, subject=where, kwargs=plan.start, extras=plan.extras, visit_id=visit_id
            )
        outcome = await self._settle_taken(visit_id, taken)
        log.info(
            "visit.done",
            visit_id=visit_id,
            kind=kind,
            subject=where,
            action=recorded.action,
            cancelled=len(plan.cancels),
        )
        return VisitResult(
            visit_id=visit_id,
            door=recorded.door,
            subject=where,
            cancelled=plan.cancels,
            action=recorded.action,
            resumed=recorded.resumed,
            taken=taken,
            run_id=run_id,
            outcome=outcome,
        )

    async def _plan_or_refuse(
        self,
        header: _Header,
        *,
        door: DoorSaved | None,
        spec: DoorSpec,
        parked: list[Parked],
        input: Any,
        explicit: Explicit | None,
    ) -> VisitPlan:
        """The visit's plan; a plan refused as bad input is recorded as the visit's error first."""
        shown = [e for p in parked if (e := p.entry) is not None]
        try:
            plan = await self._plan(spec, shown, input, explicit)
            if plan.start is not None and door is not None:
                await self._check_extras(spec, plan.extras)
        except BadInput as exc:
            await self._refused(header.recorded(self._now(), error=str(exc)[:1000]))
            raise
        return plan

    async def _settle_taken(self, visit_id: str, taken: list[Taken]) -> Outcome | None:
        """A visit that took waiting outcomes is settled at once with the first of them."""
        if not taken:
            return None
        first = taken[0]
        outcome = Outcome(status=first.status, result=first.result, error=first.error)
        await settle_visit(self._entries, visit_id, outcome)
        return outcome

    def _subject_of(self, door: DoorSaved | None, subject: str | None) -> str:
        if door is None or door.spec.kind == "conversation":
            if subject is None or not is_subject(subject):
                raise BadInput("subject must be 1-128 of [A-Za-z0-9_:@-]", field="subject")
            return subject
        return door_subject(door.name, door.spec)

    async def _plan(
        self, spec: DoorSpec, entries: list[Entry], input: Any, explicit: Explicit | None
    ) -> VisitPlan:
        if explicit is not None:
            results: dict[Column, list[Any]] = {"start": [None]}
            if explicit.cancels:
                results["cancel"] = [list(explicit.cancels)]
            items: list[Any] = [*explicit.resumes, *explicit.takes]
            if items:
                results["resume"] = [items]
            return plan_visit(results, parked=entries, spec=spec)
        programs = programs_of(spec)
        if programs and self._programs is None:
            raise Unavailable("this service cannot run door programs")
        ran: dict[Column, list[Any]] = {}
        if programs:
            assert self._programs is not None
            parked = [msgspec.to_builtins(e) for e in entries]
            ran = await self._programs.run(programs, input, parked)
        return plan_visit(ran, parked=entries, spec=spec)

    async def _check_extras(self, spec: DoorSpec, extras: dict[str, Any] | None) -> None:
        """A target reads only the extras keys it declared: any other is refused before the run
        starts (docs/caller-asks.md#extras)."""
        if not extras:
            return
        declared = await self._extras_of(spec.target) if self._extras_of is not None else set()
        for key in extras:
            if key not in declared:
                listing = ", ".join(sorted(declared)) or "none"
                raise BadInput(
                    f"extras_expr yielded the key {key[:64]!r}, which flow {spec.target} does not declare "
                    f"(it declares: {listing}); nothing was started",
                    field="extras_expr",
                )

    async def _cancel(self, parked: Parked, by: Principal) -> None:
        """A whole-chain kill of the entry's run and every run above it; a waiting outcome is
        removed from the subject."""
        asked = parked.asked
        if asked.run_id is not None:
            await kill_chain(self._store, self._started, asked.run_id, by, self._now)
        await self._remove_outcome(asked.interaction_id)
        if asked.subject is not None:
            await self._entries.remove(asked.subject, asked.interaction_id)

    async def _remove_outcome(self, ix: str) -> None:
        def decide(parked: Parked) -> InteractionRemoved | None:
            if not isinstance(parked.last, InteractionSettled) or parked.last.outcome == "parked":
                return None
            return InteractionRemoved(
                interaction_id=ix,
                group_id=parked.asked.group_id,
                reason="cancelled",
                removed_at=self._now(),
                run_id=parked.asked.run_id,
                to="caller",
            )

        await decide_and_append(
            self._store,
            self._store.names.ix(ix),
            read=lambda _leader: self._entry(ix),
            decide=decide,
            event_of=as_event,
            msg_id=lambda _: f"removed-{ix}-{uuid.uuid4().hex}",
        )

    async def _resume(
        self, ix: str, payload: Any, by: str, visit_id: str, *, seed: Parked | None = None
    ) -> None:
        done = await decide_and_append(
            self._store,
            self._store.names.ix(ix),
            read=lambda _leader: self._entry(ix),
            decide=lambda p: decide_resume(p, ix, payload=payload, by=by, visit=visit_id, now=self._now()),
            event_of=as_event,
            msg_id=lambda _: f"resumed-{ix}-{visit_id}",
            seed=seed,
            trusted=False,  # read a moment ago: a refusal is decided again on the log
        )
        if done.lost:
            raise kept_changing(f"entry {ix}")

    async def _take(self, ix: str, by: str, visit_id: str) -> Taken:
        settled: list[InteractionSettled] = []

        def decide(parked: Parked) -> InteractionTaken:
            taken = decide_take(parked, ix, by=by, visit=visit_id, now=self._now())
            assert isinstance(parked.last, InteractionSettled)
            settled[:] = [parked.last]
            return taken

        done = await decide_and_append(
            self._store,
            self._store.names.ix(ix),
            read=lambda _leader: self._entry(ix),
            decide=decide,
            event_of=as_event,
            msg_id=lambda _: f"taken-{ix}-{visit_id}",
        )
        if done.lost or not settled:
            raise kept_changing(f"entry {ix}")
        outcome = settled[0]
        status: Literal["finished", "failed"] = "failed" if outcome.outcome == "failed" else "finished"
        return Taken(id=ix, status=status, result=outcome.result, error=outcome.error)

    async def _start(
        self,
        door: DoorSaved,
        run_id: str,
        *,
        subject: str,
        kwargs: dict[str, Any],
        extras: dict[str, Any] | None,
        visit_id: str,
    ) -> None:
        """Start the door's target under the identity that saved the door."""
        event = RunStarted(
            run_id=run_id,
            flow=door.spec.target,
            identity=door.by,
            role="operator",
            input=kwargs,
            started_at=self._now(),
            subject=subject,
            chain=[door.spec.target],
            door=door.name,
            visits=[visit_id],
            extras=extras,
        )
        await self._store.append(
            self._store.names.run(run_id), event, msg_id=f"started-{run_id}", expected_seq=0
        )

    async def _refused(self, refused: VisitRecorded) -> None:
        """A refused visit is recorded with its error (loudly, never a silent default); it did
        nothing."""
        visit_id = refused.visit_id
        try:
            await self._store.append(
                self._store.names.visit(visit_id), refused, msg_id=f"visit-{visit_id}", expected_seq=0
            )
        except (Conflict, Unavailable):
            log.warning("visit.refusal_not_recorded", visit_id=visit_id)
        error = (refused.error or "")[:300]
        log.warning(
            "visit.refused", visit_id=visit_id, kind=refused.kind, subject=refused.subject, error=error
        )

    async def _entry(self, ix: str) -> Parked:
        """An entry as its log says now (every action on one is decided on this read)."""
        found = await self._entries.read(ix)
        if found is None:
            raise NotFound(f"entry {ix} is not parked on this subject")
        return found

    async def _settled(self, visit_id: str) -> Outcome | None:
        last = await self._store.last(self._store.names.visit(visit_id), leader=True)
        return last.event.outcome if last is not None and isinstance(last.event, VisitSettled) else None

    async def status(self, visit_id: str) -> VisitResult | None:
        """What a visit did, and its outcome once known (None: no such visit)."""
        first = await self._store.first(self._store.names.visit(visit_id))
        if first is None or not isinstance(first.event, VisitRecorded):
            return None
        rec = first.event
        outcome = await self._settled(visit_id)
        return VisitResult(
            visit_id=rec.visit_id,
            door=rec.door,
            subject=rec.subject,
            cancelled=rec.cancelled,
            action=rec.action,
            resumed=rec.resumed,
            taken=rec.taken,
            run_id=rec.run_id,
            outcome=outcome,
            error=rec.error,
        )


def _action(plan: VisitPlan, run_id: str | None) -> Literal["resume", "take", "start", "none"]:
    if plan.resumes:
        return "resume"
    if plan.takes:
        return "take"
    if run_id is not None:
        return "start"
    return "none"
