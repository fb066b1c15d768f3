"""The running doors against their OpenAPI document (docs/doors/common.md#the-openapi-document).

The document is read from the live door (``/schema/openapi.json``) and schemathesis generates
requests from it — valid ones, and ones that break the document — for every operation, as an
operator, as a ``user`` and without a token. Every response must be in the document: no 5xx, and a
documented status, content type, body and headers. Generated ids only ever find nothing, so each
operation with an id is fuzzed again on live ones: seeded questions (text, confirm, addressed to
alice, external, verifier-bound external, with an inline image) and a run. The SSE stream never
ends, so it is fuzzed only where it answers and closes (without a token) and its 200 is checked by
one bounded request. A stateful run follows the document's links (list → answer, runs → run).

schemathesis calls the doors synchronously, so it runs in a worker thread while this test's event
loop serves the doors. Hypothesis is derandomized (no database, no shrinking) and every example
count is small, so the file is deterministic and bounded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import hypothesis.errors
import jsonschema
import msgspec
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from layby.sdk import connect
from layby_services.door.openapi import document
from layby_services.door.routes import inbox
from tests.conftest import ALICE, OPERATOR, System
from tests.helpers import eventually

pytestmark = [
    pytest.mark.integration,
    pytest.mark.settings(webhook_secrets="payments:whsec_conformance_0123456789"),
]

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
STREAM = "/api/interactions/stream"
MESSAGES_STREAM = "/api/messages/stream"
STREAMS = (STREAM, MESSAGES_STREAM)
"""A granted stream never ends: fuzzed only without a token (a 401 that closes)."""
PNG_URI = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


@pytest.fixture(autouse=True)
def short_list_catch_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated ``after`` is mostly a stream position the projection never reaches: the list
    waits out its bounded catch-up, then answers as it stands (docs/doors/list.md). The answer is
    the same after a shorter wait, so here the bound is 0.1 s instead of 2 s (the door runs in
    this process); every other request is unchanged."""
    monkeypatch.setattr(inbox, "CATCH_UP_SECONDS", 0.1)


def _settings(max_examples: int, **extra: Any) -> hypothesis.settings:
    return hypothesis.settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        **extra,
    )


def _auth(token: str | None) -> dict[str, str] | None:
    return {"Authorization": f"Bearer {token}"} if token else None


def _load(system: System) -> Any:
    schema = schemathesis.openapi.from_url(f"{system.url}/schema/openapi.json", timeout=10)
    schema.validate()
    return schema


def _operations(system: System, skip: tuple[str, ...]) -> list[Any]:
    """Every operation of the live door's document but those on a path in ``skip``."""
    operations = (result.ok() for result in _load(system).get_all_operations())
    return [operation for operation in operations if operation.path not in skip]


@dataclass
class Seeded:
    """Live things for generated requests to hit, and the asks that keep them pending."""

    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    live: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """Operation path → path parameters naming live things."""

    async def settle(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _seed(system: System, spare: int = 0) -> Seeded:
    """``spare``: that many more text questions for everyone and for alice, so answering along
    the links never empties a list (an emptied list would change what the state machine draws
    from one scenario to the next, which Hypothesis refuses as an inconsistent strategy)."""
    settings = msgspec.structs.replace(system.settings, public_base_url=system.url)
    client = await connect(nats_url=settings.nats_url, token=OPERATOR, settings=settings)
    system.clients.append(client)
    link = "https://pay.example/?cb={callback_url}"
    asks = {
        "text": client.ask_user("Deploy?", timeout=60),
        "confirm": client.ask_user("Ship it?", answer_format="confirm", timeout=60),
        "alice": client.ask_user("For alice", audience="alice", timeout=60),
        "image": client.ask_user("Look?", media=[{"kind": "image", "url": PNG_URI}], timeout=60),
        "external": client.ask_user("Pay", answer_format="external", link=link, timeout=60),
        "verified": client.ask_user(
            "Pay (signed)",
            answer_format="external",
            link=link,
            verifier={"name": "stripe", "config": {"secret": "payments"}},
            timeout=60,
        ),
    }
    for n in range(spare):
        asks[f"spare {n}"] = client.ask_user(f"Spare {n}?", timeout=60)
        asks[f"spare alice {n}"] = client.ask_user(f"Spare {n} for alice?", audience="alice", timeout=60)
    seeded = Seeded(tasks=[asyncio.create_task(ask) for ask in asks.values()])
    run_id = await client.start_run("nightly", {"n": 1})
    async with system.http() as http:

        async def seeded_items() -> tuple[list[Any], list[Any]]:
            items = (await http.get("/api/interactions", params={"pageSize": 200})).json()["data"]["items"]
            runs = (await http.get("/api/runs")).json()["data"]["items"]
            return items, runs

        items, _ = await eventually(
            seeded_items,
            "the seeded questions and run",
            until=lambda found: len(found[0]) == len(asks) and found[1],
        )
        # A question asked over HTTP and answered: its outcome door answers at once, whatever the
        # wait (a pending one would hold a poll for LAYBY_HTTP_POLL_MAX_WAIT_SECONDS).
        asked = (await http.post("/api/asks", json={"question": "Outcome?", "timeout": 60})).json()["data"]
        outcome_id = asked["interaction_id"]
        answered = await http.post(f"/api/interactions/{outcome_id}/answer", json={"answer": "done"})
        assert answered.status_code == 200, answered.text
    by_question = {item["question"]: item for item in items}
    tickets = [by_question[q]["format_payload"]["url"].rpartition("/")[2] for q in ("Pay", "Pay (signed)")]
    [image] = by_question["Look?"]["media"]
    seeded.live = {
        "/api/interactions/{interaction_id}/answer": [
            {"interaction_id": by_question[q]["interaction_id"]}
            for q in ("Deploy?", "Ship it?", "For alice", "Pay")
        ],
        "/api/interactions/callback/{ticket}": [{"ticket": t} for t in tickets],
        "/api/interactions/media/{media_id}": [{"media_id": image["url"].rpartition("/")[2]}],
        "/api/runs/{run_id}": [{"run_id": run_id}],
        "/api/runs/{run_id}/timeline": [{"run_id": run_id}],
        "/api/doctor/probe/{nonce}": [{"nonce": "0123456789abcdef" * 2}],
        "/api/interactions/{interaction_id}/outcome": [{"interaction_id": outcome_id}],
        "/api/hooks/{name}": [{"name": "no-such-hook"}],
        "/api/conversations/{subject}/messages": [{"subject": "support:42"}],
        "/api/subjects/{subject}/parked": [{"subject": "support:42"}],
    }
    return seeded


def _fuzz(
    system: System, token: str | None, live: dict[str, list[dict[str, str]]], *, skip: tuple[str, ...]
) -> list[str]:
    """Every operation but ``skip``, with valid and invalid input: 20 generated requests each,
    then 8 on each live path. Returns every failing operation's report (one failure each)."""
    headers = _auth(token)
    failures: list[str] = []
    with requests.Session() as session:
        for operation in _operations(system, skip):
            runs = [(None, 20)] + [(pinned, 8) for pinned in live.get(operation.path, [])]
            for pinned, examples in runs:
                # Invalid input first, while the live questions are still pending.
                for mode in (GenerationMode.NEGATIVE, GenerationMode.POSITIVE):
                    strategy = operation.as_strategy(generation_mode=mode, path_parameters=pinned)

                    @_settings(examples)
                    @hypothesis.given(case=strategy)
                    def call(case: schemathesis.Case[Any]) -> None:
                        case.call_and_validate(
                            base_url=system.url, session=session, headers=headers, checks=CHECKS, timeout=10
                        )

                    try:
                        call()
                    except hypothesis.errors.Unsatisfiable:
                        assert mode is GenerationMode.NEGATIVE  # nothing to break: no input at all
                    except (Exception, FailureGroup) as exc:  # every failing operation is reported
                        where = f" on {pinned}" if pinned else ""
                        failures.append(f"{operation.label}{where} ({mode.value} data): {exc}")
    return failures


@pytest.mark.parametrize("token", [OPERATOR, ALICE, None], ids=["operator", "user", "anonymous"])
async def test_every_door_answers_as_documented(system: System, token: str | None) -> None:
    """Generated requests (valid and invalid) on every operation, on unknown and on live ids: no
    5xx, and every status, content type, body and header is the document's. Without a token the
    stream answers 401 and closes, so it is fuzzed too."""
    seeded = await _seed(system)
    try:
        skip = STREAMS if token else ()
        failures = await asyncio.to_thread(_fuzz, system, token, seeded.live, skip=skip)
    finally:
        await seeded.settle()
    assert not failures, "\n\n".join(failures)


STATEFUL_EXAMPLES = 15
STATEFUL_STEPS = 6


def _stateful(system: System, token: str) -> set[tuple[str, int]]:
    """Scenarios along the links; returns every (operation, status) seen."""
    # The doors without links (the HTTP asks, a run's start) are fuzzed by the stateless test;
    # left in, they would take the scenarios' few steps away from the links.
    schema = (
        _load(system)
        .exclude(path=list(STREAMS))
        .exclude(operation_id=["ask", "getOutcome", "withdrawInteraction", "startRun"])
    )
    headers = _auth(token)
    session = requests.Session()
    seen: set[tuple[str, int]] = set()

    class Conformance(schema.as_state_machine()):  # type: ignore[misc]
        def after_call(self, response: schemathesis.Response, case: schemathesis.Case[Any]) -> None:
            super().after_call(response, case)
            seen.add((case.operation.label, response.status_code))

        def get_call_kwargs(self, case: schemathesis.Case[Any]) -> dict[str, Any]:
            return {"base_url": system.url, "session": session, "headers": headers, "timeout": 10}

        def before_call(self, case: schemathesis.Case[Any]) -> None:
            # The list's filters narrow it (to nothing, mostly, with generated values): the links
            # are exercised on the whole list; the filters are fuzzed by the stateless test.
            if case.operation.path == "/api/interactions" and case.query:
                for name in ("q", "format", "group", "origin"):
                    case.query.pop(name, None)
            super().before_call(case)

        def validate_response(
            self,
            response: schemathesis.Response,
            case: schemathesis.Case[Any],
            additional_checks: Any = None,
            **kwargs: Any,
        ) -> None:
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    try:
        Conformance.run(settings=_settings(STATEFUL_EXAMPLES, stateful_step_count=STATEFUL_STEPS))
    finally:
        session.close()
    return seen


@pytest.mark.parametrize("token", [OPERATOR, ALICE], ids=["operator", "user"])
async def test_linked_calls_answer_as_documented(system: System, token: str) -> None:
    """Stateful: the document's links (list → answer, runs → run) followed over seeded questions
    and a run; every response along the way is documented. A generated id only ever finds
    nothing, so an answer other than 401/404 on an id proves a link delivered a live one."""
    seeded = await _seed(system, spare=STATEFUL_EXAMPLES * STATEFUL_STEPS // 2)
    try:
        seen = await asyncio.to_thread(_stateful, system, token)
    finally:
        await seeded.settle()
    answered = {status for label, status in seen if label.endswith("/answer")}
    assert answered - {401, 404}, seen
    if token == OPERATOR:  # the seeded run is the operator's: a user's run list is empty
        assert ("GET /api/runs/{run_id}", 200) in seen, seen


async def test_the_served_document_is_openapi_3_1_and_conforms_to_itself(system: System) -> None:
    """``/schema/openapi.json`` serves ``document()``, a valid OpenAPI 3.1 document, and its own
    response is as that document says (schemathesis leaves the document's own path out)."""

    def check() -> None:
        schema = schemathesis.openapi.from_dict(document())
        schema.validate()
        case = schema["/schema/openapi.json"]["GET"].Case()
        response = case.call_and_validate(base_url=system.url, checks=CHECKS, timeout=10)
        assert response.json() == json.loads(json.dumps(document()))

    await asyncio.to_thread(check)


def _refusals(system: System) -> None:
    schema = _load(system)
    operator = {"Authorization": f"Bearer {OPERATOR}"}

    def call(path: str, method: str, status: int, checks: list[Any] = CHECKS, **kwargs: Any) -> None:
        headers = {**operator, **kwargs.pop("headers", {})}
        case = schema[path][method].Case(**kwargs)
        response = case.call_and_validate(base_url=system.url, headers=headers, checks=checks, timeout=10)
        assert response.status_code == status, response.text

    many = {f"X-Filler-{i}": "x" for i in range(system.settings.http_max_headers + 1)}
    call("/api/runs", "GET", 431, headers=many)
    call("/api/runs", "GET", 413, query={"status": "x" * (system.settings.max_body_bytes + 1)})
    call(
        "/api/interactions/{interaction_id}/answer",
        "POST",
        413,
        path_parameters={"interaction_id": "x"},
        body={"answer": "x" * system.settings.max_body_bytes},
        media_type="application/json",
    )
    # The one stream this door may serve is open: the next is a documented 503, not a failure.
    call(STREAM, "GET", 503, checks=CHECKS[1:])
    ticket = {"ticket": "t" * 43}
    for _ in range(25):  # 10 per 10 s window; a window may roll over once on the way
        case = schema["/api/interactions/callback/{ticket}"]["POST"].Case(path_parameters=ticket)
        response = case.call_and_validate(base_url=system.url, checks=CHECKS, timeout=10)
        if response.status_code == 429:
            break
        assert response.status_code == 404
    else:
        raise AssertionError("the callback door never answered 429")


@pytest.mark.settings(rate_limits=True, sse_max_clients=1)
async def test_refusals_before_any_door_are_as_documented(system: System) -> None:
    """What the connection and the middleware send before any door runs — 431, 413 (query and
    body), 429 with Retry-After — and the stream's 503 past its capacity are the document's."""
    async with system.http() as http, http.stream("GET", STREAM) as resp:
        assert resp.status_code == 200
        await asyncio.to_thread(_refusals, system)


def _frames(lines: list[str]) -> Iterator[tuple[str, Any]]:
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event is not None:
            yield event, json.loads(line.removeprefix("data: "))
            event = None


async def test_the_stream_answers_as_documented(system: System) -> None:
    """One bounded stream request: its status, content type and headers are the document's, and
    its ``interaction.add`` frame is a PendingQuestion."""
    doc = document()
    documented = doc["paths"][STREAM]["get"]["responses"]["200"]
    schemas = doc["components"]["schemas"]
    item_schema = {**schemas["PendingQuestion"], "components": doc["components"]}
    client = await system.sdk(OPERATOR)
    lines: list[str] = []
    async with system.http() as http, http.stream("GET", STREAM) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].split(";")[0] in documented["content"]
        for name, header in documented["headers"].items():
            jsonschema.validate(resp.headers[name], header["schema"])
        task = asyncio.create_task(
            client.ask_user("Streamed?", media=[{"kind": "image", "url": PNG_URI}], timeout=60)
        )
        async with asyncio.timeout(10):
            async for line in resp.aiter_lines():
                lines.append(line)
                if line.startswith("data: "):
                    break
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    [(event, data)] = list(_frames(lines))
    assert event == "interaction.add"
    jsonschema.validate(data, item_schema)


HOSTILE = [
    "\x00",
    "a\x00b",
    "",
    " ",
    "x" * 5000,
    "-1",
    "0",
    "1.5",
    "1e3",
    "99999999999999999999999",
    "abc",
    "null",
    "\u202e\U0001f600",
    "%00",
    "'; DROP TABLE runs; --",
]
"""Values no generator is sure to draw: a NUL character (PostgreSQL cannot store one), empty,
over-long, out of range, not a number, a lookalike of null, bidi and astral characters, SQL."""


def _every_query_parameter(
    system: System, token: str | None, live: dict[str, list[dict[str, str]]]
) -> list[str]:
    headers = _auth(token)
    failures: list[str] = []
    with requests.Session() as session:
        for operation in _operations(system, STREAMS if token else ()):  # a granted stream never ends
            names = [p.name for p in operation.iter_parameters() if p.location.value == "query"]
            for name in names:
                for value in HOSTILE:
                    pinned = live.get(operation.path, [None])[0]
                    case = operation.Case(query={name: value}, path_parameters=pinned)
                    try:
                        response = case.call_and_validate(
                            base_url=system.url, session=session, headers=headers, checks=CHECKS, timeout=10
                        )
                    except (Exception, FailureGroup) as exc:
                        failures.append(f"{operation.label} ?{name}={value[:20]!r}: {exc}")
                        continue
                    if response.status_code >= 500:
                        failures.append(f"{operation.label} ?{name}={value[:20]!r}: {response.status_code}")
    return failures


@pytest.mark.parametrize("token", [OPERATOR, None], ids=["operator", "anonymous"])
async def test_every_query_parameter_of_every_door_answers_as_documented(
    system: System, token: str | None
) -> None:
    """Every query parameter the document lists, on every door, gets hostile values (a NUL
    character, empty, over-long, out of range, not a number, SQL): never a 5xx, and every answer
    is the document's — a value outside a parameter's type is the door's documented 400."""
    seeded = await _seed(system)
    try:
        failures = await asyncio.to_thread(_every_query_parameter, system, token, seeded.live)
    finally:
        await seeded.settle()
    assert not failures, "\n\n".join(failures)


async def test_an_undocumented_method_is_a_405_naming_the_documented_ones(system: System) -> None:
    """Every path of the document answers a method it does not list with 405 and an ``Allow``
    header naming every method it does list (RFC 9110)."""
    doc = document()
    async with system.http() as http:
        for template, operations in doc["paths"].items():
            path = template.replace("{", "").replace("}", "")
            documented = {m.upper() for m in operations}
            for method in {"GET", "POST", "PUT", "PATCH", "DELETE", "TRACE"} - documented:
                resp = await http.request(method, path)
                assert resp.status_code == 405, (method, path, resp.status_code)
                assert documented <= {m.strip() for m in resp.headers["allow"].split(",")}, (method, path)
