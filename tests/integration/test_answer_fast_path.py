"""The answer door's fast path answers exactly as the routed door does (docs/doors/answer.md#the-fast-path).

Two doors on one system: the door as shipped (the fast path on) and a second replica with it off,
so every answer goes through the application's router and handler. The same request on each —
every outcome the door has — must give the same status, the same headers (but the per-request
id) and the same body.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn

from layby_server.operations.embedded import free_port
from layby_services.door.main import server_config
from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import eventually

Response = tuple[int, list[tuple[str, str]], bytes]


@pytest.fixture
async def routed(system: System) -> AsyncIterator[str]:
    """A second door on the same system, with the fast path off; yields its base URL."""
    settings = msgspec.structs.replace(system.settings, http_port=free_port())
    config = server_config(settings, fast_answers=False)
    config.timeout_graceful_shutdown = 1
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    url = f"http://127.0.0.1:{settings.http_port}"

    async def ready() -> int:
        async with httpx.AsyncClient(base_url=url) as http:
            return (await http.get("/readyz")).status_code

    await eventually(ready, "the routed door", until=lambda s: s == 200, retry=httpx.HTTPError)
    try:
        yield url
    finally:
        server.should_exit = True
        await task


async def _post(base: str, path: str, body: bytes, headers: dict[str, str]) -> Response:
    async with httpx.AsyncClient(base_url=base) as http:
        r = await http.post(path, content=body, headers=headers)
    kept = sorted((k.lower(), v) for k, v in r.headers.items() if k.lower() not in ("x-request-id", "date"))
    return r.status_code, kept, r.content


async def _pending(system: System, question: str, **kwargs: Any) -> tuple[asyncio.Task[Any], str]:
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user(question, timeout=60, **kwargs))
    async with system.http() as http:

        async def found() -> list[str]:
            items = (await http.get("/api/interactions")).json()["data"]["items"]
            return [i["interaction_id"] for i in items if i["question"] == question]

        ids = await eventually(found, f"the question {question!r}")
    return task, ids[0]


AUTH = {"Authorization": f"Bearer {OPERATOR}", "Content-Type": "application/json"}


async def test_every_outcome_of_the_fast_answer_door_is_byte_for_byte_the_routed_doors(
    system: System, routed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from layby_services.door import fast as fast_path

    taken: list[str] = []
    original = fast_path._answer

    async def counted(*args: Any) -> Any:
        taken.append(args[-1])
        return await original(*args)

    monkeypatch.setattr(fast_path, "_answer", counted)  # the shipped door's fast path, observed
    fast = system.url
    # The same request on both doors, for every refusal that needs no question of its own.
    unknown = f"/api/interactions/{uuid.uuid4()}/answer"
    cases: list[tuple[str, bytes, dict[str, str]]] = [
        (unknown, b'{"answer": "x"}', AUTH),
        ("/api/interactions/not-an-id/answer", b'{"answer": "x"}', AUTH),
        ("/api/interactions/a%2Fb/answer", b'{"answer": "x"}', AUTH),
        (unknown, b'{"answer": "x"}', {}),
        (unknown, b'{"answer": "x"}', {"Authorization": "Basic abc"}),
        (unknown, b'{"answer": "x"}', {"Authorization": "Bearer nope-not-a-token"}),
        (unknown, b"{not json", AUTH),
        (unknown, b'{"reply": "x"}', AUTH),
        (unknown, b'["answer"]', AUTH),
        (unknown, b'{"answer": "x", "answer": "y"}', AUTH),
        (unknown, b'{"answer": {"layby:interaction_expired": true}}', AUTH),
        (unknown, b'{"answer": "a\\u0000b"}', AUTH),
        (unknown, b'{"answer": "' + b"x" * (system.settings.max_body_bytes + 10) + b'"}', AUTH),
    ]
    for path, body, headers in cases:
        assert await _post(fast, path, body, headers) == await _post(routed, path, body, headers), path

    # Outcomes that need a question each: one asked per door, answered the same way on both.
    async def outcomes(base: str, tag: str) -> list[Response]:
        out: list[Response] = []
        task, confirm = await _pending(system, f"confirm {tag}", answer_format="confirm")
        path = f"/api/interactions/{confirm}/answer"
        out.append(await _post(base, path, b'{"answer": "maybe"}', AUTH))  # the format refuses: 400
        out.append(
            await _post(base, path, b'{"answer": "maybe"}', {**AUTH, "Authorization": f"Bearer {ALICE}"})
        )
        out.append(await _post(base, path, b'{"answer": true}', {**AUTH, "Layby-Client": "cli"}))  # 200
        out.append(await _post(base, path, b'{"answer": true}', AUTH))  # 409
        assert await task is True
        return [(s, h, b.replace(confirm.encode(), b"<id>")) for s, h, b in out]

    got_fast, got_routed = await outcomes(fast, "fast"), await outcomes(routed, "routed")
    assert [s for s, _, _ in got_fast] == [400, 403, 200, 409]
    assert got_fast == got_routed
    # Every request to the shipped door took the fast path; none to the routed one did.
    assert len(taken) == len(cases) + 4
