"""Exactly-once resume of parked runs (docs/aggregates/run.md#resumed-exactly-once,
docs/aggregates/run.md#one-park-several-questions).

A park resumes once, when the last of its questions resolves. Whatever event triggers an
evaluation (the park itself, or any of its questions resolving, in any order, redelivered any
number of times, on any replica), the same steps run:

1. Read the run's last event from the leader. Only a ``RunParked`` is waiting for a resume.
2. Read every parked question's last event. If any is still pending, stop: its own
   resolution will trigger the evaluation again.
3. Record ``RunResumed`` (with every answer) on the run's subject, expecting the park's
   sequence: the log holds one resume per park, and a replica that loses this race stops.
4. Publish the continuation on ``<ns>.cont.<flow>.<run>.<generation>`` with the resume id as
   ``Nats-Msg-Id`` and the expected last subject sequence 0: a second publish of the same
   resume, however late, is absorbed.

A crash between 3 and 4 leaves the trigger unacknowledged; its redelivery finds
``RunResumed`` last and publishes (idempotently) from it. Workers check the run's log too
(``layby.worker``), so a continuation runs only while its resume is the run's last event.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

import msgspec

from layby import faults
from layby_contracts import events
from layby_contracts.commands import Continuation
from layby_contracts.errors import Conflict
from layby_domain.clock import Clock
from layby_domain.run import Run, decide_resume, resolution, resume_id_of
from layby_server.observability.logs import get_logger
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.chains import call_resolution
from layby_server.write.parked import Entries, caller_entries
from layby_server.write.runops import close_steps, remove_open_asks
from layby_services.resume.chains import Chains

log = get_logger("layby.resume")
_enc = msgspec.json.Encoder()
STARTED_CACHE = 50_000


class Resumer:
    def __init__(self, store: EventStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._started: OrderedDict[str, events.RunStarted] = OrderedDict()
        self.entries = Entries(store, clock.now)
        self.chains = Chains(store, self.entries, self.started, self.evaluate, clock.now)

    async def on_event(self, stored: Stored) -> None:
        ev = stored.event
        match ev:
            case events.RunStarted():
                self._remember(ev)
                await self.start(ev)
            case events.RunParked():
                await self.evaluate(ev.run_id)
                await self.chains.on_run_event(ev)
            case events.RunCancelled():
                # Repeats the canceller's removals and closing, should it have stopped half-way
                # (both idempotent).
                await remove_open_asks(self._store, ev, self._clock.now)
                await close_steps(self._store, ev, self._clock.now)
                await self.chains.on_run_event(ev)
            case events.RunFinished() | events.RunFailed():
                await self.chains.on_run_event(ev)
            case events.RunResumed() if ev.retried_by is not None or ev.moved is not None:
                # A person retried a failed run, or moved a waiting one to another version: the ask
                # service decided it; publish its continuation (docs/versions.md#moving-runs).
                await self.evaluate(ev.run_id)
            case events.InteractionAnswered() | events.InteractionRemoved() if ev.run_id:
                # A resolution is its question's last event: no need to read it back.
                await self.evaluate(ev.run_id, known={ev.interaction_id: stored})
                await self.chains.on_entry_event(ev)
            case events.InteractionAsked() | events.InteractionSettled() | events.InteractionTaken():
                await self.chains.on_entry_event(ev)

    async def start(self, ev: events.RunStarted) -> None:
        """Generation 0: the first execution is a continuation like every other.

        A redelivered start publishes nothing new (the continuation's subject is taken), and a
        worker executes generation 0 only while ``run.started`` is the run's last event.
        """
        cont = Continuation(
            run_id=ev.run_id,
            flow=ev.flow,
            generation=0,
            resume_id=resume_id_of(ev.run_id, 0),
            identity=ev.identity,
            input=ev.input,
            subject=ev.subject or ev.run_id,
            extras=ev.extras,
            version=ev.version,
        )
        await self._publish(cont)

    async def evaluate(self, run_id: str, *, known: dict[str, Stored] | None = None) -> None:
        subject = self._store.names.run(run_id)
        last = await self._store.last(subject, leader=True)
        if last is None:
            return
        if isinstance(last.event, events.RunResumed):
            # Decided earlier; the publish may not have happened (a crash): it is idempotent.
            moved_seq = last.seq if last.event.moved is not None else None
            await self._continue(run_id, last.event, moved_seq=moved_seq)
            return
        if not isinstance(last.event, events.RunParked):
            return  # not parked (yet, or any more): nothing to resume
        park = last.event
        known = known or {}
        reads = await asyncio.gather(*(self._read_item(a, known.get(a.interaction_id)) for a in park.asks))
        resolved = [await self._resolved(ask, read) for ask, read in zip(park.asks, reads, strict=True)]
        visits = [
            read.event.visit
            for read in reads
            if read is not None and isinstance(read.event, events.InteractionAnswered) and read.event.visit
        ]
        resume_id = resume_id_of(run_id, park.generation)
        resumed = decide_resume(
            Run(seq=last.seq, last=park), resolved, now=self._clock.now(), resume_id=resume_id, visits=visits
        )
        if resumed is None:
            return  # a question is still pending: its own resolution triggers the next evaluation
        try:
            await self._store.append(subject, resumed, msg_id=f"resumed-{resume_id}", expected_seq=last.seq)
        except Conflict:
            return  # another replica decided this resume first; it publishes the continuation
        log.info("run.resumed", run_id=run_id, generation=park.generation, resume_id=resume_id)
        faults.hit("resume.after_claim")
        await self._continue(run_id, resumed)
        faults.hit("resume.after_publish")

    async def _read_item(self, ask: events.ParkedAsk, known: Stored | None) -> Stored | None:
        """A parked question's last event, or (a ``layby.call``) its child run's."""
        if known is not None:
            return known
        if ask.kind == "call":
            return await self._store.last(self._store.names.run(ask.interaction_id), leader=True)
        return await self._store.last(self._store.names.ix(ask.interaction_id), leader=True)

    async def _resolved(self, ask: events.ParkedAsk, read: Stored | None) -> events.Resolution | None:
        event = read.event if read is not None else None
        if ask.kind == "call":
            asks = await caller_entries(self.entries, event) if isinstance(event, events.RunParked) else []
            return call_resolution(ask, event, asks)
        if (
            isinstance(event, events.InteractionRemoved)
            and event.to == "caller"
            and event.reason == "timeout"
        ):
            return None  # on_expiry="kill": the chain is torn down, never resumed
        return resolution(ask, event)

    async def started(self, run_id: str) -> events.RunStarted | None:
        found = self._started.get(run_id)
        if found is not None:
            return found
        first = await self._store.first(self._store.names.run(run_id))
        if first is None or not isinstance(first.event, events.RunStarted):
            return None
        self._remember(first.event)
        return first.event

    def _remember(self, started: events.RunStarted) -> None:
        self._started[started.run_id] = started
        if len(self._started) > STARTED_CACHE:
            self._started.popitem(last=False)

    async def _continue(
        self, run_id: str, resumed: events.RunResumed, *, moved_seq: int | None = None
    ) -> None:
        """Publish the continuation of ``resumed``; ``moved_seq``: the sequence of the move that
        put it on another version, which then gets its own subject (docs/versions.md#moving-runs)."""
        started = await self.started(run_id)
        if started is None:
            log.error("resume.run_without_start", run_id=run_id)
            return
        await self._publish(
            Continuation(
                run_id=run_id,
                flow=started.flow,
                generation=resumed.generation,
                resume_id=resumed.resume_id,
                identity=started.identity,
                input=started.input,
                answers=resumed.answers,
                steps=resumed.steps,
                subject=started.subject or started.run_id,
                extras=started.extras,
                version=resumed.version,
            ),
            moved_seq=moved_seq,
        )

    async def _publish(self, cont: Continuation, moved_seq: int | None = None) -> None:
        subject = self._store.names.continuation(
            cont.flow, cont.run_id, cont.generation, cont.version, moved_seq
        )
        msg_id = f"cont-{cont.resume_id}" if moved_seq is None else f"cont-{cont.resume_id}-m{moved_seq}"
        fresh = await self._store.publish_once(subject, _enc.encode(cont), msg_id=msg_id)
        if not fresh:
            log.debug("resume.continuation_exists", resume_id=cont.resume_id)
