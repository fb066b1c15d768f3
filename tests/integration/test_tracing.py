"""Traces across the services: one ask, its answer and its wake (or resume) are one trace
(docs/tracing.md). Real NATS and PostgreSQL, the five services in this process, spans kept by an
in-memory exporter installed as Layby's tracer."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import msgspec
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import layby
from layby_contracts.commands import REPLY_DECODER, Accepted, Ask
from layby_contracts.events import InteractionAnswered, encode_event
from layby_domain.clock import ManualClock
from layby_server.observability import tracing
from layby_server.settings import Settings, load_settings
from layby_server.store.eventstore import EventStore
from tests.conftest import OPERATOR, System, start_system, stop_system
from tests.helpers import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

BROWSER_TRACE, BROWSER_SPAN = "c" * 32, "d" * 16
MALFORMED = "00-this-is-not-a-trace-context-01"
UNTRACED_ASKS = ("delivery interaction.asked.v1", "resume interaction.asked.v1")


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """Layby traces into memory for this test (and stops tracing after it)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.exporter = exporter  # type: ignore[attr-defined]
    tracing.install(provider)
    yield provider
    tracing.uninstall()
    provider.shutdown()


def finished(provider: TracerProvider) -> list[ReadableSpan]:
    return list(provider.exporter.get_finished_spans())  # type: ignore[attr-defined]


async def wait_spans(provider: TracerProvider, *wanted: tuple[str, str]) -> dict[str, ReadableSpan]:
    """The first finished span of each (name, interaction or run id) pair, once all exist."""

    def found() -> dict[str, ReadableSpan] | None:
        out: dict[str, ReadableSpan] = {}
        for name, key in wanted:
            for span in finished(provider):
                attributes = span.attributes or {}
                ids = (attributes.get("layby.interaction_id"), attributes.get("layby.run_id"))
                if span.name == name and key in ids:
                    out[name] = span
                    break
        return out if len(out) == len(wanted) else None

    spans = await eventually(found, f"the spans {[name for name, _ in wanted]}")
    assert spans is not None
    return spans


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


async def listed(system: System) -> str:
    async with system.http() as http:
        data = await eventually(
            lambda: http.get("/api/interactions"),
            "a pending question",
            until=lambda r: r.json()["data"]["total"] >= 1,
        )
    return str(data.json()["data"]["items"][0]["interaction_id"])


async def answer(system: System, interaction_id: str, value: Any, **headers: str) -> int:
    async with system.http() as http:
        r = await http.post(
            f"/api/interactions/{interaction_id}/answer", json={"answer": value}, headers=headers
        )
        return r.status_code


async def test_a_sync_ask_its_answer_and_its_wake_are_one_trace(
    provider: TracerProvider, system: System
) -> None:
    """The asker's span is the parent of the ask service's, whose asked event is the parent of the
    door's answer span, whose answered event is the parent of the resume service's wake span — one
    trace; a trace the answering client sent is linked (docs/tracing.md#one-trace-per-question)."""
    client = await system.sdk()
    agent = provider.get_tracer("the-agent")
    with agent.start_as_current_span("agent asks") as root:
        task = asyncio.create_task(client.ask_user("Deploy?", answer_format="confirm", timeout=30))
    ix = await listed(system)
    assert await answer(system, ix, True, traceparent=f"00-{BROWSER_TRACE}-{BROWSER_SPAN}-01") == 200
    assert await asyncio.wait_for(task, 10) is True

    spans = await wait_spans(
        provider,
        ("ask cmd.ask.v1", ix),
        ("door answer", ix),
        ("resume interaction.answered.v1", ix),
    )
    ask, door, wake = spans["ask cmd.ask.v1"], spans["door answer"], spans["resume interaction.answered.v1"]
    the_trace = root.get_span_context().trace_id
    assert {trace_id(span) for span in spans.values()} == {the_trace}
    assert parent_of(ask) == root.get_span_context().span_id
    assert parent_of(door) == span_id(ask)
    assert parent_of(wake) == span_id(door)
    assert door.attributes is not None
    assert door.attributes["layby.answer_format"] == "confirm"
    assert door.attributes["layby.answered_via"] == "api"
    assert wake.attributes is not None
    assert wake.attributes["layby.stream.seq"] > 0
    # Services that had nothing to do with an inbox question's ask made no span for it.
    assert not [s for s in finished(provider) if s.name in UNTRACED_ASKS]
    # The answer's request makes no span of its own; the trace its client sent is a link.
    assert [(f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}") for link in door.links] == [
        (BROWSER_TRACE, BROWSER_SPAN)
    ]
    assert not [s for s in finished(provider) if s.name.startswith("POST ")]
    # The projector makes no span: the read models are no step of the question's path.
    assert not [s for s in finished(provider) if s.name.startswith("projector ")]


async def test_a_park_its_answer_and_its_resume_are_one_trace(
    provider: TracerProvider, system: System, db: asyncpg.Pool
) -> None:
    """A run started inside a span stays in that trace through its park, the person's answer, the
    resume and the resumed execution's end (docs/tracing.md#one-trace-per-question)."""
    worker = layby.Worker(await system.sdk(), settings=system.settings)

    @worker.flow("approve")
    async def approve(order: dict[str, Any]) -> dict[str, Any]:
        ok = await layby.ask_user(
            f"Ship order {order['id']}?",
            answer_format="confirm",
            mode="async",
            expiry_at=datetime.now(UTC) + timedelta(hours=1),
        )
        return {"shipped": ok}

    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        await asyncio.wait_for(worker.ready.wait(), 15)
        agent = provider.get_tracer("the-agent")
        with agent.start_as_current_span("agent starts a run") as root:
            run_id = await worker.start("approve", {"id": 7})
        row = await eventually(
            lambda: db.fetchrow("SELECT status, asks FROM runs WHERE run_id = $1", run_id),
            "the run to park",
            until=lambda row: row is not None and row["status"] == "parked",
        )
        [ix] = [a["interaction_id"] for a in json.loads(row["asks"])]
        assert await answer(system, ix, True) == 200
        await eventually(
            lambda: db.fetchval("SELECT status FROM runs WHERE run_id = $1", run_id),
            "the run to finish",
            until=lambda status: status == "finished",
        )
        spans = await wait_spans(
            provider,
            ("ask cmd.run.start.v1", run_id),
            ("ask cmd.ask.v1", ix),
            ("ask cmd.run.park.v1", run_id),
            ("door answer", ix),
            ("resume interaction.answered.v1", ix),
            ("ask cmd.run.end.v1", run_id),
        )
    finally:
        stop.set()
        await asyncio.wait_for(serving, 15)
    assert {trace_id(span) for span in spans.values()} == {root.get_span_context().trace_id}
    assert parent_of(spans["ask cmd.run.start.v1"]) == root.get_span_context().span_id
    assert parent_of(spans["door answer"]) == span_id(spans["ask cmd.ask.v1"])
    resume = spans["resume interaction.answered.v1"]
    assert parent_of(resume) == span_id(spans["door answer"])
    assert resume.attributes is not None
    assert resume.attributes["layby.run_id"] == run_id
    # The resumed execution runs in the context its continuation was published under.
    [resumed_by] = [
        s
        for s in finished(provider)
        if s.name == "resume interaction.answered.v1" and span_id(s) == parent_of(spans["ask cmd.run.end.v1"])
    ]
    assert resumed_by is resume


async def test_a_parks_expiry_starts_a_trace_that_its_resume_continues(
    provider: TracerProvider, settings: Settings, store: EventStore, db: asyncpg.Pool
) -> None:
    """The sweeper's expiry of a park is a span of its own, and the resume it causes — through to
    the resumed execution's end — continues that trace (docs/tracing.md#the-spans)."""
    clock = ManualClock(datetime.now(UTC))
    system = await start_system(settings, clock)
    worker = layby.Worker(await system.sdk(), settings=system.settings)

    @worker.flow("wait")
    async def wait(_: Any) -> Any:
        return await layby.ask_user(
            "Still there?", mode="async", expiry_at=clock.now() + timedelta(minutes=10)
        )

    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        await asyncio.wait_for(worker.ready.wait(), 15)
        run_id = await worker.start("wait")
        row = await eventually(
            lambda: db.fetchrow("SELECT status, asks FROM runs WHERE run_id = $1", run_id),
            "the run to park",
            until=lambda row: row is not None and row["status"] == "parked",
        )
        [ix] = [a["interaction_id"] for a in json.loads(row["asks"])]
        clock.advance(11 * 60)
        spans = await wait_spans(
            provider,
            ("sweeper expire", ix),
            ("resume interaction.answered.v1", ix),
            ("ask cmd.run.end.v1", run_id),
        )
    finally:
        stop.set()
        await asyncio.wait_for(serving, 15)
        await stop_system(system)
    expire, resume = spans["sweeper expire"], spans["resume interaction.answered.v1"]
    assert expire.parent is None
    assert {trace_id(span) for span in spans.values()} == {trace_id(expire)}
    assert parent_of(resume) == span_id(expire)
    assert expire.attributes is not None
    assert expire.attributes["layby.run_id"] == run_id


async def test_tracing_is_off_unless_configured_and_then_adds_no_span_and_no_header(
    system: System, store: EventStore
) -> None:
    """With no tracing settings nothing is traced: no span, and events carry exactly the headers
    they carried before tracing existed (docs/tracing.md#turning-it-on)."""
    assert load_settings({}).tracing is False
    assert not tracing.enabled()
    client = await system.sdk()
    task = asyncio.create_task(client.ask_user("Deploy?", answer_format="confirm", timeout=30))
    ix = await listed(system)
    assert await answer(system, ix, True, traceparent=f"00-{'1' * 32}-{'2' * 16}-01") == 200
    assert await asyncio.wait_for(task, 10) is True
    subject = store.names.ix(ix)
    asked = await store.js.get_msg(store.names.events_stream, seq=1, subject=subject, next=True)
    answered = await store.js.get_last_msg(store.names.events_stream, subject)
    assert asked.headers == {"Nats-Msg-Id": f"asked-{ix}", "Nats-Expected-Last-Subject-Sequence": "0"}
    assert answered.headers is not None
    assert set(answered.headers) == {"Nats-Msg-Id", "Nats-Expected-Last-Subject-Sequence"}


async def test_a_malformed_traceparent_starts_a_new_trace_and_is_never_an_error(
    provider: TracerProvider, system: System, store: EventStore
) -> None:
    """A command, an event or a request whose traceparent cannot be parsed is handled as usual,
    in a span that starts a new trace (docs/tracing.md#propagation)."""
    # A command.
    ix = str(uuid.uuid4())
    cmd = Ask(token=OPERATOR, interaction_id=ix, question="Deploy?", answer_format="confirm", timeout=30)
    msg = await store.nc.request(
        store.names.cmd_ask, msgspec.json.encode(cmd), timeout=10, headers={"traceparent": MALFORMED}
    )
    assert isinstance(REPLY_DECODER.decode(msg.data), Accepted)
    spans = await wait_spans(provider, ("ask cmd.ask.v1", ix))
    assert spans["ask cmd.ask.v1"].parent is None

    # An event appended with a malformed context: the consumers handle it in a new root.
    now = datetime.now(UTC)
    answered = InteractionAnswered(
        interaction_id=ix, group_id=ix, answered_by="ops", answered_at=now, answer=True, via="api"
    )
    asked_seq = (await store.last(store.names.ix(ix))).seq  # type: ignore[union-attr]
    await store.js.publish(
        store.names.ix(ix),
        encode_event(answered),
        headers={
            "Nats-Msg-Id": f"answered-{ix}",
            "Nats-Expected-Last-Subject-Sequence": str(asked_seq),
            "traceparent": MALFORMED,
            "tracestate": "=,=",
        },
    )
    spans = await wait_spans(provider, ("resume interaction.answered.v1", ix))
    assert spans["resume interaction.answered.v1"].parent is None

    # A request with a malformed context: the answer is recorded in the question's trace, and
    # the malformed context is no link.
    other = str(uuid.uuid4())
    cmd = Ask(token=OPERATOR, interaction_id=other, question="Ship?", answer_format="confirm", timeout=30)
    msg = await store.nc.request(store.names.cmd_ask, msgspec.json.encode(cmd), timeout=10)
    assert isinstance(REPLY_DECODER.decode(msg.data), Accepted)
    assert await answer(system, other, True, traceparent=MALFORMED) == 200
    spans = await wait_spans(provider, ("door answer", other), ("ask cmd.ask.v1", other))
    assert spans["ask cmd.ask.v1"].parent is None
    assert parent_of(spans["door answer"]) == span_id(spans["ask cmd.ask.v1"])  # the question's trace
    assert list(spans["door answer"].links) == []
    # A request span of another door, with a malformed context: a new root.
    async with system.http() as http:
        assert (await http.get("/api/interactions", headers={"traceparent": MALFORMED})).status_code == 200
    [listing] = await eventually(
        lambda: [s for s in finished(provider) if s.name == "GET /api/interactions"],
        "the list request's span",
    )
    assert listing.parent is None
    assert listing.attributes is not None
    assert listing.attributes["http.response.status_code"] == 200
