"""Bulk decisions and routed questions in the inbox page, in headless Chromium
(docs/doors/inbox-page.md#bulk-decisions, docs/routing.md): ticked questions approved at once, each
by its own answer, with what became of each; a vote that waits; a question handed on."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.browser.conftest import expect
from tests.browser.test_inbox_page import open_card, row, sign_in
from tests.conftest import BOB, System

pytestmark = [pytest.mark.timeout(120), pytest.mark.browser]


async def test_bulk_approve_answers_each_ticked_question_and_says_which_someone_else_answered_first(
    page: Any, system: System
) -> None:
    page.allow_error(r"409 .*/answer")  # the question someone else answered first
    await sign_in(page, system)
    client = await system.sdk()
    asks = {
        q: asyncio.create_task(client.ask_user(q, answer_format="confirm", timeout=60))
        for q in ("Bulk one?", "Bulk two?", "Bulk three?")
    }
    asks["Bulk text?"] = asyncio.create_task(client.ask_user("Bulk text?", timeout=60))
    for question in asks:
        await row(page, question).locator(".pick").check()
    await expect(page.locator("#bulk-count")).to_have_text("4 selected")
    # Someone else answers one of them first, through the answer door.
    async with system.http() as http:
        listed = await http.get("/api/interactions?pageSize=200")
        two = next(i for i in listed.json()["data"]["items"] if i["question"] == "Bulk two?")
        resp = await http.post(f"/api/interactions/{two['interaction_id']}/answer", json={"answer": False})
        assert resp.status_code == 200, resp.text
    await page.get_by_role("button", name="Approve selected").click()
    results = page.locator("#bulk-results li")
    await expect(results).to_have_count(4)
    await expect(results.filter(has_text="Bulk one?")).to_contain_text("\u2014 answered")
    await expect(results.filter(has_text="Bulk three?")).to_contain_text("\u2014 answered")
    await expect(results.filter(has_text="Bulk two?")).to_contain_text("already answered by someone else")
    await expect(results.filter(has_text="Bulk text?")).to_contain_text(
        "skipped: not a yes/no or review question"
    )
    assert await asyncio.wait_for(asks["Bulk one?"], 10) is True
    assert await asyncio.wait_for(asks["Bulk three?"], 10) is True
    assert await asyncio.wait_for(asks["Bulk two?"], 10) is False
    assert not asks["Bulk text?"].done()  # skipped, still open
    await expect(row(page, "Bulk text?").locator(".pick")).not_to_be_checked()


async def test_a_routed_question_shows_who_decides_and_a_vote_that_waits(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    task = asyncio.create_task(
        client.ask_user(
            "Two-person approval?",
            answer_format="confirm",
            timeout=60,
            routing={"voters": ["ops", "bob"], "required": 2},
        )
    )
    card = await open_card(page, "Two-person approval?")
    await expect(card.locator(".routing")).to_have_text("2 of ops, bob must agree")
    await card.get_by_role("button", name="Yes").click()
    await expect(card.locator(".outcome")).to_have_text(
        "Your vote is recorded (1 of 2); the question is decided when 2 agree."
    )
    assert not task.done()
    iid = await card.get_attribute("data-id")
    async with system.http(BOB) as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": True})
        assert resp.status_code == 200, resp.text
    assert await asyncio.wait_for(task, 10) is True


async def test_a_question_is_handed_on_from_its_card(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Hand me on?", answer_format="confirm", timeout=60))
    card = await open_card(page, "Hand me on?")
    await card.locator("summary", has_text="Hand on").click()
    await card.get_by_label("Hand on to").fill("bob")
    await card.get_by_label("Note").fill("yours now")
    await card.get_by_role("button", name="Hand on", exact=True).click()
    await expect(card.locator(".outcome")).to_have_text("Handed on to bob.")
    await card.locator("summary", has_text="History").click()
    await expect(card.locator(".history-entries li").nth(1)).to_contain_text("Handed on by ops to bob")
    iid = await card.get_attribute("data-id")
    async with system.http(BOB) as http:
        assert (await http.post(f"/api/interactions/{iid}/answer", json={"answer": True})).status_code == 200
    assert await asyncio.wait_for(task, 10) is True
