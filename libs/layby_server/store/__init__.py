"""The event store: JetStream's streams, appends, reads and consumers, and the in-memory twin."""
