"""The callback door for channel-delivered text, confirm, select and form questions
(docs/doors/callback.md#channel-delivered-answers, docs/doors/callback.md#the-pages-behind-a-link).

Real services with the built-in ``webhook`` channel posting to a local bridge (the ``chan``
fixture): questions are asked over the channel and answered through the callback URL it delivered.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import httpx

from layby.sdk import Client, SecretValue
from layby_contracts.events import InteractionAnswered
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import Bridge
from tests.conftest import System
from tests.helpers import ASKED, mint, pending, wait_total
from tests.samples import interaction_asked

FORM_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; form-action 'self'"
)
PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'"
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your <b>name</b>"},
        "age": {"type": "integer", "minimum": 18},
        "ratio": {"type": "number"},
        "agree": {"type": "boolean"},
        "tier": {"type": "string", "enum": ["gold", "silver"]},
    },
    "required": ["name", "age", "agree"],
}


async def answered_event(store: EventStore, callback: str) -> InteractionAnswered:
    last = await store.last(store.names.ix(ASKED[callback]))
    assert last is not None and isinstance(last.event, InteractionAnswered)
    return last.event


async def test_an_empty_post_confirms_a_confirm_question_with_true(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/doors/callback.md#channel-delivered-answers: the confirm page's button posts an empty body, which records true."""
    ask, callback = await pending(chan, client, bridge, "Ship it?", answer_format="confirm")
    async with httpx.AsyncClient() as http:
        page = await http.get(callback)
        assert b"<form method=post>" in page.content
        done = await http.post(callback)
        assert done.status_code == 200
        assert done.json()["data"]["status"] == "answered"
        again = await http.post(callback)
        assert again.json() == {"data": {"status": "already_answered"}}
        assert b"already been answered" in (await http.get(callback)).content
    assert await asyncio.wait_for(ask, 10) is True


async def test_text_select_and_form_need_a_json_object_body_with_an_answer(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/doors/callback.md#channel-delivered-answers: empty body, non-object body, a repeated key
    and a missing ``answer`` are 400s with the door's exact messages; query parameters never carry
    the answer; nothing is consumed."""
    ask, callback = await pending(chan, client, bridge, "Your name?", answer_format="text")
    async with httpx.AsyncClient() as http:
        empty = await http.post(callback + "?answer=sneaky")
        assert empty.status_code == 400
        assert empty.json() == {"error": "body must contain 'answer'"}
        assert empty.headers["cache-control"] == "no-store"
        assert empty.headers["x-content-type-options"] == "nosniff"
        listed = await http.post(callback, content=b'["Ada"]')
        assert listed.json() == {"error": "body must be a JSON object"}
        broken = await http.post(callback, content=b"{not json")
        assert broken.json() == {"error": "body must be a JSON object"}
        missing = await http.post(callback, json={"reply": "Ada"})
        assert missing.json() == {"error": "body must contain 'answer'"}
        repeated = await http.post(callback, content=b'{"answer": "Ada", "answer": "Eve"}')
        assert repeated.status_code == 400 and repeated.json() == {"error": "the JSON body repeats a key"}
        wrong_type = await http.post(callback, json={"answer": 7})
        assert wrong_type.status_code == 400 and wrong_type.json() == {"error": "answer must be a string"}
        ok = await http.post(callback, json={"answer": "Ada"})
        assert ok.status_code == 200
    assert await asyncio.wait_for(ask, 10) == "Ada"


async def test_a_select_answer_must_be_one_of_the_options(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/doors/callback.md#channel-delivered-answers / docs/doors/answer.md#answer-validation: the value is validated exactly as at the answer door."""
    ask, callback = await pending(
        chan, client, bridge, "Colour?", answer_format="select", options=["red", "blue"]
    )
    async with httpx.AsyncClient() as http:
        wrong = await http.post(callback, json={"answer": "green"})
        assert wrong.status_code == 400
        assert wrong.json() == {"error": "answer must be one of ['red', 'blue']"}
        assert (await http.post(callback, json={"answer": "blue"})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "blue"


async def test_a_form_answer_mismatch_is_400_naming_the_field_and_a_root_fault_has_no_field(
    chan: System, client: Client, bridge: Bridge, store: EventStore
) -> None:
    """docs/doors/callback.md#channel-delivered-answers: the 400 carries ``field``, the dotted path of the failing form field,
    absent for root-level faults; the typed answer is recorded, by ``external-callback``."""
    ask, callback = await pending(chan, client, bridge, "Sign up", answer_format="form", schema=SCHEMA)
    async with httpx.AsyncClient() as http:
        young = await http.post(callback, json={"answer": {"name": "Ada", "age": 12, "agree": True}})
        assert young.status_code == 400
        assert young.json() == {
            "error": "answer does not match schema at age: 12 is less than the minimum of 18",
            "field": "age",
        }
        root = await http.post(callback, json={"answer": {"name": "Ada"}})
        assert root.status_code == 400 and "field" not in root.json()
        assert root.json()["error"].startswith("answer does not match schema: ")
        not_object = await http.post(callback, json={"answer": "Ada"})
        assert not_object.json() == {"error": "answer must be an object"}
        marker = await http.post(callback, json={"answer": {"layby:interaction_expired": True}})
        assert marker.status_code == 400 and marker.json()["field"] == "layby:interaction_expired"
        answer = {"name": "Ada", "age": 36, "agree": False, "tier": "gold"}
        assert (await http.post(callback, json={"answer": answer})).status_code == 200
    assert await asyncio.wait_for(ask, 10) == answer
    event = await answered_event(store, callback)
    assert event.answered_by == "external-callback" and event.answer == answer


async def test_a_sensitive_channel_answer_is_kept_out_of_the_log(
    chan: System, client: Client, bridge: Bridge, store: EventStore
) -> None:
    """A sensitive question answered through its callback is stored like the answer door stores
    it: the value in its own secret message, never in the answered event."""
    ask, callback = await pending(chan, client, bridge, "PIN?", answer_format="text", sensitive=True)
    async with httpx.AsyncClient() as http:
        assert (await http.post(callback, json={"answer": "4711"})).status_code == 200
    value = await asyncio.wait_for(ask, 10)
    assert isinstance(value, SecretValue) and value.reveal() == "4711"
    event = await answered_event(store, callback)
    assert event.sensitive and event.answer is None and event.secret_ref


async def test_the_form_page_renders_the_schema_with_its_own_csp_and_never_mutates(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/doors/callback.md#form-page: text input, select with a leading blank, checkbox never required,
    integer step 1, number step any, escaped labels, ``required``; the form CSP; GET twice leaves
    the question pending and reflects nothing from the request."""
    ask, callback = await pending(chan, client, bridge, "Sign up <now>", answer_format="form", schema=SCHEMA)
    async with httpx.AsyncClient() as http:
        page = await http.get(callback)
        probed = await http.get(callback + "?name=%3Cscript%3Ealert(1)%3C/script%3E")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == FORM_CSP
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    html = page.text
    assert probed.content == page.content
    assert "Sign up &lt;now&gt;" in html
    assert '<label for=f0>Your &lt;b&gt;name&lt;/b&gt;</label><input type=text id=f0 name="name"' in html
    assert 'name="age" data-kind=integer required' in html and "type=number step=1" in html
    assert "type=number step=any id=f2" in html
    assert '<input type=checkbox id=f3 name="agree" data-kind=boolean>' in html
    assert '<select id=f4 name="tier" data-kind=string><option value="">\u2014</option>' in html
    assert "<script>" in html and "JSON.stringify({answer:a})" in html
    assert not ask.done()
    ask.cancel()


async def test_the_form_page_prefills_values_and_labels_per_send_options(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/asking.md#per-send-form-data-and-pages: ``data.values`` prefill the controls and ``data.options`` label the choices."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "room": {"type": "string"}}}
    ask, callback = await pending(
        chan,
        client,
        bridge,
        "Where?",
        answer_format="form",
        schema=schema,
        data={
            "values": {"city": "Oslo"},
            "options": {"room": [{"value": "r1", "label": "Room <1>"}, {"value": "r2"}]},
        },
        pages=[{"title": "Place", "fields": ["city"]}, {"title": "Room", "fields": ["room"]}],
    )
    async with httpx.AsyncClient() as http:
        html = (await http.get(callback)).text
    assert 'name="city" data-kind=string value="Oslo"' in html
    assert '<option value="r1">Room &lt;1&gt;</option><option value="r2">r2</option>' in html
    assert "<fieldset><legend>Place</legend>" in html and "<fieldset><legend>Room</legend>" in html
    ask.cancel()


async def test_a_form_schema_outside_the_renderable_subset_is_a_500_not_half_a_page(
    chan: System, store: EventStore
) -> None:
    """docs/doors/callback.md#unrenderable-schema: a stored channel form whose schema cannot be rendered (written before
    the ask-time subset check, say) gets a plain 500 text, never half a page."""
    now = datetime.now(UTC)
    asked = interaction_asked(
        str(uuid.uuid4()),
        now,
        group_id=str(uuid.uuid4()),
        question="Address?",
        answer_format="form",
        format_payload={"schema": {"type": "object", "properties": {"address": {"type": "object"}}}},
        timeout_at=now + timedelta(minutes=5),
        channel="ops",
    )
    await store.append(
        store.names.ix(asked.interaction_id), asked, msg_id=asked.interaction_id, expected_seq=0
    )
    callback = await mint(chan, store, asked.interaction_id)
    async with httpx.AsyncClient() as http:
        resp = await http.get(callback)
    assert resp.status_code == 500
    assert resp.content == b"Internal Server Error"
    assert resp.headers["content-type"].startswith("text/plain")
    assert resp.headers["cache-control"] == "no-store"


async def test_a_ticket_bound_to_an_inbox_question_reaches_nothing(
    chan: System, client: Client, store: EventStore
) -> None:
    """Only external and channel questions have tickets: a ticket somehow bound to an inbox
    question (an attacker who guessed a park's id, say) gets the uniform 404 on every door."""
    ask = asyncio.create_task(client.ask_user("Inbox only?", timeout=30))
    items = (await wait_total(chan, 1))["items"]
    callback = await mint(chan, store, items[0]["interaction_id"])
    base = callback.rsplit("/", 1)[0]
    async with httpx.AsyncClient() as http:
        posted = await http.post(callback, json={"answer": "forged"})
        unknown = await http.post(f"{base}/{'U' * 43}", json={"answer": "forged"})
        page = await http.get(callback)
    assert posted.status_code == 404 and posted.content == unknown.content
    assert page.status_code == 404 and page.content == b"Not Found"
    assert not ask.done()
    ask.cancel()


async def test_text_and_select_get_the_byte_constant_awaiting_page_with_no_form(
    chan: System, client: Client, bridge: Bridge
) -> None:
    """docs/doors/callback.md#constant-pages: the awaiting page is identical across tickets and requests."""
    first, one = await pending(chan, client, bridge, "Why?", answer_format="text")
    second, two = await pending(chan, client, bridge, "Which?", answer_format="select", options=["a", "b"])
    async with httpx.AsyncClient() as http:
        a = await http.get(one)
        b = await http.get(two + "?q=%3Cb%3E")
    assert a.status_code == b.status_code == 200
    assert a.content == b.content and b"Awaiting your reply" in a.content and b"<form" not in a.content
    assert a.headers["content-security-policy"] == PAGE_CSP
    assert not first.done() and not second.done()
    first.cancel()
    second.cancel()
