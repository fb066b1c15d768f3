"""The inbox page's Notifications section in real headless Chromium (docs/doors/inbox-page.md#notifications-feed)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import expect
from tests.browser.test_inbox_page import sign_in
from tests.conftest import ALICE, System

pytestmark = [pytest.mark.timeout(120), pytest.mark.browser]


async def test_the_page_shows_the_feed_newest_first_as_text(page: Any, system: System) -> None:
    """The caller's feed is listed newest first; a notification's text is set as text, never HTML."""
    client = await system.sdk()
    await client.notify_user("first of all")
    evil = "<img src=x onerror=alert(1)> second"
    await client.notify_user(evil, recipient="desk-7")
    await sign_in(page, system)
    rows = page.locator("#feed-list .feed-row .feed-message")
    await expect(rows).to_have_text([evil, "first of all"])
    assert await page.locator("#feed-list img").count() == 0
    await expect(page.locator("#feed-count")).to_have_text("2")
    assert page.dialogs == []


async def test_a_user_sees_only_its_own_feed(page: Any, system: System) -> None:
    """A user's page lists its own feed: not the shared one."""
    operator = await system.sdk()
    await operator.notify_user("for everyone")
    alice = await system.sdk(ALICE)
    await alice.notify_user("for alice")
    await sign_in(page, system, ALICE)
    await expect(page.locator("#feed-list .feed-message")).to_have_text(["for alice"])
