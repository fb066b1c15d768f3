"""Fixtures the integration test modules share."""

from tests.integration.test_parks import clock, clocked, workers  # noqa: F401 - fixtures for every module here
