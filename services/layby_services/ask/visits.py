"""The generic tools' commands: a run lists, resumes, takes and cancels the entries parked on its
own subject (docs/caller-asks.md#the-generic-tools), with the same visitor and rules as a door."""

from __future__ import annotations

from layby_contracts.commands import Listed, ListParked, Visit, Visited, VisitStatus
from layby_contracts.errors import BadInput, Forbidden, NotFound, Unauthorized
from layby_contracts.events import RunStarted
from layby_domain.clock import Clock
from layby_domain.validation import is_interaction_id, is_subject
from layby_server.auth import Authenticator, Principal
from layby_server.store.eventstore import EventStore
from layby_server.write.parked import Entries
from layby_server.write.visits import Visitor
from layby_services.ask.runs import RunHandlers

NOT_FOUND = "visit not found"


class ToolVisits:
    def __init__(
        self, store: EventStore, auth: Authenticator, clock: Clock, runs: RunHandlers, entries: Entries
    ) -> None:
        self._auth = auth
        self._runs = runs
        self._entries = entries
        self.visitor = Visitor(store, entries, clock.now, started=runs.started)

    def _principal(self, token: str) -> Principal:
        try:
            return self._auth.principal(token)
        except Unauthorized as exc:
            raise Unauthorized(str(exc), field="token") from None

    async def _run(self, principal: Principal, run_id: str | None) -> RunStarted:
        if not is_interaction_id(run_id):
            raise BadInput("run_id must be a uuid4 string", field="run_id")
        assert run_id is not None
        started = await self._runs.started(run_id)
        if started is None or not self._runs.may_act(principal, started):
            raise NotFound(f"run {run_id} not found")
        return started

    async def visit(self, cmd: Visit) -> Visited:
        principal = self._principal(cmd.token)
        if not is_interaction_id(cmd.visit_id):
            raise BadInput("visit_id must be a uuid4 string", field="visit_id")
        if cmd.explicit is None or cmd.door is not None:
            raise BadInput(
                "the ask service takes the generic tools' visits: run_id and explicit", field="explicit"
            )
        started = await self._run(principal, cmd.run_id)
        result = await self.visitor.visit(
            visit_id=cmd.visit_id,
            kind="tool",
            by=Principal(identity=started.identity, role=started.role),
            subject=started.subject or started.run_id,
            explicit=cmd.explicit,
            label=f"run:{started.run_id}",
        )
        return Visited(result=result)

    async def list(self, cmd: ListParked) -> Listed:
        principal = self._principal(cmd.token)
        if cmd.run_id is not None:
            started = await self._run(principal, cmd.run_id)
            subject = started.subject or started.run_id
        else:
            if not is_subject(cmd.subject):
                raise BadInput("subject must be 1-128 of [A-Za-z0-9_:@-]", field="subject")
            if principal.restricted:
                raise Forbidden("only an operator may list a subject by name; a run lists its own")
            assert cmd.subject is not None
            subject = cmd.subject
        return Listed(subject=subject, entries=await self._entries.entries(subject))

    async def status(self, cmd: VisitStatus) -> Visited:
        self._principal(cmd.token)
        if not is_interaction_id(cmd.visit_id):
            raise NotFound(NOT_FOUND)
        result = await self.visitor.status(cmd.visit_id)
        if result is None:
            raise NotFound(NOT_FOUND)
        return Visited(result=result)
