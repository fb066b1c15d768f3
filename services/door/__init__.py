"""The door service."""
