"""Headless Chromium for the browser tests: Debian's ``/usr/bin/chromium``, driven by Playwright.

Every browser test uses the one ``page`` fixture: a page in a fresh browser context that fails the
test on any script error, console error or Content-Security-Policy violation, dialog, and on any
response the page is refused (4xx or 5xx). A test that means to provoke one says so with
``page.allow_error(pattern)`` (a regular expression the whole recorded line must match).
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest

from tests.browser.chromium import ARGS, CHROMIUM, HAVE_CHROMIUM
from tests.integration.test_parks import (  # noqa: F401 - fixtures for browser tests
    clock,
    clocked,
    clocked_workers,
    workers,
)


def expect(locator: Any) -> Any:
    """Playwright's assertions: they poll with selectors, which the page's CSP allows (a string
    predicate for ``wait_for_function`` is evaluated with eval, which it rightly forbids)."""
    from playwright.async_api import expect as pw_expect

    return pw_expect(locator)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    """One Chromium per worker process; each test gets a fresh context of it (``page``), which
    shares no cookies, storage, permissions or cache with any other."""
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


@pytest.fixture
async def page(browser: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A page in its own context (options from ``@pytest.mark.page(...)``, e.g. a phone's
    viewport); what went wrong on it is checked as soon as the test body returns."""
    marker = request.node.get_closest_marker("page")
    context = await browser.new_context(**(marker.kwargs if marker else {}))
    p = await context.new_page()
    errors: list[str] = []
    allowed: list[re.Pattern[str]] = []
    dialogs: list[str] = []
    p.on("pageerror", lambda e: errors.append(f"script error: {e}"))
    p.on("console", lambda m: errors.append(_console_line(m)) if _counts(m) else None)
    p.on("response", lambda r: errors.append(f"{r.status} {r.url}") if _refused(r) else None)

    async def on_dialog(dialog: Any) -> None:
        # The page never opens a dialog: one is a script the page should not have run.
        dialogs.append(dialog.message)
        errors.append(f"dialog: {dialog.message}")
        await dialog.dismiss()

    p.on("dialog", on_dialog)
    p.errors = errors
    p.dialogs = dialogs
    p.allow_error = lambda pattern: allowed.append(re.compile(pattern))
    p.allowed_errors = allowed
    try:
        yield p
    finally:
        await context.close()


def _counts(message: Any) -> bool:
    # A refused request is logged too; it is recorded once, by _refused, as "<status> <url>".
    refused = message.text.startswith("Failed to load resource: the server responded with a status")
    return bool(message.type == "error" and not refused)


def _console_line(message: Any) -> str:
    # A request that never got an answer (e.g. the door is down) names its address.
    if message.text.startswith("Failed to load resource"):
        return f"{message.text} {message.location.get('url', '')}"
    return str(message.text)


def _refused(response: Any) -> bool:
    return bool(response.status >= 400 and not response.url.endswith("/favicon.ico"))


def unexpected_errors(page: Any) -> list[str]:
    """What went wrong on the page that the test did not say it provokes."""
    return [e for e in page.errors if not any(p.fullmatch(e) for p in page.allowed_errors)]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Judge the page when the test body returns, before any fixture (a server) is torn down."""
    result = yield
    page = getattr(item, "funcargs", {}).get("page")
    if page is not None and (problems := unexpected_errors(page)):
        pytest.fail(f"the page logged errors (script, console, CSP or a refused request): {problems}")
    return result
