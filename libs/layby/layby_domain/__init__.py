"""Layby's pure rules: no I/O, no clock reads, no logging. The SDK and the services share them
(docs/architecture.md)."""
