"""``POST /api/interactions/{id}/answer`` against the running system (docs/doors/answer.md#the-answer-door, docs/doors/common.md#rules-every-door-shares)."""

from __future__ import annotations

import asyncio
import uuid

import jsonschema
import msgspec
import pytest

from tests.conftest import ALICE, BOB, OPERATOR, System
from tests.helpers import eventually, wait_total

pytestmark = pytest.mark.integration


async def open_question(system: System, token: str = OPERATOR, **kwargs: object) -> tuple[asyncio.Task, str]:
    """Ask through the SDK and return the blocked task and the new question's id."""
    async with system.http(OPERATOR) as http:
        known = {
            i["interaction_id"]
            for i in (await http.get("/api/interactions?pageSize=200")).json()["data"]["items"]
        }
    client = await system.sdk(token)
    task = asyncio.create_task(client.ask_user(str(kwargs.pop("question", "Proceed?")), **kwargs))  # type: ignore[arg-type]
    async with system.http(OPERATOR) as http:

        async def new() -> list[str]:
            if task.done():
                task.result()  # the ask failed: say how, now
            items = (await http.get("/api/interactions?pageSize=200")).json()["data"]["items"]
            return [i["interaction_id"] for i in items if i["interaction_id"] not in known]

        listed = await eventually(new, "the new question to be listed", retry=())
    return task, listed[0]


async def test_typed_answers_for_every_in_client_format(system: System) -> None:
    """text -> str, confirm -> bool, select -> option, form -> dict (docs/asking.md#answer-formats)."""
    cases = [
        ({"answer_format": "text"}, "ship it"),
        ({"answer_format": "confirm"}, False),
        ({"answer_format": "select", "options": ["blue", "green"]}, "green"),
        (
            {
                "answer_format": "form",
                "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            },
            {"n": 3},
        ),
    ]
    async with system.http() as http:
        for kwargs, answer in cases:
            task, iid = await open_question(system, timeout=30, **kwargs)
            resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": answer})
            assert resp.status_code == 200, resp.text
            assert await asyncio.wait_for(task, 10) == answer


async def test_form_schema_may_be_a_msgspec_struct(system: System) -> None:
    """ask_user accepts a msgspec Struct type as the form schema and returns a dict (docs/asking.md#schema)."""

    class Approval(msgspec.Struct):
        approved: bool
        note: str = ""

    task, iid = await open_question(system, answer_format="form", schema=Approval, timeout=30)
    async with system.http() as http:
        bad = await http.post(f"/api/interactions/{iid}/answer", json={"answer": {"note": "x"}})
        assert bad.status_code == 400
        assert bad.json() == {"error": "answer does not match schema: 'approved' is a required property"}
        ok = await http.post(f"/api/interactions/{iid}/answer", json={"answer": {"approved": True}})
        assert ok.status_code == 200
    assert await asyncio.wait_for(task, 10) == {"approved": True}


async def test_body_over_65536_actual_bytes_is_413_even_with_a_small_content_length(system: System) -> None:
    """The cap counts actual bytes, never Content-Length (docs/doors/common.md#body-size-cap, docs/doors/answer.md#body)."""
    body = b'{"answer":"' + b"x" * 70000 + b'"}'
    async with system.http() as http:
        resp = await http.post(
            f"/api/interactions/{uuid.uuid4()}/answer",
            content=_chunks(body),
            headers={"Content-Type": "application/json"},
        )
    assert resp.status_code == 413
    assert resp.json() == {"error": "payload too large"}


async def _chunks(body: bytes):  # type: ignore[no-untyped-def]
    for i in range(0, len(body), 8192):
        yield body[i : i + 8192]


async def test_body_of_exactly_65536_bytes_is_read(system: System) -> None:
    """A body at the cap is accepted for parsing (here: an unknown id then answers 404)."""
    prefix, suffix = b'{"answer":"', b'"}'
    body = prefix + b"x" * (65536 - len(prefix) - len(suffix)) + suffix
    assert len(body) == 65536
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{uuid.uuid4()}/answer", content=body)
    assert resp.status_code == 404


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{nope", "invalid JSON body"),
        (b"[1, 2]", "body must contain 'answer'"),
        (b'{"value": 1}', "body must contain 'answer'"),
        (b"", "invalid JSON body"),
        (b'{"answer": true, "answer": false}', "the JSON body repeats a key"),
        (b'{"answer": {"a": 1, "b": {"c": 1, "c": 2}}}', "the JSON body repeats a key"),
    ],
)
async def test_bad_bodies_are_400_before_the_id_is_looked_up(
    system: System, body: bytes, message: str
) -> None:
    """Body checks run before the lookup: an unknown id with a bad body still gets 400 (docs/doors/answer.md#body)."""
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{uuid.uuid4()}/answer", content=body)
    assert resp.status_code == 400
    assert resp.json() == {"error": message}


async def test_deeply_nested_answer_is_400_not_500(system: System) -> None:
    """Deeply nested JSON gives 400, never 500 (docs/doors/common.md#nested-json)."""
    task, iid = await open_question(system, answer_format="form", schema={"type": "object"}, timeout=30)
    nested = b'{"answer":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", content=nested)
        assert resp.status_code == 400
        assert "error" in resp.json()
        assert (await http.post(f"/api/interactions/{iid}/answer", json={"answer": {}})).status_code == 200
    assert await asyncio.wait_for(task, 10) == {}


# The fresh uuid has a fixed test id: pytest-xdist's workers must collect the same names.
@pytest.mark.parametrize(
    "iid", [pytest.param(str(uuid.uuid4()), id="a-fresh-uuid"), "not-a-uuid", "a.b.c", "*", ">"]
)
async def test_unknown_id_is_404(system: System, iid: str) -> None:
    """Unknown ids get 404 'Interaction not found', whatever their shape (docs/doors/answer.md#unknown-questions)."""
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "x"})
    assert resp.status_code == 404
    assert resp.json() == {"error": "Interaction not found"}


async def test_pruned_question_is_404(system: System) -> None:
    """A pruned question answers 404 like an unknown one (docs/doors/answer.md#unknown-questions)."""
    client = await system.sdk()
    from layby import InteractionTimeoutError

    async with system.http() as http:
        task = asyncio.create_task(client.ask_user("Quick?", timeout=0.5))
        data = await wait_total(system, 1)
        iid = data["items"][0]["interaction_id"]
        with pytest.raises(InteractionTimeoutError):
            await task
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "late"})
    assert resp.status_code == 404
    assert resp.json() == {"error": "Interaction not found"}


async def test_second_answer_is_409(system: System) -> None:
    """Already answered: 409 'Interaction already answered' (docs/doors/answer.md#already-answered)."""
    task, iid = await open_question(system, timeout=30)
    async with system.http() as http:
        assert (await http.post(f"/api/interactions/{iid}/answer", json={"answer": "a"})).status_code == 200
        second = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "b"})
    assert second.status_code == 409
    assert second.json() == {"error": "Interaction already answered"}
    assert await asyncio.wait_for(task, 10) == "a"


async def race_two_answers(system: System, iid: str) -> str:
    """POST "first" and "second" at once; exactly one wins (200), the other gets 409."""
    async with system.http() as h1, system.http() as h2:
        r1, r2 = await asyncio.gather(
            h1.post(f"/api/interactions/{iid}/answer", json={"answer": "first"}),
            h2.post(f"/api/interactions/{iid}/answer", json={"answer": "second"}),
        )
    assert sorted([r1.status_code, r2.status_code]) == [200, 409]
    assert (r2 if r1.status_code == 200 else r1).json() == {"error": "Interaction already answered"}
    return "first" if r1.status_code == 200 else "second"


async def test_two_concurrent_answers_give_exactly_one_200_and_one_409(system: System) -> None:
    """The first answer wins in the log; a concurrent second gets 409 (docs/doors/answer.md#already-answered, docs/aggregates/interaction.md#first-resolution-wins)."""
    for _ in range(10):
        task, iid = await open_question(system, timeout=30)
        winner = await race_two_answers(system, iid)
        assert await asyncio.wait_for(task, 10) == winner


async def test_wrong_format_is_400_and_the_question_stays_pending(system: System) -> None:
    """A 400 leaves the question pending and the caller blocked (docs/doors/answer.md#answer-validation)."""
    task, iid = await open_question(system, answer_format="confirm", timeout=30)
    async with system.http() as http:
        bad = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "yes"})
        assert bad.status_code == 400
        assert bad.json() == {"error": "answer must be a boolean"}
        assert not task.done()
        assert (await http.post(f"/api/interactions/{iid}/answer", json={"answer": True})).status_code == 200
    assert await asyncio.wait_for(task, 10) is True


async def test_form_field_error_names_the_field(system: System) -> None:
    """A failing form field is named in the message and in `field` (docs/doors/answer.md#answer-validation)."""
    schema = {"type": "object", "properties": {"count": {"type": "integer", "minimum": 1}}}
    task, iid = await open_question(system, answer_format="form", schema=schema, timeout=30)
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": {"count": 0}})
    assert resp.status_code == 400
    assert resp.json() == {
        "error": "answer does not match schema at count: 0 is less than the minimum of 1",
        "field": "count",
    }
    task.cancel()


async def test_restricted_caller_cannot_answer_an_unaddressed_question(system: System) -> None:
    """Unaddressed question + restricted caller: 403 (docs/doors/answer.md#audience)."""
    task, iid = await open_question(system, timeout=30)
    async with system.http(ALICE) as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "x"})
    assert resp.status_code == 403
    assert resp.json() == {"error": "restricted identities may answer only interactions addressed to them"}
    task.cancel()


async def test_restricted_caller_cannot_answer_another_identitys_question(system: System) -> None:
    """Addressed to another identity: 403 (docs/doors/answer.md#audience)."""
    task, iid = await open_question(system, audience="bob", timeout=30)
    async with system.http(ALICE) as alice, system.http(BOB) as bob:
        resp = await alice.post(f"/api/interactions/{iid}/answer", json={"answer": "x"})
        assert resp.status_code == 403
        assert resp.json() == {"error": "interaction is addressed to another identity"}
        assert (
            await bob.post(f"/api/interactions/{iid}/answer", json={"answer": "bob's"})
        ).status_code == 200
    assert await asyncio.wait_for(task, 10) == "bob's"


async def test_already_answered_409_comes_before_the_audience_403(system: System) -> None:
    """The 409 check runs before the audience gate (docs/doors/answer.md#already-answered, docs/doors/answer.md#order-of-checks)."""
    task, iid = await open_question(system, timeout=30)
    async with system.http() as op, system.http(ALICE) as alice:
        assert (await op.post(f"/api/interactions/{iid}/answer", json={"answer": "x"})).status_code == 200
        resp = await alice.post(f"/api/interactions/{iid}/answer", json={"answer": "y"})
    assert resp.status_code == 409
    await task


async def test_answered_by_is_the_answerers_identity(system: System) -> None:
    """answered_by is the caller's user id (docs/doors/answer.md#success)."""
    task, iid = await open_question(system, audience="bob", timeout=30)
    async with system.http(BOB) as bob:
        assert (await bob.post(f"/api/interactions/{iid}/answer", json={"answer": "ok"})).status_code == 200
    await task
    last = await _last_event(system, iid)
    assert last["answered_by"] == "bob"


async def _last_event(system: System, iid: str) -> dict:
    from layby.connection import connect_nats
    from layby_server.store.eventstore import EventStore

    assert system.settings.nats_url
    nc = await connect_nats(system.settings.nats_url, name="t")
    try:
        got = await EventStore(nc, system.settings.names).last(system.settings.names.ix(iid))
        assert got is not None
        return msgspec.to_builtins(got.event)
    finally:
        await nc.close()


async def test_concurrent_answers_to_a_sensitive_question_wake_the_asker_with_the_winner(
    system: System,
) -> None:
    """A losing concurrent answer never replaces the winning sensitive answer (docs/aggregates/interaction.md#sensitive-answers, docs/doors/answer.md#already-answered)."""
    for _ in range(5):
        task, iid = await open_question(system, sensitive=True, timeout=30)
        winner = await race_two_answers(system, iid)
        assert (await asyncio.wait_for(task, 10)).reveal() == winner


async def test_an_answer_with_a_nul_character_is_400_naming_the_field(system: System) -> None:
    """U+0000 cannot be stored; the answer door refuses it and the question stays pending."""
    task, iid = await open_question(system, answer_format="form", schema={"type": "object"}, timeout=30)
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": {"note": "a\u0000"}})
        assert resp.status_code == 400
        assert resp.json() == {"error": "answer must not contain NUL characters", "field": "note"}
        assert (
            await http.post(f"/api/interactions/{iid}/answer", json={"answer": {"note": "a"}})
        ).status_code == 200
    assert await asyncio.wait_for(task, 10) == {"note": "a"}


async def test_a_null_answer_is_refused_and_the_document_does_not_admit_it(system: System) -> None:
    """No answer format accepts JSON null (docs/doors/answer.md#answer-validation): the door
    refuses it with the format's message, and the OpenAPI document's answer body does not admit it."""
    task, iid = await open_question(system, question="Name?", timeout=30)
    async with system.http() as http:
        resp = await http.post(f"/api/interactions/{iid}/answer", json={"answer": None})
        doc = (await http.get("/schema/openapi.json")).json()
        assert (resp.status_code, resp.json()) == (400, {"error": "answer must be a string"})
        ok = await http.post(f"/api/interactions/{iid}/answer", json={"answer": "Ada"})
        assert ok.status_code == 200
    await task
    body = doc["paths"]["/api/interactions/{interaction_id}/answer"]["post"]["requestBody"]
    schema = {**body["content"]["application/json"]["schema"], "components": doc["components"]}
    jsonschema.validate({"answer": "Ada"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": None}, schema)
