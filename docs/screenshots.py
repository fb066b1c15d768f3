"""Take the screenshots in README.md and docs/: ``python docs/screenshots.py``.

Starts `layby up` (embedded NATS and PostgreSQL in a temporary data dir), asks a handful of
questions of every format, runs a few flows on a worker in this process (one parked, one failed,
some finished), answers some questions, and photographs each view of the page in Debian's
Chromium through Playwright into docs/images/.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _http import wait_total
from _up import start_up

import layby
from layby.sdk import connect
from layby_server.settings import load_settings

OUT = ROOT / "docs" / "images"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


async def questions(client: Any) -> list[asyncio.Task[Any]]:
    asks = [
        ("Deploy payments v2.14 to production?", {"answer_format": "confirm", "group_id": "release-2.14"}),
        (
            "Which region goes first?",
            {
                "answer_format": "select",
                "options": ["eu-west", "us-east", "ap-south"],
                "group_id": "release-2.14",
            },
        ),
        (
            "Write the release note for v2.14",
            {"options": ["Bug fixes", "Faster inbox"], "group_id": "release-2.14"},
        ),
        (
            "Refund order #4411 (EUR 129.00)?",
            {"answer_format": "confirm", "audience": "alice", "timeout": 240},
        ),
        (
            "Shipping details for the replacement",
            {
                "answer_format": "form",
                "schema": {
                    "type": "object",
                    "required": ["name", "size"],
                    "properties": {
                        "name": {"type": "string", "title": "Name"},
                        "size": {"type": "string", "enum": ["S", "M", "L"], "title": "Size"},
                        "count": {"type": "integer", "title": "Count", "default": 1, "minimum": 1},
                        "gift": {"type": "boolean", "title": "Gift wrap"},
                    },
                },
            },
        ),
        ("Summarise the incident for the status page", {"group_id": "incident-512"}),
        ("Page the database on-call?", {"answer_format": "confirm", "group_id": "incident-512"}),
    ]
    tasks = []
    for question, kwargs in asks:
        kwargs.setdefault("timeout", 3600)
        tasks.append(asyncio.create_task(client.ask_user(question, **kwargs)))
        await asyncio.sleep(0.3)
    return tasks


def flows(worker: layby.Worker) -> None:
    @layby.step(name="reserve-stock", retries=0)
    async def reserve(order: int) -> str:
        return f"R-{order}"

    @worker.flow("refund")
    async def refund(order: int) -> Any:
        await reserve(order)
        deadline = datetime.now(UTC) + timedelta(hours=4)
        return await layby.ask_user(
            f"Approve the refund of order {order}?",
            answer_format="confirm",
            mode="async",
            expiry_at=deadline,
            audience="alice",
        )

    @worker.flow("invoice")
    async def invoice(order: int) -> Any:
        await reserve(order)
        raise RuntimeError(f"the billing system refused order {order}: account suspended")

    @worker.flow("report")
    async def report(n: int) -> int:
        return n * 2


async def main() -> None:
    from playwright.async_api import async_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    up = start_up()
    try:
        settings = load_settings({}, max_concurrent=None)
        client = await connect(nats_url=up.nats_url, token=up.token, settings=settings)
        worker = layby.Worker(client, settings=settings)
        flows(worker)
        stop = asyncio.Event()
        serving = asyncio.create_task(worker.serve(stop))
        await worker.ready.wait()
        for order in (4411, 4412):
            await client.start_run("refund", order)
        await client.start_run("invoice", 4413)
        for n in range(5):
            await client.start_run("report", n)
        tasks = await questions(client)
        await asyncio.sleep(2)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 760})
            await page.goto(up.url + "/")
            await page.fill("#token", up.token)
            await page.press("#token", "Enter")
            await page.wait_for_selector("#rows .row")
            # Answer two, so the done list has something to show.
            for question, key in (("Write the release note", None), ("Page the database", "y")):
                await page.locator("#rows .row", has_text=question).click()
                if key:
                    await page.keyboard.press(key)
                else:
                    await page.locator("#detail").get_by_role("button", name="Faster inbox").click()
                await page.locator("#detail .outcome", has_text="Answered").wait_for()
            await page.locator("#rows .row", has_text="Shipping details").click()
            await page.wait_for_timeout(300)
            await page.screenshot(path=str(OUT / "inbox.png"))
            await page.locator("#tab-done").click()
            await page.wait_for_selector("#done-list li")
            await page.wait_for_timeout(300)
            await page.screenshot(path=str(OUT / "inbox-done.png"))
            await page.locator("#tab-pending").click()
            # Until the failing flow has used up its attempts and its run is failed.
            await wait_total(up.url, up.token, "/api/runs?status=failed&pageSize=1", 1, every=0.2, limit=120)
            await page.goto(up.url + "/#runs")
            await page.locator("#runs button", has_text="failed").first.click()
            await page.wait_for_timeout(800)
            await page.locator("#runs table button").first.click()
            await page.wait_for_timeout(800)
            await page.screenshot(path=str(OUT / "runs.png"), full_page=True)
            phone = await browser.new_page(viewport={"width": 390, "height": 780}, is_mobile=True)
            await phone.goto(up.url + "/")
            await phone.fill("#token", up.token)
            await phone.press("#token", "Enter")
            await phone.wait_for_selector("#rows .row")
            await phone.wait_for_timeout(300)
            await phone.screenshot(path=str(OUT / "inbox-phone.png"))
            await browser.close()
        for task in tasks:
            task.cancel()
        stop.set()
        await serving
        await client.close()
    finally:
        up.stop()
    for name in ("inbox.png", "inbox-done.png", "runs.png", "inbox-phone.png"):
        print(OUT / name)


if __name__ == "__main__":
    asyncio.run(main())
