"""The schema-rendered callback form page in real headless Chromium (docs/doors/callback.md#form-page).

Its one inline script runs under the page's own CSP, collects the controls, coerces numbers and
booleans, omits empty optional fields and POSTs the answer back to the same URL.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.browser.conftest import expect
from tests.channel_plugins import Bridge
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


async def test_the_form_page_posts_the_typed_answer_and_shows_done(
    page: Any, chan: System, bridge: Bridge
) -> None:
    """docs/doors/callback.md#form-page: numbers and booleans are coerced, empty optional fields omitted, and
    the asker wakes with exactly that object; the page then says Done."""
    client = await chan.sdk()
    ask, callback = await pending(chan, client, bridge, "Book a table", answer_format="form", schema=SCHEMA)
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
    page: Any, chan: System, bridge: Bridge
) -> None:
    """docs/doors/callback.md#form-page: on 400 the page shows the door's error text; a corrected submit wins."""
    client = await chan.sdk()
    ask, callback = await pending(chan, client, bridge, "Seats?", answer_format="form", schema=SCHEMA)
    page.allow_error(r"400 .*/api/interactions/callback/.*")  # the refused first submit
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


async def test_properties_named_like_form_members_do_not_break_the_page(
    page: Any, chan: System, bridge: Bridge
) -> None:
    """A form's members can be shadowed by controls named after them; the page's script reaches
    the form through the document only, so such names still submit (and JS-less submits POST)."""
    schema = {
        "type": "object",
        "properties": {"addEventListener": {"type": "string"}, "hidden": {"type": "integer"}},
        "required": ["addEventListener"],
    }
    client = await chan.sdk()
    ask, callback = await pending(chan, client, bridge, "Odd names", answer_format="form", schema=schema)
    await page.goto(callback)
    assert await page.get_attribute("#f", "method") == "post"
    await page.fill("#f0", "yes")
    await page.fill("#f1", "3")
    await page.click("button[type=submit]")
    await expect(page.locator("#s")).to_have_text("Done")
    assert await asyncio.wait_for(ask, 10) == {"addEventListener": "yes", "hidden": 3}
