"""The ask service."""
