"""A run's timeline from the log (docs/doors/runs.md#the-timeline): every event of the run and of the
questions it asked, in order, with who, where and the waits between; paged; another identity's run
is the uniform 404. Real NATS and PostgreSQL, the services and a worker in-process."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

import layby
from tests.conftest import ALICE, OPERATOR, System
from tests.integration.test_parks import Workers, answer, open_asks, soon, wait_status

pytestmark = pytest.mark.timeout(90)


async def timeline(system: System, run_id: str, token: str = OPERATOR, **params: Any) -> Any:
    async with system.http(token) as http:
        return await http.get(f"/api/runs/{run_id}/timeline", params=params)


async def test_a_run_s_timeline_tells_its_story_in_order_with_who_where_and_the_waits(
    system: System,
    workers: Workers,
    db: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    @layby.step
    async def prepare(what: str) -> str:
        return f"prepared {what}"

    def register(w: layby.Worker) -> None:
        @w.flow("release")
        async def flow(_: Any) -> Any:
            await prepare("v2")
            ok = await layby.ask_user("Ship v2?", answer_format="confirm", mode="async", expiry_at=soon())
            return {"shipped": ok}

    await workers.serve(await workers.new(register))
    client = await system.sdk()
    run_id = await client.start_run("release")
    (asked,) = await open_asks(db, run_id, 1)
    assert await answer(system, asked, True) == 200
    await wait_status(db, run_id, "finished")
    resp = await timeline(system, run_id)
    assert resp.status_code == 200, resp.text
    data = resp.json()["data"]
    assert (data["run_id"], data["flow"], data["total"], data["next_page"]) == (run_id, "release", 7, None)
    kinds = [(e["kind"], e.get("by"), e.get("via")) for e in data["entries"]]
    assert kinds == [
        ("started", "ops", None),
        ("step", None, None),
        ("asked", "ops", None),  # the question is recorded, then the run parks on it
        ("parked", None, None),
        ("answered", "ops", "api"),
        ("resumed", None, None),
        ("finished", None, None),
    ]
    entries = data["entries"]
    assert entries[1]["name"].endswith(".prepare") and entries[1]["attempts"] == 1  # its qualified name
    assert entries[2]["question"] == "Ship v2?" and entries[2]["interaction_id"] == asked
    assert entries[4]["answer"] is True
    assert entries[0]["after_ms"] == 0 and all(e["after_ms"] >= 0 for e in entries)
    assert [e["at"] for e in entries] == sorted(e["at"] for e in entries)
    # Paged: two entries a page, the third page holds the fifth and sixth.
    paged = (await timeline(system, run_id, page="3", pageSize="2")).json()["data"]
    assert [e["kind"] for e in paged["entries"]] == ["answered", "resumed"]
    assert (paged["total"], paged["next_page"]) == (7, 4)
    # The same story from a terminal: `layby runs timeline`.
    from layby.cli import main as cli_main

    monkeypatch.setenv("LAYBY_URL", system.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    capsys.readouterr()
    assert await asyncio.to_thread(cli_main, ["runs", "timeline", run_id]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"release run {run_id}: 7 entries"
    steps = [line.split()[2] for line in printed[2:]]
    assert steps == ["started", "step", "asked", "parked", "answered", "resumed", "finished"]
    assert "Ship v2?" in printed[4] and "true" in printed[6]


async def test_another_identity_s_run_and_an_unknown_run_are_the_same_404(system: System) -> None:
    client = await system.sdk()
    run_id = await client.start_run("nobody-serves-this")
    assert (await timeline(system, run_id)).status_code == 200
    mine = await timeline(system, run_id, ALICE)
    unknown = await timeline(system, "0b4e3f4e-2c1a-4d6e-9a51-3f1f0f4c1a2b")
    malformed = await timeline(system, "not-a-run")
    assert mine.status_code == unknown.status_code == malformed.status_code == 404
    assert mine.json() == unknown.json() == malformed.json()
