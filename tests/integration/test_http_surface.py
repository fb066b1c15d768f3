"""Health, readiness, the OpenAPI document, and errors that never leak internals (A13)."""

from __future__ import annotations

import pytest

from tests.conftest import System

pytestmark = pytest.mark.integration


async def test_healthz_and_readyz(system: System) -> None:
    """/healthz answers while the process lives; /readyz checks NATS JetStream and PostgreSQL."""
    async with system.http(None) as http:
        assert (await http.get("/healthz")).json() == {"data": {"status": "ok"}}
        ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"data": {"status": "ready", "nats": True, "postgres": True}}


async def test_openapi_document_lists_the_doors(system: System) -> None:
    """The OpenAPI document is served at /schema/openapi.json."""
    async with system.http(None) as http:
        doc = (await http.get("/schema/openapi.json")).json()
    assert {
        "/api/interactions",
        "/api/interactions/stream",
        "/api/interactions/{interaction_id}/answer",
    } <= set(doc["paths"])


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/interactions"),
        ("GET", "/api/interactions/stream"),
        ("POST", "/api/interactions/x/answer"),
    ],
)
async def test_every_authenticated_door_refuses_without_a_token(
    system: System, method: str, path: str
) -> None:
    """The three authenticated doors answer 401 without credentials (inventory A13.120)."""
    async with system.http(None) as http:
        resp = await http.request(method, path, json={"answer": 1})
    assert resp.status_code == 401
    assert resp.json() == {"error": "missing bearer token"}
    assert resp.headers["www-authenticate"].startswith("Bearer")


async def test_unknown_route_and_method_use_the_error_envelope(system: System) -> None:
    """Unknown routes and methods answer in the {"error": ...} envelope with no internals."""
    async with system.http() as http:
        missing = await http.get("/api/nope")
        wrong = await http.delete("/api/interactions")
    assert (missing.status_code, missing.json()) == (404, {"error": "not found"})
    assert (wrong.status_code, wrong.json()) == (405, {"error": "method not allowed"})
