"""Headless Chromium for the browser tests: Debian's ``/usr/bin/chromium``, driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.integration.test_parks import (  # noqa: F401 - fixtures for browser tests
    clock,
    clocked,
    clocked_workers,
    workers,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HAVE_CHROMIUM = os.path.exists(CHROMIUM)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def expect(locator: Any) -> Any:
    """Playwright's assertions: they poll with selectors, which the page's CSP allows (a string
    predicate for ``wait_for_function`` is evaluated with eval, which it rightly forbids)."""
    from playwright.async_api import expect as pw_expect

    return pw_expect(locator)


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not HAVE_CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium for the browser tests (see .ci/run)")
        pytest.skip("no /usr/bin/chromium: `apt-get install chromium chromium-driver`")
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield b
        finally:
            await b.close()
