"""The runs dashboard, the page's second view, in real headless Chromium.

Debian's Chromium driven by Playwright; the page is served by the door of the in-process system,
and the runs are real flows executed by a real layby worker (docs/doors/inbox-page.md#the-runs-dashboard).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

import layby
from tests.browser.conftest import expect
from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import Booking, order_flows
from tests.integration.test_parks import Workers, answer, open_asks, soon, wait_status

pytestmark = [pytest.mark.timeout(120), pytest.mark.browser]


async def serve(workers: Workers, register: Any = order_flows) -> None:
    await workers.serve_failing_fast(register)


async def open_dashboard(page: Any, system: System, token: str = OPERATOR) -> None:
    await page.goto(system.url + "/#runs")
    await page.fill("#token", token)
    await page.press("#token", "Enter")
    await expect(page.locator("#runs")).to_be_visible()
    await expect(page.locator("#tab-runs")).to_have_attribute("aria-current", "page")


def count(page: Any, status: str) -> Any:
    return page.locator(f'#runs-statuses button[data-status="{status}"] .runs-count')


def row(page: Any, run_id: str) -> Any:
    return page.locator(f'#runs-rows tr[data-run-id="{run_id}"]')


async def show(page: Any, run_id: str) -> Any:
    await row(page, run_id).get_by_role("button").click()
    detail = page.locator("#run-detail")
    await expect(detail.locator("code")).to_have_text(run_id)
    return detail


def fact(detail: Any, name: str) -> Any:
    return detail.locator(f'dt:text-is("{name}") + dd')


async def test_counts_per_status_are_filter_buttons_and_the_oldest_question_is_named(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """The dashboard counts the runs in each status, a status button or the flow filter narrows
    the list, and the oldest waiting question is shown with its text."""
    await serve(workers)
    ops = await system.sdk()
    first = await ops.start_run("approve", 1)
    await open_asks(db, first, 1)
    second = await ops.start_run("approve", 2)
    failed = await ops.start_run("explode")
    finished = await ops.start_run("quick", 3)
    await open_asks(db, second, 1)
    await wait_status(db, failed, "failed", timeout=60)
    await wait_status(db, finished, "finished")

    await open_dashboard(page, system)
    for status, n in [
        ("all", 4),
        ("running", 0),
        ("parked", 2),
        ("resumed", 0),
        ("finished", 1),
        ("failed", 1),
    ]:
        await expect(count(page, status)).to_have_text(str(n))
    await expect(count(page, "cancelled")).to_have_text("0")
    await expect(page.locator("#runs-rows tr")).to_have_count(4)
    oldest = page.locator("#runs-oldest")
    await expect(oldest.locator(".runs-oldest-question")).to_have_text("Approve order 1?")
    await expect(oldest).to_contain_text("For alice")

    failed_button = page.locator('#runs-statuses button[data-status="failed"]')
    await failed_button.click()
    await expect(failed_button).to_have_attribute("aria-pressed", "true")
    await expect(page.locator("#runs-rows tr")).to_have_count(1)
    await expect(row(page, failed)).to_contain_text("explode")

    await page.locator('#runs-statuses button[data-status="all"]').click()
    await page.get_by_label("Flow").select_option("approve")
    await expect(page.locator("#runs-rows tr")).to_have_count(2)
    await expect(count(page, "all")).to_have_text("2")
    await expect(count(page, "failed")).to_have_text("0")
    await expect(row(page, first).locator('td[data-label="Status"]')).to_have_text("parked")


async def test_a_parked_run_shows_its_open_questions_with_addressee_and_deadline(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Selecting a parked run shows each open question, who it is addressed to and its deadline
    (docs/doors/runs.md#one-run)."""
    await serve(workers)
    run_id = await (await system.sdk()).start_run("approve", 5)
    await open_asks(db, run_id, 1)
    async with system.http() as http:
        (ask,) = (await http.get(f"/api/runs/{run_id}")).json()["data"]["asks"]

    await open_dashboard(page, system)
    detail = await show(page, run_id)
    await expect(fact(detail, "Status")).to_have_text("parked")
    question = detail.locator(f'.run-ask.open[data-id="{ask["interaction_id"]}"]')
    await expect(question.locator(".question")).to_have_text("Approve order 5?")
    await expect(question.locator(".ask-to")).to_have_text("For alice")
    await expect(question.locator(".ask-deadline")).to_have_text(re.compile(r"^Deadline in (59m|1h)$"))
    await expect(question.locator(".ask-deadline time")).to_have_attribute("datetime", ask["expiry_at"])
    await expect(detail.get_by_role("button", name="Cancel run…")).to_be_visible()
    await expect(detail.get_by_role("button", name="Retry run…")).to_have_count(0)


async def test_a_failed_run_shows_its_error_and_retry_re_executes_it_from_its_last_step(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """A failed run shows its error; Retry, once confirmed, executes it again from its last
    recorded step, not from scratch (docs/doors/runs.md#retry)."""
    booking = Booking()
    await serve(workers, booking.register)
    run_id = await (await system.sdk()).start_run("book")
    await wait_status(db, run_id, "failed", timeout=60)

    await open_dashboard(page, system)
    await expect(row(page, run_id).locator('td[data-label="Steps"]')).to_have_text("1")
    detail = await show(page, run_id)
    await expect(detail.locator(".run-error")).to_contain_text("the mail server is down")
    await expect(detail.get_by_role("button", name="Cancel run…")).to_have_count(0)
    booking.broken = False
    await detail.get_by_role("button", name="Retry run…").click()
    await detail.get_by_role("button", name="Yes, retry the run").click()
    await expect(page.locator("#runs-live")).to_have_text(f"Run {run_id[:8]} retried; it executes again.")
    await expect(fact(detail, "Status")).to_have_text("finished", timeout=30000)
    await expect(detail.locator(".run-result")).to_have_text('"seat 12A"')
    await expect(fact(detail, "Last retried by")).to_have_text("ops")
    assert booking.effects["reserve"] == 1  # the recorded step was not executed again


async def test_cancel_of_a_parked_run_removes_its_question_and_ends_it_cancelled(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """Cancel asks for confirmation ("Keep it" does nothing); confirmed, the run ends cancelled
    by the person and its question leaves the inbox (docs/doors/runs.md#cancel)."""
    await serve(workers)
    run_id = await (await system.sdk()).start_run("approve", 9)
    await open_asks(db, run_id, 1)

    await open_dashboard(page, system)
    detail = await show(page, run_id)
    await detail.get_by_role("button", name="Cancel run…").click()
    await detail.get_by_role("button", name="Keep it").click()
    await expect(detail.get_by_role("button", name="Cancel run…")).to_be_focused()
    async with system.http() as http:
        assert (await http.get(f"/api/runs/{run_id}")).json()["data"]["status"] == "parked"

    await detail.get_by_role("button", name="Cancel run…").click()
    await detail.get_by_role("button", name="Yes, cancel the run").click()
    await expect(page.locator("#runs-live")).to_have_text(f"Run {run_id[:8]} cancelled.")
    await expect(fact(detail, "Status")).to_have_text("cancelled")
    await expect(fact(detail, "Cancelled by")).to_have_text("ops")
    await expect(detail.get_by_role("button", name="Cancel run…")).to_have_count(0)
    await expect(count(page, "cancelled")).to_have_text("1")
    await expect(page.locator("#runs-oldest")).to_have_text("No run is waiting for an answer.")
    async with system.http() as http:
        assert (await http.get("/api/interactions")).json()["data"]["total"] == 0


async def test_the_view_refreshes_live_when_a_question_is_answered(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """An answer given elsewhere reaches the dashboard through the stream: the question shows
    answered and the run moves on without a reload (docs/doors/inbox-page.md#the-runs-dashboard)."""
    await serve(workers)
    run_id = await (await system.sdk()).start_run("approve", 11)
    (asked,) = await open_asks(db, run_id, 1)

    await open_dashboard(page, system)
    detail = await show(page, run_id)
    await expect(detail.locator(".run-ask.open .question")).to_have_text("Approve order 11?")
    await expect(count(page, "parked")).to_have_text("1")
    assert await answer(system, asked, "yes", ALICE) == 200
    # Sooner than the 5 s poll: the answered frame triggers the refresh.
    await expect(page.locator("#runs-oldest")).to_have_text("No run is waiting for an answer.", timeout=4000)
    await expect(fact(detail, "Status")).to_have_text("finished", timeout=15000)
    await expect(count(page, "finished")).to_have_text("1")
    await expect(count(page, "parked")).to_have_text("0")
    await expect(detail.locator(".run-result")).to_have_text('"yes"')


async def test_a_restricted_token_sees_only_its_own_runs(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """A `user` token's dashboard counts and lists only its own identity's runs (docs/doors/runs.md#visibility)."""
    await serve(workers)
    mine = await (await system.sdk(ALICE)).start_run("quick", 1)
    theirs = await (await system.sdk()).start_run("quick", 2)
    await wait_status(db, mine, "finished")
    await wait_status(db, theirs, "finished")

    await open_dashboard(page, system, ALICE)
    await expect(count(page, "all")).to_have_text("1")
    await expect(page.locator("#runs-rows tr")).to_have_count(1)
    await expect(row(page, mine).locator('td[data-label="Identity"]')).to_have_text("alice")
    await expect(row(page, theirs)).to_have_count(0)
    await expect(page.get_by_label("Flow").locator("option")).to_have_text(["All flows", "quick"])


async def test_an_operation_the_door_refuses_says_why_in_plain_words(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """When the run moved on behind the page, the confirmed Retry is refused (409) and the page
    says so with the door's reason, then shows the run as it is (docs/doors/runs.md#retry)."""
    broken = {"yes": True}

    def register(w: layby.Worker) -> None:
        @w.flow("flaky")
        async def flaky(_: Any) -> Any:
            if broken["yes"]:
                raise RuntimeError("not yet")
            return "done"

    await serve(workers, register)
    run_id = await (await system.sdk()).start_run("flaky")
    await wait_status(db, run_id, "failed", timeout=60)
    # The page's timers stand still: no poll redraws it while the run moves on behind its back.
    now = datetime.now(UTC)
    await page.clock.install(time=now)
    await page.clock.pause_at(now)
    await open_dashboard(page, system)
    detail = await show(page, run_id)
    await detail.get_by_role("button", name="Retry run…").click()
    broken["yes"] = False
    async with system.http() as http:
        assert (await http.post(f"/api/runs/{run_id}/retry")).status_code == 200
    await wait_status(db, run_id, "finished")
    await detail.get_by_role("button", name="Yes, retry the run").click()
    await expect(page.locator("#run-action-error")).to_have_text(
        "Could not retry the run: the run is finished; only a failed run can be retried."
    )
    await expect(fact(detail, "Status")).to_have_text("finished")
    await expect(detail.get_by_role("button", name="Retry run…")).to_have_count(0)
    page.errors.remove(f"409 {system.url}/api/runs/{run_id}/retry")  # the one refusal meant


async def test_a_run_no_worker_serves_says_so_and_can_be_cancelled(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """A running run whose flow no live worker serves carries the door's warning, and a running
    run can be cancelled from the page (docs/doors/runs.md#workers, docs/doors/runs.md#cancel)."""
    await serve(workers)
    run_id = await (await system.sdk()).start_run("nosuchflow")
    await wait_status(db, run_id, "running")

    await open_dashboard(page, system)
    detail = await show(page, run_id)
    await expect(detail.locator(".run-warning")).to_have_text(
        "no worker serves flow 'nosuchflow'; the run waits for one"
    )
    await detail.get_by_role("button", name="Cancel run…").click()
    await detail.get_by_role("button", name="Yes, cancel the run").click()
    await expect(fact(detail, "Status")).to_have_text("cancelled")
    await expect(detail.locator(".run-warning")).to_have_count(0)


async def test_polling_runs_only_while_the_runs_view_is_shown(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """The view reloads every 5 s while shown, and not at all once another view is shown or the
    person signed out (docs/doors/inbox-page.md#the-runs-dashboard)."""
    await serve(workers)
    run_id = await (await system.sdk()).start_run("quick", 1)
    await wait_status(db, run_id, "finished")
    summaries: list[str] = []
    page.on("request", lambda r: summaries.append(r.url) if "/api/runs/summary" in r.url else None)
    await page.clock.install()
    await open_dashboard(page, system)
    await expect(row(page, run_id)).to_be_visible()
    async with page.expect_request("**/api/runs/summary*"):
        await page.clock.run_for(5000)

    await page.locator("#tab-inbox").click()
    await expect(page.locator("#runs")).to_be_hidden()
    summaries.clear()
    await page.clock.run_for(30000)
    await page.evaluate("1")  # a round trip to the page after its timers ran
    assert summaries == []  # hidden: no poll
    async with page.expect_request("**/api/runs/summary*"):
        await page.locator("#tab-runs").click()  # shown again: loaded at once
    async with page.expect_request("**/api/runs/summary*"):
        await page.clock.run_for(5000)  # and polled again

    await page.locator("#sign-out").click()
    await expect(page.locator("#sign-in")).to_be_visible()
    summaries.clear()
    await page.clock.run_for(30000)
    await page.evaluate("1")
    assert summaries == []  # signed out: no poll


async def test_a_run_s_timeline_lists_its_story_with_who_where_and_the_waits(
    page: Any, system: System, workers: Workers, db: asyncpg.Pool
) -> None:
    """docs/doors/runs.md#the-timeline: the run view's Timeline, read from the log when opened."""

    @layby.step
    async def prepare() -> str:
        return "ready"

    def register(w: layby.Worker) -> None:
        @w.flow("timeline-flow")
        async def flow(_: Any) -> Any:
            await prepare()
            return await layby.ask_user("Go ahead?", answer_format="confirm", mode="async", expiry_at=soon())

    await workers.serve(await workers.new(register))
    client = await system.sdk()
    run_id = await client.start_run("timeline-flow")
    (asked,) = await open_asks(db, run_id, 1)
    assert await answer(system, asked, True) == 200
    await wait_status(db, run_id, "finished")
    await open_dashboard(page, system)
    detail = await show(page, run_id)
    await detail.locator("#run-timeline summary").click()
    entries = detail.locator("#run-timeline-entries li")
    await expect(entries).to_have_count(7)
    await expect(entries.nth(0)).to_contain_text("Started")
    await expect(entries.nth(0)).to_contain_text("by ops")
    await expect(entries.nth(1)).to_contain_text("Step")
    await expect(entries.nth(2)).to_contain_text("Go ahead?")
    await expect(entries.nth(4)).to_contain_text("Answered")
    await expect(entries.nth(4)).to_contain_text("via api")
    await expect(entries.nth(6)).to_contain_text("Finished")
