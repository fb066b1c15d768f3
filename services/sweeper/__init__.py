"""The sweeper service."""
