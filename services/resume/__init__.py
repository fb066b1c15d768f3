"""The resume service."""
