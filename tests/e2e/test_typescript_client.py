"""The TypeScript client (clients/typescript, docs/clients.md) against a real `layby up`.

Its own tests are written with Node's test runner (clients/typescript/test); this runs them
against the whole system, started here, with the Python CLI answering on the other side.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from layby_server.operations.embedded import free_port
from tests.e2e.test_processes import start_up, stop_up, up_env
from tests.node.projects import TYPESCRIPT_CLIENT, run

pytestmark = pytest.mark.e2e


def test_the_clients_types_are_generated_from_the_checked_in_openapi_document() -> None:
    """`npm run check`: the generated types match contracts/schema/openapi.json and the client
    compiles against them, so a door changed without regenerating fails here."""
    run(TYPESCRIPT_CLIENT, "run", "check")


@pytest.mark.timeout(300)
def test_the_typescript_client_against_a_live_stack(tmp_path: Path) -> None:
    """Ask → answered from the Python side → the client's outcome; the stream resumed without a
    gap, by hand and after a cut; refusals decoded to typed errors; runs and notifications."""
    port = free_port()
    env = up_env(tmp_path / "data", port, LAYBY_LOG_LEVEL="warning")
    up, token = start_up(env)
    try:
        run(
            TYPESCRIPT_CLIENT,
            "test",
            env={
                **env,
                "LAYBY_URL": f"http://127.0.0.1:{port}",
                "LAYBY_TOKEN": token,
                "LAYBY_PYTHON": sys.executable,
            },
        )
    finally:
        stop_up(up)
