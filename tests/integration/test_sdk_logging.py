"""An ask is routine for the SDK (its lines are at debug), while ``layby ask`` says what it waits
for (docs/engineering.md#logging, docs/cli.md#asking)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from tests.conftest import OPERATOR, System
from tests.helpers import Records, wait_total

pytestmark = pytest.mark.integration


@pytest.fixture
def sdk_records() -> Iterator[Records]:
    """Every record of the ``layby`` logger during one test, from debug up."""
    sdk = logging.getLogger("layby")
    records = Records()
    level = sdk.level
    sdk.setLevel(logging.DEBUG)
    sdk.addHandler(records)
    try:
        yield records
    finally:
        sdk.removeHandler(records)
        sdk.setLevel(level)


async def answer_the_only_question(system: System, answer: str) -> str:
    [item] = (await wait_total(system, 1))["items"]
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{item['interaction_id']}/answer", json={"answer": answer})
    assert resp.status_code == 200, resp.text
    return str(item["interaction_id"])


async def test_an_answered_ask_logs_only_at_debug(system: System, sdk_records: Records) -> None:
    """An ask answered in time writes no SDK line at info or above; what it waited for is a debug
    line with the question's id as a field."""
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("Quietly?", timeout=30))
    iid = await answer_the_only_question(system, "yes")
    assert await asyncio.wait_for(ask, 15) == "yes"
    assert [r.getMessage() for r in sdk_records.records if r.levelno >= logging.INFO] == []
    [waiting] = [r for r in sdk_records.records if r.getMessage().startswith("sdk.waiting ")]
    assert waiting.levelno == logging.DEBUG
    assert waiting.__dict__["interaction_id"] == iid


async def test_layby_ask_says_what_it_waits_for(
    system: System, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``layby ask`` writes one line naming the question it waits for on standard error, and the
    answer alone on standard output."""
    from layby import cli

    for key, value in {
        "LAYBY_URL": system.url,
        "LAYBY_TOKEN": OPERATOR,
        "LAYBY_NATS_URL": system.settings.nats_url or "",
        "LAYBY_NAMESPACE": system.settings.namespace,
        "LAYBY_LOG_FORMAT": "console",
    }.items():
        monkeypatch.setenv(key, value)
    sdk = logging.getLogger("layby")
    saved = (list(sdk.handlers), sdk.level, sdk.propagate)
    try:
        run = asyncio.create_task(asyncio.to_thread(cli.main, ["ask", "Loudly?", "--timeout", "30"]))
        iid = await answer_the_only_question(system, "yes")
        assert await asyncio.wait_for(run, 15) == 0
    finally:
        sdk.handlers[:] = saved[0]
        sdk.setLevel(saved[1])
        sdk.propagate = saved[2]
    captured = capsys.readouterr()
    assert captured.out.strip().splitlines()[-1] == '"yes"'
    [waiting] = [line for line in captured.err.splitlines() if "sdk.waiting" in line]
    assert "[info" in waiting
    assert f"interaction_id={iid}" in waiting
