"""What the projector does with the events of caller asks (docs/caller-asks.md#hidden-from-the-inbox,
docs/caller-asks.md#the-concurrency-cap).

A caller ask asks a run, not a person, so none of its events reaches the inbox read model: the
``interactions`` table never holds a caller ask, and every read of it (the list, the done list,
the runs summary, the sweeper's scans) leaves caller asks out without a filter of its own. What
the projector keeps of them is their slot in the caller pool (``caller_admissions``, reserved by
the ask service before the ask is recorded):

- answered (the calling run resumed the entry): kept while the resumed chain runs;
- settled ``finished`` or ``failed``: kept while the waiting outcome waits to be taken;
- settled ``parked``, taken, or removed (cancelled, expired with ``kill``, or a waiting outcome
  dropped past its retention): released.

A slot still lapses at its deadline, so a lost event never holds one for ever: answered and
settled entries hold theirs until ``LAYBY_WAITING_OUTCOME_RETENTION`` after the event.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from layby_contracts.events import (
    Event,
    InteractionAnswered,
    InteractionRemoved,
    InteractionSettled,
    InteractionTaken,
)
from layby_domain.interaction import of_caller_ask

if TYPE_CHECKING:
    import asyncpg
    from asyncpg.pool import PoolConnectionProxy

    Conn = asyncpg.Connection[Any] | PoolConnectionProxy[Any]

CALLER_POOL = "caller_admissions"
"""The table of the caller pool's reservations (``INTERACTIONS_MAX_CONCURRENT_CALLER``)."""

# Only ever pushed later: the same statements in any order, or twice, give the same deadline.
_EXTEND = f"UPDATE {CALLER_POOL} SET deadline = GREATEST(deadline, $2) WHERE interaction_id = $1"  # noqa: S608 - a constant
_RELEASE = f"DELETE FROM {CALLER_POOL} WHERE interaction_id = $1"  # noqa: S608 - a constant


class CallerSlots:
    """The caller pool's changes of one projected batch, applied in its transaction."""

    def __init__(self, retention_seconds: float) -> None:
        self._retention = timedelta(seconds=retention_seconds)
        self._extend: list[tuple[str, datetime]] = []
        self._release: list[tuple[str]] = []

    def take(self, event: Event) -> bool:
        """Note what ``event`` does to its slot when it belongs to a caller ask (True): the caller
        then leaves it out of every inbox table."""
        if not of_caller_ask(event):
            return False
        match event:
            case InteractionSettled(outcome="parked") | InteractionTaken() | InteractionRemoved():
                self._release.append((event.interaction_id,))
            case InteractionSettled():
                self._extend.append((event.interaction_id, event.settled_at + self._retention))
            case InteractionAnswered():
                self._extend.append((event.interaction_id, event.answered_at + self._retention))
            case _:
                pass  # asked: the ask service reserved the slot before it recorded the ask
        return True

    async def apply(self, conn: Conn) -> None:
        # Extensions first: a release in the same batch always comes later in the log.
        if self._extend:
            await conn.executemany(_EXTEND, self._extend)
        if self._release:
            await conn.executemany(_RELEASE, self._release)
