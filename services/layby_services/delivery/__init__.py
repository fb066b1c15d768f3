"""The delivery service."""
