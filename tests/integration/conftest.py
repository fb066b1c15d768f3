"""Fixtures the integration test modules share."""

from tests.integration.test_parks import workers  # noqa: F401 - a fixture for every module here
