"""Recently asked questions, by id, fed by the door's projector.

The answer door decides against the ``asked`` event; with this cache it skips one read of the
log per answer. It is safe because an ``asked`` event never changes and the answer's append
still expects that event's sequence: an entry that is stale (already answered or pruned) only
costs a failed append, after which the door re-reads the log and reports what it holds.
"""

from __future__ import annotations

from collections import OrderedDict

from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionRouted,
)
from layby_domain.interaction import of_caller_ask
from layby_server.store.eventstore import Stored

MAX_ENTRIES = 100_000


class AskedCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._max = max_entries
        self._entries: OrderedDict[str, Stored] = OrderedDict()
        self._routed: dict[str, Stored] = {}
        """A routed question's latest routing step (docs/routing.md), while its asked event is here."""

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, interaction_id: str) -> Stored | None:
        return self._entries.get(interaction_id)

    def routed(self, interaction_id: str) -> Stored | None:
        return self._routed.get(interaction_id)

    def observe(self, batch: list[Stored]) -> None:
        for stored in batch:
            ev = stored.event
            if of_caller_ask(ev):
                continue  # never answered at the door: nothing to keep
            if isinstance(ev, InteractionAsked):
                self._entries[ev.interaction_id] = stored
                if len(self._entries) > self._max:
                    gone, _ = self._entries.popitem(last=False)
                    self._routed.pop(gone, None)
            elif isinstance(ev, InteractionRouted):
                held = self._routed.get(ev.interaction_id)
                if ev.interaction_id in self._entries and (held is None or held.seq < stored.seq):
                    self._routed[ev.interaction_id] = stored
            elif isinstance(ev, InteractionAnswered | InteractionRemoved):
                self._entries.pop(ev.interaction_id, None)
                self._routed.pop(ev.interaction_id, None)
