"""Fault injection on the shape Layby ships for: three JetStream nodes, every stream at three
replicas, two replicas of every service, a worker; load recorded as a history and checked
against the log (docs/architecture.md)."""
