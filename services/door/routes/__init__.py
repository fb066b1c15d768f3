"""The door's routes."""
