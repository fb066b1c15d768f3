"""Random input on the doors never produces a 500 or a stack trace (docs/doors/common.md#envelope-and-errors)."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import OPERATOR, System

pytestmark = pytest.mark.integration

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
# "." and ".." are dot segments: the client removes them from the path, so the request
# would go to another door (POST /api/interactions/answer is a 405), never to the answer door.
path_text = st.text(alphabet=string.ascii_letters + string.digits + "-._~%", min_size=1, max_size=60).filter(
    lambda text: text not in (".", "..")
)


def _no_leak(status: int, body: bytes) -> None:
    assert status < 500, body
    assert b"Traceback" not in body
    assert b'File "' not in body


async def test_random_bodies_and_ids_on_the_answer_door(system: System) -> None:
    """Random bytes to POST /api/interactions/{id}/answer give 400/404/413, never 5xx."""
    seen: list[tuple[str, bytes]] = []

    @FUZZ
    @given(iid=path_text, body=st.binary(max_size=300))
    def collect(iid: str, body: bytes) -> None:
        seen.append((iid, body))

    collect()
    async with system.http(OPERATOR) as http:
        for iid, body in seen:
            resp = await http.post(f"/api/interactions/{iid}/answer", content=body)
            _no_leak(resp.status_code, resp.content)
            assert resp.status_code in (400, 404, 413)
            assert "error" in resp.json()


async def test_random_windows_and_tokens_on_the_list_door(system: System) -> None:
    """Random page/pageSize values and Authorization headers give 200/400/401, never 5xx."""
    seen: list[tuple[str, str, str]] = []

    @FUZZ
    @given(
        page=st.text(max_size=12),
        size=st.text(max_size=12),
        auth=st.text(alphabet=string.ascii_letters + string.digits + " -_.:=+/", max_size=40),
    )
    def collect(page: str, size: str, auth: str) -> None:
        seen.append((page, size, auth))

    collect()
    async with system.http(None) as http:
        for page, size, auth in seen:
            headers = {"Authorization": auth.strip() or "x"}
            resp = await http.get(
                "/api/interactions", params={"page": page, "pageSize": size}, headers=headers
            )
            _no_leak(resp.status_code, resp.content)
            assert resp.status_code == 401
        for page, size, _ in seen:
            resp = await http.get(
                "/api/interactions",
                params={"page": page, "pageSize": size},
                headers={"Authorization": f"Bearer {OPERATOR}"},
            )
            _no_leak(resp.status_code, resp.content)
            assert resp.status_code in (200, 400)
