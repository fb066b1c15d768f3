"""Run chains and parked entries in the resume service (docs/caller-asks.md).

The resume service already reacts to every run and interaction event; these are its reactions
for caller asks, ``layby.call`` chains and visits:

- a child run's next outcome (it parked on a caller ask, finished, failed, was cancelled)
  re-evaluates its caller's park, where ``layby.call`` waits for it;
- a run execution that parks on a question, finishes, fails or is cancelled reports that outcome
  to the visits waiting on it (``settle_visit``): once per visit, and each entry the visit resumed
  settles with it (a waiting outcome, or gone);
- each subject's index follows its entries: an entry is added when its caller ask is recorded
  (the ask service adds it first; this repeats it) and removed when it is taken, removed,
  dropped, settled ``parked``, or resumed by its deadline rather than by a visit;
- a caller ask whose deadline passes with ``on_expiry="kill"`` tears its whole chain down.

Every reaction is idempotent: a redelivered event repeats it to no further effect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from layby_contracts import events
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog
from layby_server.write.chains import KILLER, kill_chain
from layby_server.write.parked import Entries, caller_entries, outcome_of, settle_visit

log = get_logger("layby.resume")


class Chains:
    def __init__(
        self,
        store: EventLog,
        entries: Entries,
        started: Callable[[str], Awaitable[events.RunStarted | None]],
        evaluate: Callable[[str], Awaitable[None]],
        now: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._entries = entries
        self._started = started
        self._evaluate = evaluate
        self._now = now

    async def on_run_event(
        self, ev: events.RunParked | events.RunFinished | events.RunFailed | events.RunCancelled
    ) -> None:
        """A run's execution reached an outcome: tell its visits, and wake its caller's call."""
        if ev.visits:
            # Which of a park's asks are caller asks is read only for visits to report it to.
            asks = await caller_entries(self._entries, ev) if isinstance(ev, events.RunParked) else None
            outcome = outcome_of(ev, asks)
            if outcome is not None:
                for visit in ev.visits:
                    await settle_visit(self._entries, visit, outcome)
        started = await self._started(ev.run_id)
        if started is not None and started.caller is not None:
            await self._evaluate(started.caller)

    async def on_entry_event(self, ev: events.Event) -> None:
        """Keep a subject's index in step with its entries; kill a chain at its deadline."""
        match ev:
            case events.InteractionAsked() if ev.to == "caller" and ev.subject is not None:
                self._entries.remember(ev)
                await self._entries.add(ev.subject, ev.interaction_id)
            case events.InteractionAnswered() if ev.to == "caller" and ev.visit is None:
                await self._gone(ev.interaction_id)  # resumed by its deadline: nobody waits on it
            case events.InteractionRemoved() if ev.to == "caller":
                await self._gone(ev.interaction_id)
                if ev.reason == "timeout" and ev.run_id is not None:
                    await kill_chain(self._store, self._started, ev.run_id, KILLER, self._now)
            case events.InteractionSettled() if ev.outcome == "parked":
                await self._gone(ev.interaction_id)
            case events.InteractionTaken():
                await self._gone(ev.interaction_id)
            case _:
                return

    async def _gone(self, ix: str) -> None:
        asked = await self._entries.asked(ix)
        if asked is not None and asked.subject is not None:
            await self._entries.remove(asked.subject, ix)
