"""Stream, subject and consumer names, in one place (CONVENTIONS 1).

Every name is derived from a namespace so that tests (and several deployments sharing one
NATS account) never see each other's traffic. The default namespace is ``layby``.
"""

from __future__ import annotations

import msgspec


class Names(msgspec.Struct, frozen=True):
    """All JetStream and core-NATS names of one namespace."""

    namespace: str = "layby"

    @property
    def events_stream(self) -> str:
        """The event log: the source of truth for interactions."""
        return f"{self.namespace.upper()}_EVENTS"

    @property
    def secrets_stream(self) -> str:
        """Short-lived answers of sensitive questions; never projected, never replayed to clients."""
        return f"{self.namespace.upper()}_SECRETS"

    @property
    def events_all(self) -> str:
        return f"{self.namespace}.ev.>"

    @property
    def ix_all(self) -> str:
        return f"{self.namespace}.ev.ix.*"

    def ix(self, interaction_id: str) -> str:
        """The subject of one interaction aggregate."""
        return f"{self.namespace}.ev.ix.{interaction_id}"

    def secret(self, interaction_id: str, ref: str) -> str:
        return f"{self.namespace}.secret.{interaction_id}.{ref}"

    @property
    def secrets_all(self) -> str:
        return f"{self.namespace}.secret.>"

    def wake(self, interaction_id: str, waiter: str | None = None) -> str:
        """Core-NATS subject on which a blocked asker waits.

        A client that asks often names a ``waiter`` and holds one subscription on
        ``wake_all(waiter)`` instead of one per question.
        """
        if waiter:
            return f"{self.namespace}.wake.{waiter}.{interaction_id}"
        return f"{self.namespace}.wake.{interaction_id}"

    def wake_all(self, waiter: str) -> str:
        return f"{self.namespace}.wake.{waiter}.*"

    @property
    def cmd_ask(self) -> str:
        return f"{self.namespace}.cmd.ask"

    @property
    def cmd_prune(self) -> str:
        return f"{self.namespace}.cmd.prune"

    def durable(self, role: str) -> str:
        """Durable consumer name of a role (shared by that role's replicas)."""
        return f"{self.namespace}-{role}"
