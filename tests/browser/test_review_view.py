"""The review view of the inbox page in headless Chromium (docs/review.md#in-the-inbox): the
arguments shown as readable JSON, accept bound to them, an edit previewed as a diff first."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from layby.review import review
from tests.browser.conftest import expect
from tests.browser.test_inbox_page import open_card, sign_in
from tests.conftest import System

pytestmark = [pytest.mark.timeout(120), pytest.mark.browser]

ARGS = {"to": "acme", "amount": 120}


async def test_a_review_is_accepted_from_the_inbox_with_the_arguments_it_shows(
    page: Any, system: System
) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    task = asyncio.create_task(
        review("pay", ARGS, question="Pay acme?", description="March", client=client, timeout=30)
    )
    card = await open_card(page, "Pay acme?")
    await expect(card.locator(".review-action")).to_have_text("pay")
    await expect(card.locator(".review-arguments")).to_contain_text('"amount": 120')
    await card.get_by_role("button", name="Accept").click()
    decided = await asyncio.wait_for(task, 10)
    assert (decided.decision, decided.arguments) == ("accept", ARGS)


async def test_an_edit_is_shown_as_a_diff_before_it_is_sent(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    task = asyncio.create_task(review("pay", ARGS, question="Pay acme, edited?", client=client, timeout=30))
    card = await open_card(page, "Pay acme, edited?")
    await card.locator("summary", has_text="Edit the arguments").click()
    await card.get_by_label("Edited arguments (JSON)").fill('{"to": "acme", "amount": 100}')
    await card.get_by_role("button", name="Edit").click()
    await expect(card.locator(".review-diff li")).to_have_text(["amount: 120 \u2192 100"])
    assert not task.done()  # the first press only shows what would change
    await card.get_by_role("button", name="Send the edit").click()
    decided = await asyncio.wait_for(task, 10)
    assert (decided.decision, decided.arguments) == ("edit", {"to": "acme", "amount": 100})


async def test_a_cards_history_shows_who_decided_what_where(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    task = asyncio.create_task(review("pay", ARGS, question="Pay acme, audited?", client=client, timeout=30))
    card = await open_card(page, "Pay acme, audited?")
    await card.get_by_role("button", name="Reject").click()
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)
    await card.locator("summary", has_text="History").click()
    entries = card.locator(".history-entries li")
    await expect(entries).to_have_count(2)
    await expect(entries.nth(0)).to_contain_text("Asked by ops")
    await expect(entries.nth(1)).to_contain_text("Answered by ops via inbox \u2014 reject")
