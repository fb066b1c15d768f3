"""Benchmark: the inbox page in headless Chromium.

    python bench/inbox_page.py [--pending 10000] [--samples 20]

Starts `layby up`, asks ``--pending`` questions (sync asks that stay open), opens the page in
Debian's Chromium through Playwright, signs in, and reports:

- navigation → the first row usable (its question open beside the list, its controls enabled);
- navigation → every pending question loaded (the count and the list agree);
- a search and a filter over the whole set: from the keystroke to the matching rows shown;
- scrolling the whole list: the longest frame (measured in the page between animation frames);
- ask → the new question's row visible (``--samples`` times, p50 / p99 / max).

The screenshots in docs/ come from ``python docs/screenshots.py``.
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
sys.path.insert(0, str(HERE.parent))
from _http import wait_total
from _up import layby_up, pct, table_head

from layby.sdk import connect
from layby_server.settings import load_settings
from tests.browser.chromium import ARGS, CHROMIUM

# Scroll the list from top to bottom in steps of one screen per animation frame and return the
# longest gap between two frames (ms): what a person scrolling fast would feel.
SCROLL = """async (rows) => {
  rows.scrollTop = 0;
  await new Promise((r) => requestAnimationFrame(r));
  let last = performance.now();
  let longest = 0;
  let frames = 0;
  while (rows.scrollTop + rows.clientHeight < rows.scrollHeight - 1) {
    rows.scrollTop += rows.clientHeight;
    await new Promise((r) => requestAnimationFrame(r));
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    frames += 1;
  }
  return [longest, frames];
}"""


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.async_api import async_playwright, expect

    out: dict[str, Any] = {}
    with layby_up() as up:
        client = await connect(
            nats_url=up.nats_url, token=up.token, settings=load_settings({}, max_concurrent=None)
        )
        formats = ["confirm", "text", "select"]
        waiting = []
        for i in range(args.pending):
            fmt = formats[i % 3]
            waiting.append(
                asyncio.create_task(
                    client.ask_user(
                        f"Pending question {i} about order {i * 7}?",
                        answer_format=fmt,
                        options=["a", "b"] if fmt == "select" else None,
                        group_id=f"batch-{i // 50}",
                        timeout=3600,
                    )
                )
            )
            if i % 500 == 499:
                await asyncio.sleep(0.2)
        await wait_total(up.url, up.token, "/api/interactions?pageSize=1", args.pending, every=0.2)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 800})
            await page.goto(up.url + "/")
            await page.evaluate(f"sessionStorage.setItem('layby.token', {up.token!r})")
            t0 = time.perf_counter()
            await page.reload()
            await page.wait_for_selector("#rows .row")
            await page.wait_for_selector("#detail article.card .controls button:not([disabled])")
            out["first_row_ms"] = (time.perf_counter() - t0) * 1000
            await expect(page.locator("#count")).to_have_text(f"({args.pending} open)", timeout=60000)
            await expect(page.locator("#shown")).to_have_text("", timeout=60000)
            out["all_loaded_ms"] = (time.perf_counter() - t0) * 1000
            out["rows_in_document"] = await page.locator("#rows .row").count()

            t = time.perf_counter()
            await page.fill("#search", "order 6993")  # question 999 (and 9990-9999 when 10,000)
            await expect(page.locator("#shown")).not_to_have_text("")
            out["search_ms"] = (time.perf_counter() - t) * 1000
            out["search_matches"] = await page.text_content("#shown")
            await page.fill("#search", "")
            t = time.perf_counter()
            await page.select_option("#filter-format", "confirm")
            await expect(page.locator("#shown")).to_have_text(f"{(args.pending + 2) // 3} matches")
            out["filter_ms"] = (time.perf_counter() - t) * 1000
            await page.select_option("#filter-format", "")
            await page.select_option("#sort", "newest")
            longest, frames = await page.locator("#rows").evaluate(SCROLL)
            out["longest_frame_ms"], out["scroll_frames"] = longest, frames
            await page.locator("#rows").evaluate("r => { r.scrollTop = 0; }")

            lat = []
            for i in range(args.samples):
                q = f"Fresh question {i}?"
                t = time.perf_counter()
                waiting.append(asyncio.create_task(client.ask_user(q, timeout=3600)))
                await page.locator("#rows .row .rq", has_text=q).wait_for()
                lat.append(time.perf_counter() - t)
                await asyncio.sleep(0.05)
            out["appear_p50"], out["appear_p99"], out["appear_max"] = (
                pct(lat, 0.5),
                pct(lat, 0.99),
                max(lat) * 1000,
            )
            await browser.close()
        for task in waiting:
            task.cancel()
        await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    r = asyncio.run(run(args))
    table_head(f"| measure ({args.pending} pending questions, 1280x800) | value | target |")
    print(f"| navigation → first row usable | {r['first_row_ms']:.0f} ms | < 1,000 ms |")
    print(f"| navigation → every pending question loaded | {r['all_loaded_ms']:.0f} ms | |")
    print(f"| rows in the document (virtualized) | {r['rows_in_document']} | |")
    print(f"| search over all ({r['search_matches']}) | {r['search_ms']:.0f} ms | < 200 ms |")
    print(f"| filter by format over all | {r['filter_ms']:.0f} ms | < 200 ms |")
    print(
        f"| scrolling the whole list, longest frame ({r['scroll_frames']} frames) "
        f"| {r['longest_frame_ms']:.0f} ms | ≤ 50 ms |"
    )
    print(
        f"| ask → row visible, p50 / p99 / max ({args.samples} samples) | "
        f"{r['appear_p50']:.0f} / {r['appear_p99']:.0f} / {r['appear_max']:.0f} ms | < 200 ms |"
    )


if __name__ == "__main__":
    main()
