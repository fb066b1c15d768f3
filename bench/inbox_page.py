"""Benchmark: the inbox page in headless Chromium (issue 5, "How fast").

    python bench/inbox_page.py [--pending 1000] [--samples 20] [--screenshot docs/inbox.png]

Starts `layby up`, asks ``--pending`` questions (sync asks that stay open), opens the page in
Debian's Chromium through Playwright, signs in, and reports: the time from navigation to the
first page of cards rendered and interactive, and how long a newly asked question takes to
appear as a card (``--samples`` times). With ``--screenshot`` it saves an image of the inbox
holding a few questions of each format.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _up import pct, start_up

from layby.sdk import connect
from layby_server.settings import load_settings

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.async_api import async_playwright, expect

    up = start_up()
    out: dict[str, Any] = {}
    try:
        client = await connect(
            nats_url=up.nats_url, token=up.token, settings=load_settings({}, max_concurrent=None)
        )
        waiting = [
            asyncio.create_task(client.ask_user(f"Pending question {i}?", timeout=3600))
            for i in range(args.pending)
        ]
        await asyncio.sleep(3 + args.pending / 300)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = await browser.new_page(viewport={"width": 1000, "height": 900})
            await page.goto(up.url + "/")
            await page.evaluate(f"sessionStorage.setItem('layby.token', {up.token!r})")
            t0 = time.perf_counter()
            await page.reload()
            await page.wait_for_selector("article.card button")
            await expect(page.locator("#status")).to_have_text("Live")
            out["interactive_ms"] = (time.perf_counter() - t0) * 1000
            out["cards"] = await page.locator("article.card").count()
            lat = []
            for i in range(args.samples):
                q = f"Fresh question {i}?"
                t = time.perf_counter()
                waiting.append(asyncio.create_task(client.ask_user(q, timeout=3600)))
                await page.wait_for_selector(f"article.card >> text={q}")
                lat.append(time.perf_counter() - t)
                await asyncio.sleep(0.05)
            out["appear_p50"], out["appear_p99"], out["appear_max"] = (
                pct(lat, 0.5),
                pct(lat, 0.99),
                max(lat) * 1000,
            )
            if args.screenshot:
                for task in waiting:
                    task.cancel()
                await asyncio.sleep(2)
                examples = [
                    client.ask_user("Deploy v2.1 to production?", answer_format="confirm", timeout=3600),
                    client.ask_user(
                        "Which region first?",
                        answer_format="select",
                        options=["eu-west", "us-east", "ap-south"],
                        timeout=3600,
                    ),
                    client.ask_user(
                        "What should the release note say?",
                        options=["Bug fixes", "New inbox page"],
                        timeout=3600,
                    ),
                    client.ask_user(
                        "Shipping details",
                        answer_format="form",
                        timeout=3600,
                        schema={
                            "type": "object",
                            "required": ["name", "size"],
                            "properties": {
                                "name": {"type": "string", "title": "Name"},
                                "size": {"type": "string", "enum": ["S", "M", "L"], "title": "Size"},
                                "count": {"type": "integer", "title": "Count", "default": 1},
                                "gift": {"type": "boolean", "title": "Gift wrap"},
                            },
                        },
                    ),
                ]
                shown = [asyncio.create_task(e) for e in examples]
                await page.reload()
                await page.wait_for_selector("text=Shipping details")
                await page.wait_for_timeout(500)
                await page.screenshot(path=args.screenshot, full_page=True)
                for task in shown:
                    task.cancel()
            await browser.close()
        for task in waiting:
            task.cancel()
        await client.close()
    finally:
        up.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    r = asyncio.run(run(args))
    print()
    print(f"| measure ({args.pending} pending questions) | value |")
    print("|---|---:|")
    print(
        f"| navigation → first page of cards interactive and live "
        f"| {r['interactive_ms']:.0f} ms ({r['cards']} cards) |"
    )
    print(
        f"| ask → card visible, p50 / p99 / max ({args.samples} samples) | "
        f"{r['appear_p50']:.0f} / {r['appear_p99']:.0f} / {r['appear_max']:.0f} ms |"
    )


if __name__ == "__main__":
    main()
