"""Tracing's small rules: when it is on, what the SDK sends, what a log line carries, what a
malformed context does (docs/tracing.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from layby.tracecontext import command_headers, continued
from layby_server.observability import tracing
from layby_server.settings import SettingsError, load_settings

pytestmark = pytest.mark.unit

PARENT = f"00-{'a' * 32}-{'b' * 16}-01"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    out = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(out))
    tracing.install(provider)
    yield out
    tracing.uninstall()
    provider.shutdown()


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"LAYBY_TRACING": "on"}, True),
        ({"LAYBY_TRACING": "off", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"LAYBY_TRACING": "auto", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
    ],
)
def test_tracing_is_on_only_when_an_exporter_is_configured_or_layby_tracing_says_so(
    env: dict[str, str], on: bool
) -> None:
    """LAYBY_TRACING=auto (the default) traces when an OTLP endpoint or OTEL_TRACES_EXPORTER is set,
    unless the exporter is none or OTEL_SDK_DISABLED is true; on and off decide alone (docs/tracing.md#turning-it-on)."""
    assert load_settings(env).tracing is on


def test_an_unknown_traces_exporter_or_tracing_switch_fails_at_start_naming_the_variable() -> None:
    """Layby sends spans to otlp or console only; anything else fails when settings load (docs/tracing.md#turning-it-on)."""
    with pytest.raises(
        SettingsError, match="OTEL_TRACES_EXPORTER must be one of otlp, console, none, got 'zipkin'"
    ):
        load_settings({"OTEL_TRACES_EXPORTER": "zipkin"})
    with pytest.raises(SettingsError, match="LAYBY_TRACING must be on or off, got 'maybe'"):
        load_settings({"LAYBY_TRACING": "maybe"})


def test_the_sdk_sends_no_trace_headers_without_a_current_span() -> None:
    """An asker with no span current sends its commands without headers, as before tracing (docs/tracing.md#from-the-asker)."""
    assert command_headers() is None


def test_the_sdk_sends_the_askers_current_span_as_the_commands_parent() -> None:
    """With a span current, a command carries its W3C traceparent (docs/tracing.md#from-the-asker)."""
    tracer = TracerProvider().get_tracer("agent")
    with tracer.start_as_current_span("agent") as span:
        headers = command_headers()
    assert headers is not None
    context = span.get_span_context()
    assert headers["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


def test_a_continuation_runs_in_the_context_it_was_published_under() -> None:
    """A worker's commands while it executes a continuation carry the continuation's trace (docs/tracing.md#from-the-asker)."""
    with continued({"traceparent": PARENT, "Nats-Msg-Id": "cont-x"}):
        headers = command_headers()
    assert headers is not None
    assert headers["traceparent"].startswith(f"00-{'a' * 32}-")
    assert command_headers() is None
    with continued({"Nats-Msg-Id": "cont-x"}):
        assert command_headers() is None


def test_off_every_helper_does_nothing() -> None:
    """Tracing off: no span, no header added, nothing kept of a message's headers (docs/tracing.md#cost)."""
    assert not tracing.enabled()
    headers = {"Nats-Msg-Id": "m", "Nats-Expected-Last-Subject-Sequence": "3"}
    with tracing.span("x", parent={"traceparent": PARENT}) as span:
        tracing.inject(headers)
    assert span is None
    assert headers == {"Nats-Msg-Id": "m", "Nats-Expected-Last-Subject-Sequence": "3"}
    assert tracing.carrier_of({"traceparent": PARENT}) is None


def test_an_append_keeps_its_headers_and_adds_the_current_span(exporter: InMemorySpanExporter) -> None:
    """Injection adds traceparent beside Nats-Msg-Id and the expected sequence, which stay exactly as they were (docs/tracing.md#propagation)."""
    headers = {"Nats-Msg-Id": "asked-1", "Nats-Expected-Last-Subject-Sequence": "0"}
    with tracing.span("ask cmd.ask.v1", parent={"traceparent": PARENT}) as span:
        tracing.inject(headers)
    assert span is not None
    assert headers["Nats-Msg-Id"] == "asked-1"
    assert headers["Nats-Expected-Last-Subject-Sequence"] == "0"
    assert headers["traceparent"] == f"00-{'a' * 32}-{span.get_span_context().span_id:016x}-01"
    assert set(headers) == {"Nats-Msg-Id", "Nats-Expected-Last-Subject-Sequence", "traceparent"}


@pytest.mark.parametrize(
    "carrier",
    [
        {"traceparent": "garbage"},
        {"traceparent": f"00-{'0' * 32}-{'b' * 16}-01"},  # an all-zero trace id is invalid
        {"traceparent": PARENT.upper()},
        {"tracestate": "a=b"},
        {},
        None,
    ],
)
def test_a_malformed_or_missing_context_makes_a_new_root(
    exporter: InMemorySpanExporter, carrier: dict[str, str] | None
) -> None:
    """An event whose trace context cannot be parsed is handled in a span that starts a new trace (docs/tracing.md#propagation)."""
    with tracing.on_event("resume", 7, object(), carrier):
        pass
    [span] = exporter.get_finished_spans()
    assert span.parent is None
    assert span.name == "resume object"


def test_log_lines_inside_a_span_carry_its_ids(exporter: InMemorySpanExporter) -> None:
    """A service's log line written inside a span carries trace_id and span_id (docs/tracing.md#logs)."""
    assert tracing.log_ids(None, "info", {"event": "x"}) == {"event": "x"}
    with tracing.span("s", parent={"traceparent": PARENT}) as span:
        line = tracing.log_ids(None, "info", {"event": "x"})
    assert span is not None
    assert line == {"event": "x", "trace_id": "a" * 32, "span_id": f"{span.get_span_context().span_id:016x}"}


def test_a_failure_inside_a_span_ends_it_marked_failed_and_restores_the_context(
    exporter: InMemorySpanExporter,
) -> None:
    """An exception escaping a handler's span is recorded on it, the span ends, and the context
    before it is current again (docs/tracing.md#the-spans)."""
    from opentelemetry import trace
    from opentelemetry.trace import StatusCode

    before = trace.get_current_span()
    with pytest.raises(RuntimeError, match="boom"), tracing.on_event("resume", 3, object(), None):
        raise RuntimeError("boom")
    assert trace.get_current_span() is before
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert [event.name for event in span.events] == ["exception"]


def test_without_a_sampler_set_one_new_trace_in_ten_is_kept_and_a_sampled_parent_always_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    out = InMemorySpanExporter()
    provider = TracerProvider(sampler=tracing.default_sampler())
    provider.add_span_processor(SimpleSpanProcessor(out))
    tracing.install(provider, root_ratio=tracing.DEFAULT_SAMPLE_RATIO)
    try:
        passed = 0
        for _ in range(10_000):
            with tracing.span("root", parent={}) as span:
                if span is None:  # dropped: no span, and nothing sent carries a context
                    headers: dict[str, str] = {}
                    tracing.inject(headers)
                    assert headers == {}
                    assert tracing.headers_or_none() is None
                    passed += 1
        kept = len(out.get_finished_spans())
        assert kept + passed == 10_000
        assert 850 <= kept <= 1150, kept
        out.clear()
        for _ in range(100):  # a sampled parent is followed every time
            with tracing.span("child", parent={"traceparent": PARENT}) as span:
                assert span is not None
        assert len(out.get_finished_spans()) == 100
    finally:
        tracing.uninstall()
        provider.shutdown()


def test_an_operators_sampler_is_the_sdks_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    assert tracing.default_sampler() is None


UNSAMPLED = f"00-{'c' * 32}-{'d' * 16}-00"


class _Event:
    interaction_id = "i-1"


def test_an_unsampled_trace_makes_no_span_and_passes_its_context_on_unchanged(
    exporter: InMemorySpanExporter,
) -> None:
    parent = {"traceparent": UNSAMPLED, "tracestate": "k=v"}
    for block in (
        tracing.on_event("resume", 1, _Event(), parent),
        tracing.on_command("ask", _Event(), parent),
        tracing.joining("door answer", parent, {}),
        tracing.span("work", parent=parent),
    ):
        with block as span:
            assert span is None
            headers = {"Nats-Msg-Id": "m"}
            tracing.inject(headers)
            assert headers == {"Nats-Msg-Id": "m", **parent}
            assert tracing.headers_or_none() == parent
            with tracing.span("nested") as inner:  # no parent of its own: the same unsampled trace
                assert inner is None
        assert tracing.headers_or_none() is None  # the block ended: nothing is passed on
    assert exporter.get_finished_spans() == ()


def test_a_root_started_inside_an_unsampled_block_carries_its_own_context(
    exporter: InMemorySpanExporter,
) -> None:
    with tracing.on_event("sweeper", 1, _Event(), {"traceparent": UNSAMPLED}):
        with tracing.span("sweeper expire", parent={}) as root:
            assert root is not None
            headers: dict[str, str] = {}
            tracing.inject(headers)
            assert headers["traceparent"].split("-")[1] == format(root.get_span_context().trace_id, "032x")
        passed: dict[str, str] = {}
        tracing.inject(passed)
        assert passed == {"traceparent": UNSAMPLED}
    assert [s.name for s in exporter.get_finished_spans()] == ["sweeper expire"]


@pytest.mark.parametrize(
    "traceparent",
    [
        f"00-{'0' * 32}-{'d' * 16}-00",  # an all-zero trace id is invalid
        f"00-{'c' * 32}-{'0' * 16}-00",  # so is an all-zero span id
        f"ff-{'c' * 32}-{'d' * 16}-00",  # version ff is forbidden
        f"00-{'x' * 32}-{'d' * 16}-00",  # not hex
        f"00-{'c' * 31}-{'d' * 16}-000",
    ],
)
def test_a_malformed_unsampled_looking_context_is_a_new_root_not_passed_on(
    exporter: InMemorySpanExporter, traceparent: str
) -> None:
    with tracing.on_event("resume", 1, _Event(), {"traceparent": traceparent}) as span:
        assert span is not None
        headers: dict[str, str] = {}
        tracing.inject(headers)
        assert headers["traceparent"] != traceparent


def test_a_command_without_context_starts_one_new_trace_in_ten_and_an_event_without_one_is_untraced(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_TRACES_SAMPLER", raising=False)
    provider = TracerProvider(sampler=tracing.default_sampler())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider, root_ratio=tracing.DEFAULT_SAMPLE_RATIO)
    for _ in range(10_000):
        with tracing.on_command("ask", _Event(), None):
            pass
    assert 850 <= len(exporter.get_finished_spans()) <= 1150, len(exporter.get_finished_spans())
    exporter.clear()
    for n in range(1_000):  # an event appended without context belongs to an untraced question
        with tracing.on_event("resume", n, _Event(), None) as span, tracing.span("nested") as inner:
            assert span is None and inner is None
            assert tracing.headers_or_none() is None
        with tracing.joining("door answer", None, {}) as answer:  # and so does its answer
            assert answer is None
    assert exporter.get_finished_spans() == ()
