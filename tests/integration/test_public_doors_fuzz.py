"""Random bytes on every public door never produce a 500 or a stack trace (docs/doors/common.md#envelope-and-errors).

The callback doors are fuzzed on random tickets and on live tickets (plain and verifier-bound),
with random bodies, query strings and signature headers; the media door on random ids.
"""

from __future__ import annotations

import asyncio
import string
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layby_server.settings import Settings
from tests.conftest import OPERATOR, System

pytestmark = [
    pytest.mark.integration,
    pytest.mark.settings(webhook_secrets="payments:whsec_fuzz_0123456789"),
]
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
path_text = st.text(alphabet=string.ascii_letters + string.digits + "-._~%", min_size=1, max_size=60)


def _no_leak(resp: httpx.Response) -> None:
    assert resp.status_code < 500 or resp.content == b'{"error":"webhook verification error"}', resp.content
    assert b"Traceback" not in resp.content and b'File "' not in resp.content


async def _live_callbacks(system: System) -> tuple[list[str], list[asyncio.Task[Any]]]:
    from layby.sdk import connect

    fields = msgspec.structs.asdict(system.settings)
    c = await connect(
        nats_url=system.settings.nats_url,
        token=OPERATOR,
        settings=Settings(**{**fields, "public_base_url": system.url}),
    )
    system.clients.append(c)
    tasks = [
        asyncio.create_task(
            c.ask_user(
                "Plain", answer_format="external", link="https://x.example/?cb={callback_url}", timeout=60
            )
        ),
        asyncio.create_task(
            c.ask_user(
                "Bound",
                answer_format="external",
                link="https://x.example/?cb={callback_url}",
                verifier={"name": "stripe", "config": {"secret": "payments"}},
                timeout=60,
            )
        ),
    ]
    urls: list[str] = []
    async with system.http() as http:
        for _ in range(200):
            items = (await http.get("/api/interactions")).json()["data"]["items"]
            urls = [i["format_payload"]["url"].split("cb=")[1] for i in items]
            if len(urls) == 2:
                break
            await asyncio.sleep(0.05)
    return urls, tasks


async def test_random_input_on_the_callback_and_media_doors_never_gives_a_5xx_or_a_trace(
    system: System,
) -> None:
    seen: list[tuple[str, bytes, str, str]] = []

    @FUZZ
    @given(
        ticket=path_text,
        body=st.binary(max_size=300),
        query=st.text(alphabet=string.printable, max_size=40),
        signature=st.text(alphabet=string.ascii_letters + string.digits + "=,.", max_size=60),
    )
    def collect(ticket: str, body: bytes, query: str, signature: str) -> None:
        seen.append((ticket, body, query, signature))

    collect()
    live, tasks = await _live_callbacks(system)
    assert len(live) == 2
    async with httpx.AsyncClient(base_url=system.url) as http:
        for index, (ticket, body, query, signature) in enumerate(seen):
            targets = [f"/api/interactions/callback/{ticket}", live[index % 2].removeprefix(system.url)]
            for target in targets:
                headers = {"Stripe-Signature": signature, "Content-Type": "application/json"}
                resp = await http.post(target, content=body, params={"q": query}, headers=headers)
                _no_leak(resp)
                resp = await http.get(target, params={"q": query})
                _no_leak(resp)
            resp = await http.get(f"/api/interactions/media/{ticket}")
            _no_leak(resp)
            assert resp.status_code in (400, 404)
    for task in tasks:
        task.cancel()
