"""The inbox web page in real headless Chromium, driven by Playwright.

Debian's Chromium (`/usr/bin/chromium`); nothing downloads a browser. The page is served by the
door of the in-process system; questions are asked through the SDK like any asker would.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from tests.browser.conftest import expect
from tests.conftest import OPERATOR, System, _serve_door

pytestmark = [pytest.mark.timeout(120), pytest.mark.browser]


async def sign_in(page: Any, system: System, token: str = OPERATOR) -> None:
    await page.goto(system.url + "/")
    await page.fill("#token", token)
    await page.press("#token", "Enter")
    await page.wait_for_selector("#inbox:not([hidden])")
    await expect(page.locator("#status")).to_have_text("Live")


def row(page: Any, question: str) -> Any:
    """A question's row in the list (only rows in sight are in the document)."""
    return page.locator("#rows .row", has=page.locator(".rq", has_text=question))


async def open_card(page: Any, question: str) -> Any:
    """Open a question (click its row) and return it as shown in the detail pane."""
    await row(page, question).click()
    c = page.locator("#detail article.card", has=page.locator(".question", has_text=question))
    await c.wait_for()
    return c


async def test_sign_in_refuses_a_bad_token_and_keeps_the_token_in_the_session_only(
    page: Any, system: System
) -> None:
    page.allow_error(r"401 .*/api/interactions\?page=1&pageSize=1")  # the refused token
    await page.goto(system.url + "/inbox")
    await page.fill("#token", "not-a-token-at-all-1234")
    await page.press("#token", "Enter")
    await page.wait_for_selector("#sign-in-error:not([hidden])")
    assert await page.text_content("#sign-in-error") == "That token was refused."
    await sign_in(page, system)
    assert await page.evaluate("sessionStorage.getItem('layby.token')") == OPERATOR
    assert await page.evaluate("localStorage.length") == 0
    await page.reload()
    await page.wait_for_selector("#inbox:not([hidden])")  # still signed in within the tab


async def test_a_question_asked_by_the_sdk_appears_live_and_each_format_is_answered(
    page: Any, system: System
) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    text = asyncio.create_task(client.ask_user("Your name?", options=["Ada", "Grace"], timeout=30))
    await open_card(page, "Your name?")
    await (await open_card(page, "Your name?")).get_by_role("button", name="Grace").click()
    assert await asyncio.wait_for(text, 10) == "Grace"

    typed = asyncio.create_task(client.ask_user("Free text?", timeout=30))
    await (await open_card(page, "Free text?")).get_by_label("Your answer").fill("typed by hand")
    await (await open_card(page, "Free text?")).get_by_role("button", name="Answer").click()
    assert await asyncio.wait_for(typed, 10) == "typed by hand"

    confirm = asyncio.create_task(client.ask_user("Ship it?", answer_format="confirm", timeout=30))
    await (await open_card(page, "Ship it?")).get_by_role("button", name="No").click()
    assert await asyncio.wait_for(confirm, 10) is False

    select = asyncio.create_task(
        client.ask_user("Region?", answer_format="select", options=["eu", "us"], timeout=30)
    )
    await (await open_card(page, "Region?")).get_by_label("us").check()
    await (await open_card(page, "Region?")).get_by_role("button", name="Answer").click()
    assert await asyncio.wait_for(select, 10) == "us"

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "count": {"type": "integer", "title": "Count", "default": 2},
            "size": {"type": "string", "enum": ["S", "M", "L"], "title": "Size"},
            "gift": {"type": "boolean", "title": "Gift wrap"},
        },
        "required": ["name", "size"],
    }
    form = asyncio.create_task(client.ask_user("Order?", answer_format="form", schema=schema, timeout=30))
    c = await open_card(page, "Order?")
    await c.get_by_label("Name (required)").fill("Ada")
    assert await c.get_by_label("Count").input_value() == "2"
    await c.get_by_label("Size (required)").select_option(label="M")
    await c.get_by_label("Gift wrap").check()
    await c.get_by_role("button", name="Answer").click()
    assert await asyncio.wait_for(form, 10) == {"name": "Ada", "count": 2, "size": "M", "gift": True}
    await c.locator(".outcome", has_text="Answered by you").wait_for()


async def test_a_validation_error_is_shown_at_the_field_it_names(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    schema = {
        "type": "object",
        "properties": {"age": {"type": "integer", "minimum": 18, "title": "Age"}},
        "required": ["age"],
    }
    ask = asyncio.create_task(client.ask_user("How old?", answer_format="form", schema=schema, timeout=30))
    c = await open_card(page, "How old?")
    await c.get_by_label("Age (required)").fill("5")
    await c.get_by_role("button", name="Answer").click()
    error = c.locator('.field[data-field="age"] .field-error')
    await error.wait_for()
    assert "18" in (await error.text_content() or "")
    assert await c.get_by_label("Age (required)").get_attribute("aria-invalid") == "true"
    await c.get_by_label("Age (required)").fill("21")
    await c.get_by_role("button", name="Answer").click()
    assert await asyncio.wait_for(ask, 10) == {"age": 21}


async def test_a_card_answered_from_the_cli_updates_live(
    page: Any, system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    from layby import cli

    await sign_in(page, system)
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("Elsewhere?", timeout=30))
    c = await open_card(page, "Elsewhere?")
    await c.wait_for()
    iid = await c.get_attribute("data-id")
    monkeypatch.setenv("LAYBY_URL", system.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    assert await asyncio.to_thread(cli.main, ["interactions", "answer", str(iid), "--answer", '"cli"']) == 0
    await c.locator(".outcome", has_text="Answered elsewhere").wait_for()
    assert await c.get_by_role("button", name="Answer").is_disabled()
    assert await asyncio.wait_for(ask, 10) == "cli"


async def test_the_page_survives_a_door_restart_and_catches_up_with_last_event_id(
    page: Any, system: System
) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("Across a restart?", timeout=60))
    c = await open_card(page, "Across a restart?")
    await c.wait_for()
    iid = await c.get_attribute("data-id")
    # While the door is down, the stream's reads fail (cut off, then refused) until it is back.
    page.allow_error(r"Failed to load resource: net::ERR_[A-Z_]+ .*/api/interactions/stream")
    await system.stop_service("door")
    await expect(page.locator("#status")).not_to_have_text("Live")
    # Answered while the door is down (through the log directly, as another door would).
    from layby.connection import connect_nats
    from layby_contracts.events import InteractionAnswered, InteractionAsked
    from layby_server.store.eventstore import EventStore

    nc = await connect_nats(str(system.settings.nats_url), name="test")
    try:
        store = EventStore(nc, system.settings.names)
        last = await store.last(store.names.ix(str(iid)))
        assert last is not None and isinstance(last.event, InteractionAsked)
        asked = last.event
        from datetime import UTC, datetime

        await store.append(
            store.names.ix(str(iid)),
            InteractionAnswered(
                interaction_id=asked.interaction_id,
                group_id=asked.group_id,
                answered_by="ops",
                answered_at=datetime.now(UTC),
                answer="while down",
                waiter=asked.waiter,
            ),
            msg_id=f"answered-{iid}",
            expected_seq=last.seq,
        )
    finally:
        await nc.close()
    system.stops["door"] = asyncio.Event()
    system.tasks["door"] = asyncio.create_task(_serve_door(system.settings, system.stops["door"], _clock()))
    await c.locator(".outcome", has_text="Answered elsewhere").wait_for(timeout=30000)
    await expect(page.locator("#status")).to_have_text("Live", timeout=30000)
    assert await asyncio.wait_for(ask, 15) == "while down"


def _clock() -> Any:
    from layby_domain.clock import SystemClock

    return SystemClock()


async def test_question_text_is_rendered_as_text_never_as_html(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    evil = "<img src=x onerror=alert(1)>"
    ask = asyncio.create_task(client.ask_user(evil, timeout=30))
    c = await open_card(page, evil)
    await c.wait_for()
    assert await c.locator(".question").text_content() == evil
    assert await c.locator(".question img").count() == 0
    # A time window, on purpose: an injected onerror would fire within it; nothing may appear.
    await asyncio.sleep(0.3)
    assert page.dialogs == []
    ask.cancel()


async def test_every_control_is_reachable_by_keyboard(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("Keyboard?", answer_format="confirm", timeout=30))
    c = await open_card(page, "Keyboard?")
    await c.wait_for()
    for _ in range(10):
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement && document.activeElement.textContent") == "Yes":
            break
    else:
        raise AssertionError("the Yes button was never focused by Tab")
    await page.keyboard.press("Enter")
    assert await asyncio.wait_for(ask, 10) is True


async def _inject(system: System, **fields: Any) -> str:
    """Append an Asked event straight to the log, as a future ask (media, per-send form data)
    will: the page must render whatever a valid add frame carries."""
    import uuid
    from datetime import UTC, datetime, timedelta

    from layby.connection import connect_nats
    from layby_contracts.events import InteractionAsked
    from layby_server.store.eventstore import EventStore

    iid = str(uuid.uuid4())
    now = datetime.now(UTC)
    event = InteractionAsked(
        interaction_id=iid,
        group_id=str(uuid.uuid4()),
        created_at=now,
        timeout_at=now + timedelta(minutes=10),
        asked_by="ops",
        **fields,
    )
    nc = await connect_nats(str(system.settings.nats_url), name="test-inject")
    try:
        store = EventStore(nc, system.settings.names)
        await store.append(store.names.ix(iid), event, msg_id=f"asked-{iid}", expected_seq=0)
    finally:
        await nc.close()
    return iid


PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk"
    "YAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


async def test_media_renders_above_the_controls_with_captions_as_labels(page: Any, system: System) -> None:
    from layby_contracts.events import MediaItem

    await sign_in(page, system)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    await _inject(
        system,
        question="Approve this design?",
        answer_format="confirm",
        media=[
            MediaItem(kind="image", url=PIXEL, caption="The new logo"),
            MediaItem(
                kind="document", url="/api/interactions/media/doc-1", caption="Spec", filename="spec.pdf"
            ),
            MediaItem(kind="link", url="https://example.com/pr/1", caption="The pull request"),
        ],
    )
    c = await open_card(page, "Approve this design?")
    await c.wait_for()
    assert await c.get_by_role("img", name="The new logo").count() == 1
    assert await c.get_by_role("link", name="Spec").get_attribute("download") == "spec.pdf"
    link = c.get_by_role("link", name="The pull request")
    assert await link.get_attribute("rel") == "noopener noreferrer"
    media_y = (await c.locator(".media").bounding_box())["y"]
    controls_y = (await c.locator(".controls").bounding_box())["y"]
    assert media_y < controls_y
    # The page itself talks to the door only (no fonts, scripts or trackers from elsewhere).
    assert all(u.startswith((system.url, "data:")) for u in requests), requests


async def test_a_form_with_pages_prefill_and_per_send_options_reads_as_steps(
    page: Any, system: System
) -> None:
    await sign_in(page, system)
    schema = {
        "type": "object",
        "properties": {
            "count": {"type": "integer", "title": "Count"},
            "date": {"type": "string", "title": "Date"},
            "note": {"type": "string", "title": "Note"},
        },
        "required": ["count", "date"],
    }
    payload = {
        "schema": schema,
        "data": {
            "values": {"count": 3},
            "options": {"date": [{"value": "2030-01-01", "label": "New Year"}, {"value": "2030-02-01"}]},
        },
        "pages": [{"title": "How many", "fields": ["count"]}, {"title": "When", "fields": ["date", "note"]}],
    }
    client = await system.sdk()
    ask = asyncio.create_task(
        client.ask_user(
            "Book it?",
            answer_format="form",
            schema=schema,
            data=payload["data"],
            pages=payload["pages"],
            timeout=30,
        )
    )
    c = await open_card(page, "Book it?")
    await c.wait_for()
    assert await c.get_by_label("Count (required)").input_value() == "3"
    assert not await c.get_by_label("Date (required)").is_visible()
    await c.get_by_role("button", name="Next").click()
    assert await c.get_by_label("Date (required)").is_visible()
    assert await c.get_by_label("Date (required)").locator("option").all_text_contents() == [
        "—",
        "New Year",
        "2030-02-01",
    ]
    await c.get_by_label("Date (required)").select_option(label="New Year")
    await c.get_by_role("button", name="Answer").click()
    await c.locator(".outcome", has_text="Answered by you").wait_for()
    assert await asyncio.wait_for(ask, 10) == {"count": 3, "date": "2030-01-01"}


async def test_a_form_field_with_per_send_options_accepts_the_option_picked_by_its_label(
    page: Any, system: System
) -> None:
    """A form answer is checked against the effective schema (docs/asking.md#effective-schema): a
    field offers this send's labelled options, and the one picked is sent even when the stored
    schema's enum does not list it."""
    await sign_in(page, system)
    schema = {
        "type": "object",
        "properties": {"tier": {"type": "string", "title": "Tier", "enum": ["gold", "silver"]}},
        "required": ["tier"],
    }
    options = [{"value": "platinum", "label": "Platinum"}, {"value": "gold", "label": "Gold"}]
    client = await system.sdk()
    ask = asyncio.create_task(
        client.ask_user(
            "Which tier?",
            answer_format="form",
            schema=schema,
            data={"options": {"tier": options}},
            timeout=30,
        )
    )
    c = await open_card(page, "Which tier?")
    tier = c.get_by_label("Tier (required)")
    assert await tier.locator("option").all_text_contents() == ["—", "Platinum", "Gold"]
    await tier.select_option(label="Platinum")
    await c.get_by_role("button", name="Answer").click()
    await c.locator(".outcome", has_text="Answered by you").wait_for()
    assert await asyncio.wait_for(ask, 10) == {"tier": "platinum"}


async def shown_in_order(page: Any) -> list[str]:
    """The list as a person reads it, top to bottom: group headers and questions (rows in the
    document are positioned, not kept in order)."""
    return list(
        await page.locator("#rows-inner > *").evaluate_all(
            """nodes => nodes
              .map((n) => [n.getBoundingClientRect().top, (n.querySelector(".gname") || n.querySelector(".rq")).textContent])
              .sort((a, b) => a[0] - b[0])
              .map((pair) => pair[1])"""
        )
    )


async def test_grouped_the_group_with_the_newest_question_comes_first(page: Any, system: System) -> None:
    """The default grouped view puts the group with the most recent question at the top, its
    questions in the order they were asked (docs/doors/inbox-page.md#layout)."""
    await sign_in(page, system)
    client = await system.sdk()
    asks = []
    for question, group in [
        ("Old deploy?", "deploy"),
        ("Billing one?", "billing"),
        ("Billing two?", "billing"),
    ]:
        asks.append(asyncio.create_task(client.ask_user(question, group_id=group, timeout=60)))
        await row(page, question).wait_for()
    assert await shown_in_order(page) == [
        "Group billing",
        "Billing one?",
        "Billing two?",
        "Old deploy?",
    ]
    asks.append(asyncio.create_task(client.ask_user("New deploy?", group_id="deploy", timeout=60)))
    await row(page, "New deploy?").wait_for()
    assert await shown_in_order(page) == [
        "Group deploy",
        "Old deploy?",
        "New deploy?",
        "Group billing",
        "Billing one?",
        "Billing two?",
    ]
    for task in asks:
        task.cancel()


@pytest.mark.page(viewport={"width": 375, "height": 740}, is_mobile=True)
async def test_the_page_is_readable_on_a_phone(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    ask = asyncio.create_task(
        client.ask_user("A rather long question " * 8, answer_format="confirm", timeout=30)
    )
    await page.locator("article.card").first.wait_for()
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375, f"the page scrolls sideways ({width}px)"
    ask.cancel()


async def test_every_pending_question_loads_past_the_first_page_and_only_rows_in_sight_are_rendered(
    page: Any, system: System
) -> None:
    from tests.helpers import wait_total

    client = await system.sdk()
    asks = [asyncio.create_task(client.ask_user(f"Bulk {i}?", timeout=60)) for i in range(203)]
    await wait_total(system, 203)
    await sign_in(page, system)
    await expect(page.locator("#count")).to_have_text("(203 open)")
    assert await page.locator("#rows .row").count() < 100  # virtualized
    await page.locator("#sort").select_option("oldest")
    # Scrolled to the end, as a person does again when the next page is slow to come.
    for attempt in range(6):
        await page.locator("#rows").evaluate("r => { r.scrollTop = r.scrollHeight; }")
        try:
            await row(page, "Bulk 202?").wait_for(timeout=5000)  # from the second page
            break
        except PlaywrightTimeoutError:
            if attempt == 5:
                raise
    await page.fill("#search", "bulk 201")
    await expect(page.locator("#rows .row")).to_have_count(1)
    await expect(page.locator("#shown")).to_have_text("1 match")
    for task in asks:
        task.cancel()


async def test_a_question_recorded_while_the_stream_is_held_back_still_appears(
    page: Any, system: System
) -> None:
    """The sign-in race (docs/doors/list.md#seeding-the-stream): the list is loaded, the stream
    request is held back while a question is recorded, then let through; the question appears and
    the count is exact."""
    from tests.helpers import wait_total

    held = asyncio.Event()
    release = asyncio.Event()

    async def hold(route: Any) -> None:
        held.set()
        await release.wait()
        await route.continue_()

    await page.route("**/api/interactions/stream*", hold)
    await page.goto(system.url + "/")
    await page.fill("#token", OPERATOR)
    await page.press("#token", "Enter")
    await page.wait_for_selector("#inbox:not([hidden])")
    await asyncio.wait_for(held.wait(), 10)
    assert await page.text_content("#count") == "(0 open)"
    client = await system.sdk()
    ask = asyncio.create_task(client.ask_user("Recorded in the gap?", timeout=60))
    await wait_total(system, 1)
    release.set()
    await open_card(page, "Recorded in the gap?")
    await expect(page.locator("#status")).to_have_text("Live")
    assert await page.text_content("#count") == "(1 open)"
    ask.cancel()


async def test_the_open_count_is_exact_through_asks_answers_and_removals(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    asks = [asyncio.create_task(client.ask_user(f"Count {i}?", timeout=60)) for i in range(3)]
    for i in range(3):
        await open_card(page, f"Count {i}?")
    await expect(page.locator("#count")).to_have_text("(3 open)")
    assert await page.title() == "(3) Layby inbox"
    async with system.http() as http:
        for i in range(2):
            iid = await row(page, f"Count {i}?").get_attribute("data-id")
            assert (
                await http.post(f"/api/interactions/{iid}/answer", json={"answer": "x"})
            ).status_code == 200
    await expect(page.locator("#count")).to_have_text("(1 open)")
    asks[2].cancel()  # the asker gives up: its question is removed
    await expect(page.locator("#count")).to_have_text("(0 open)")
    assert await page.title() == "Layby inbox"
    await page.reload()
    await expect(page.locator("#status")).to_have_text("Live")
    assert await page.text_content("#count") == "(0 open)"


async def test_keyboard_shortcuts_move_answer_and_explain_themselves(page: Any, system: System) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    yes_no = asyncio.create_task(client.ask_user("Ship by keyboard?", answer_format="confirm", timeout=60))
    await open_card(page, "Ship by keyboard?")
    pick = asyncio.create_task(
        client.ask_user("Which region?", answer_format="select", options=["eu", "us", "ap"], timeout=60)
    )
    await open_card(page, "Which region?")
    await page.evaluate("document.activeElement && document.activeElement.blur()")
    await page.keyboard.press("?")
    await expect(page.locator("#shortcuts")).to_be_visible()
    await page.keyboard.press("?")
    await expect(page.locator("#shortcuts")).to_be_hidden()
    await page.keyboard.press("j")
    first = page.locator("#rows .row[aria-selected=true] .rq")
    await expect(first).to_have_count(1)
    if await first.text_content() == "Which region?":
        await page.keyboard.press("2")
        assert await asyncio.wait_for(pick, 10) == "us"
        await page.keyboard.press("j")
        await page.keyboard.press("y")
        assert await asyncio.wait_for(yes_no, 10) is True
    else:
        await page.keyboard.press("y")
        assert await asyncio.wait_for(yes_no, 10) is True
        await page.keyboard.press("j")
        await page.keyboard.press("2")
        assert await asyncio.wait_for(pick, 10) == "us"
    await expect(page.locator("#count")).to_have_text("(0 open)")


async def test_form_rules_are_checked_at_the_field_in_plain_words_before_sending(
    page: Any, system: System
) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name"},
            "code": {"type": "string", "title": "Code", "pattern": "^[A-Z]{3}$"},
            "count": {"type": "integer", "title": "Count", "maximum": 10},
        },
        "required": ["name", "code"],
    }
    ask = asyncio.create_task(client.ask_user("Fill in?", answer_format="form", schema=schema, timeout=30))
    c = await open_card(page, "Fill in?")
    send = c.get_by_role("button", name="Answer")

    async def error_at(field: str) -> str:
        err = c.locator(f'.field[data-field="{field}"] .field-error')
        await err.wait_for()
        return await err.text_content() or ""

    await send.click()
    assert await error_at("name") == "Enter Name."
    assert await c.get_by_label("Name (required)").get_attribute("aria-invalid") == "true"
    await c.get_by_label("Name (required)").fill("Ada")
    await c.get_by_label("Code (required)").fill("ab1")
    await send.click()
    message = await error_at("code")
    assert message == "Code is not in the expected form." and "^" not in message
    await c.get_by_label("Code (required)").fill("ABC")
    await c.get_by_label("Count").fill("11")
    await send.click()
    assert await error_at("count") == "Count must be at most 10."
    await c.get_by_label("Count").fill("3")
    await send.click()
    assert await asyncio.wait_for(ask, 10) == {"name": "Ada", "code": "ABC", "count": 3}


async def test_every_other_shortcut_opens_sends_searches_and_moves_back(page: Any, system: System) -> None:
    """Enter opens the controls, Ctrl+Enter sends a form, n answers No, k moves up, / goes to the
    search and Escape back to the list (docs/doors/inbox-page.md#keyboard)."""
    await sign_in(page, system)
    client = await system.sdk()
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Name"}},
        "required": ["name"],
    }
    no = asyncio.create_task(client.ask_user("Say no by keyboard?", answer_format="confirm", timeout=60))
    await row(page, "Say no by keyboard?").wait_for()
    form = asyncio.create_task(
        client.ask_user("Name by keyboard?", answer_format="form", schema=schema, timeout=60)
    )
    await row(page, "Name by keyboard?").wait_for()
    await row(page, "Say no by keyboard?").click()  # the second row: the newest question's group is first
    await page.keyboard.press("k")  # up to the form
    selected = page.locator("#rows .row[aria-selected=true] .rq")
    await expect(selected).to_have_text("Name by keyboard?")
    await page.keyboard.press("Enter")
    name = page.locator("#detail").get_by_label("Name (required)")
    await expect(name).to_be_focused()
    await page.keyboard.type("Ada")
    await page.keyboard.press("Control+Enter")
    assert await asyncio.wait_for(form, 10) == {"name": "Ada"}
    await page.keyboard.press("Escape")
    await expect(page.locator("#rows")).to_be_focused()
    await page.keyboard.press("j")
    await expect(selected).to_have_text("Say no by keyboard?")
    await page.keyboard.press("n")
    assert await asyncio.wait_for(no, 10) is False
    await page.keyboard.press("/")
    await expect(page.locator("#search")).to_be_focused()
    await page.keyboard.type("jk")  # typed into the search, not taken for shortcuts
    assert await page.input_value("#search") == "jk"


async def test_search_and_filters_cover_questions_not_loaded_yet(page: Any, system: System) -> None:
    """While the background load is held back, a search still finds a question past the first page:
    the page asks the list door, whose answer covers every pending question."""
    from tests.helpers import wait_total

    client = await system.sdk()
    asks = [asyncio.create_task(client.ask_user(f"Filler {i}?", timeout=60)) for i in range(200)]
    await wait_total(system, 200)
    asks.append(
        asyncio.create_task(
            client.ask_user("The needle in the haystack?", answer_format="confirm", timeout=60)
        )
    )
    await wait_total(system, 201)

    async def hold_later_pages(route: Any) -> None:
        if "page=2&" in route.request.url:
            return  # never answered: the load stays incomplete
        await route.continue_()

    await page.route("**/api/interactions?*", hold_later_pages)
    await sign_in(page, system)
    await expect(page.locator("#count")).to_have_text("(201 open)")
    assert await row(page, "The needle in the haystack?").count() == 0  # not loaded
    await page.fill("#search", "needle")
    await row(page, "The needle in the haystack?").wait_for()
    await expect(page.locator("#shown")).to_have_text("1 match")
    await page.fill("#search", "")
    await page.select_option("#filter-format", "confirm")
    await expect(page.locator("#shown")).to_have_text("1 match")
    for task in asks:
        task.cancel()


async def test_the_done_list_shows_the_answer_who_when_and_where(
    page: Any, system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    from layby import cli

    await sign_in(page, system)
    client = await system.sdk()
    here = asyncio.create_task(client.ask_user("Answered here?", answer_format="confirm", timeout=60))
    there = asyncio.create_task(client.ask_user("Answered from the CLI?", timeout=60))
    c = await open_card(page, "Answered here?")
    await c.get_by_role("button", name="Yes").click()
    assert await asyncio.wait_for(here, 10) is True
    iid = await row(page, "Answered from the CLI?").get_attribute("data-id")
    monkeypatch.setenv("LAYBY_URL", system.url)
    monkeypatch.setenv("LAYBY_TOKEN", OPERATOR)
    assert (
        await asyncio.to_thread(cli.main, ["interactions", "answer", str(iid), "--answer", '"by cli"']) == 0
    )
    assert await asyncio.wait_for(there, 10) == "by cli"
    await expect(page.locator("#rows .row")).to_have_count(0)
    await page.locator("#tab-done").click()
    cli_row = page.locator("#done-list li", has_text="Answered from the CLI?")
    await expect(cli_row).to_contain_text("by cli")
    await expect(cli_row).to_contain_text("from the CLI")
    await expect(cli_row.locator("time")).to_have_count(1)
    here_row = page.locator("#done-list li", has_text="Answered here?")
    await expect(here_row).to_contain_text("Yes")
    await expect(here_row).to_contain_text("in the inbox")
    await expect(page.locator("#tab-done")).to_have_text("Done (2)")
    await expect(page.locator("#done-list .deadline")).to_have_count(0)  # no countdown


async def test_a_new_question_notifies_only_when_asked_for_and_the_tab_is_in_the_background(
    page: Any, system: System
) -> None:
    # The browser's notification and visibility, observed: what the page shows, not a real popup.
    await page.context.add_init_script(
        """
        window.__shown = [];
        window.__hidden = false;
        Object.defineProperty(document, "hidden", { get: () => window.__hidden });
        window.Notification = class {
          static permission = "default";
          static async requestPermission() { window.Notification.permission = "granted"; return "granted"; }
          constructor(title, options) { window.__shown.push([title, options.body]); }
          addEventListener() {}
        };
        """
    )
    await sign_in(page, system)
    client = await system.sdk()
    first = asyncio.create_task(client.ask_user("Seen while looking?", timeout=60))
    await row(page, "Seen while looking?").wait_for()
    await page.evaluate("window.__hidden = true")
    second = asyncio.create_task(client.ask_user("Not asked to notify?", timeout=60))
    await row(page, "Not asked to notify?").wait_for()
    assert await page.evaluate("window.__shown") == []  # not turned on
    await page.evaluate("window.__hidden = false")
    await page.get_by_role("button", name="Notify me").click()
    await expect(page.locator("#notify")).to_have_text("Notifications on")
    await page.evaluate("window.__hidden = true")
    third = asyncio.create_task(client.ask_user("Ring the bell?", timeout=60))
    await row(page, "Ring the bell?").wait_for()
    assert await page.evaluate("window.__shown") == [["New question in Layby", "Ring the bell?"]]
    await page.evaluate("window.__hidden = false")
    fourth = asyncio.create_task(client.ask_user("In plain sight?", timeout=60))
    await row(page, "In plain sight?").wait_for()
    assert len(await page.evaluate("window.__shown")) == 1  # the tab is visible: no popup
    for task in (first, second, third, fourth):
        task.cancel()


async def test_the_open_count_goes_down_when_a_park_expires_and_done_says_expired(
    page: Any,
    clocked: System,
    clocked_workers: Any,
    clock: Any,
) -> None:
    """An async park's expiry is an answered frame (answered by the system): the count drops and
    the Done tab says it expired (docs/doors/inbox-page.md#the-open-count)."""
    from datetime import timedelta

    import layby

    def register(w: layby.Worker) -> None:
        @w.flow("lapse")
        async def lapse(_: Any) -> Any:
            return await layby.ask_user(
                "Will anyone answer?",
                answer_format="confirm",
                mode="async",
                expiry_at=clock.now() + timedelta(minutes=10),
            )

    worker = await clocked_workers.new(register)
    await clocked_workers.serve(worker)
    await sign_in(page, clocked)
    await worker.start("lapse")
    await row(page, "Will anyone answer?").wait_for()
    await expect(page.locator("#count")).to_have_text("(1 open)")
    clock.advance(11 * 60)
    await expect(page.locator("#count")).to_have_text("(0 open)", timeout=15000)
    await expect(page.locator("#rows .row")).to_have_count(0)
    await page.locator("#tab-done").click()
    expired = page.locator("#done-list li", has_text="Will anyone answer?")
    await expect(expired).to_contain_text("Expired")


async def test_the_source_filter_keeps_the_questions_from_one_asker_or_for_one_person(
    page: Any, system: System
) -> None:
    await sign_in(page, system)
    client = await system.sdk()
    asks = [
        asyncio.create_task(client.ask_user(f"For {who} {i}?", audience=who, timeout=60))
        for who in ("alice", "bob")
        for i in range(2)
    ]
    await expect(page.locator("#count")).to_have_text("(4 open)")
    await page.select_option("#filter-source", "for bob")
    await expect(page.locator("#rows .row")).to_have_count(2)
    await expect(page.locator("#shown")).to_have_text("2 matches")
    assert set(await page.locator("#rows .row .rq").all_text_contents()) == {"For bob 0?", "For bob 1?"}
    for task in asks:
        task.cancel()
