"""The schema-rendered callback form page in real headless Chromium (inventory A17.172-173).

Its one inline script runs under the page's own CSP, collects the controls, coerces numbers and
booleans, omits empty optional fields and POSTs the answer back to the same URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.browser.conftest import expect
from tests.conftest import System
from tests.helpers import pending

pytestmark = [pytest.mark.timeout(120), pytest.mark.browser]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "seats": {"type": "integer", "title": "Seats", "minimum": 1},
        "budget": {"type": "number", "title": "Budget"},
        "note": {"type": "string", "title": "Note"},
        "urgent": {"type": "boolean", "title": "Urgent"},
        "tier": {"type": "string", "title": "Tier", "enum": ["gold", "silver"]},
    },
    "required": ["name", "seats"],
}


@pytest.fixture
async def page(browser: Any, system: System) -> AsyncIterator[Any]:
    context = await browser.new_context()
    p = await context.new_page()
    errors: list[str] = []
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    p.errors = errors
    yield p
    await context.close()


async def test_the_form_page_posts_the_typed_answer_and_shows_done(page: Any, system: System) -> None:
    """inventory A17.173: numbers and booleans are coerced, empty optional fields omitted, and
    the asker wakes with exactly that object; the page then says Done."""
    client = await system.sdk()
    ask, callback = await pending(system, client, "Book a table", answer_format="form", schema=SCHEMA)
    await page.goto(callback)
    await page.fill("#f0", "Ada")
    await page.fill("#f1", "4")
    await page.fill("#f2", "120.5")
    await page.check("#f4")
    await page.select_option("#f5", "silver")
    await page.click("button[type=submit]")
    await expect(page.locator("#s")).to_have_text("Done")
    assert await asyncio.wait_for(ask, 10) == {
        "name": "Ada",
        "seats": 4,
        "budget": 120.5,
        "urgent": True,
        "tier": "silver",
    }
    assert not [e for e in page.errors if "Content Security Policy" in e]


async def test_the_form_page_shows_the_doors_error_and_lets_the_person_correct_it(
    page: Any, system: System
) -> None:
    """inventory A17.173: on 400 the page shows the door's error text; a corrected submit wins."""
    client = await system.sdk()
    ask, callback = await pending(system, client, "Seats?", answer_format="form", schema=SCHEMA)
    await page.goto(callback)
    await page.fill("#f0", "Ada")
    await page.fill("#f1", "0")
    await page.click("button[type=submit]")
    await expect(page.locator("#s")).to_have_text(
        "answer does not match schema at seats: 0 is less than the minimum of 1"
    )
    await page.fill("#f1", "2")
    await page.click("button[type=submit]")
    await expect(page.locator("#s")).to_have_text("Done")
    assert await asyncio.wait_for(ask, 10) == {"name": "Ada", "seats": 2, "urgent": False}
