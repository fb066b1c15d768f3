"""Traces across the services, carried in NATS headers (docs/tracing.md, ADR 0023).

Off unless configured (``LAYBY_TRACING``, or an OTLP endpoint / ``OTEL_TRACES_EXPORTER`` in the
environment): then every helper here is a check of one module variable and returns at once —
no span is made, no header added. On, this process holds one tracer, and:

- ``span`` starts a span, as a child of a W3C context found in message headers (``parent``) or
  of the current span; a context that cannot be parsed is ignored (the span is a new root);
- ``inject`` writes the current span's ``traceparent`` (and ``tracestate``) into the header dict
  an append or a command is about to send, so the reader of that message continues the trace;
- ``carrier_of`` keeps only those two headers of a message read back, for later use as a parent
  (the door's answer to a question continues the question's trace).

W3C trace context only, whatever ``OTEL_PROPAGATORS`` says: the headers are part of Layby's wire
format between its own services, not the operator's choice.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import random
from collections.abc import Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "NOTHING",
    "Carrier",
    "SpanKind",
    "carrier_of",
    "configure",
    "enabled",
    "event_attributes",
    "failed",
    "failed_status",
    "headers_or_none",
    "inject",
    "install",
    "joining",
    "log_ids",
    "on_command",
    "on_event",
    "refused",
    "span",
    "uninstall",
]

Carrier = dict[str, str]
"""The W3C trace headers of one message: ``traceparent`` and, when present, ``tracestate``."""
TRACEPARENT, TRACESTATE = "traceparent", "tracestate"

_tracer: trace.Tracer | None = None
_provider: TracerProvider | None = None
_w3c = TraceContextTextMapPropagator()
NOTHING: AbstractContextManager[None] = contextlib.nullcontext()
"""What every helper returns when tracing is off: a shared ``with`` that does nothing."""
_passing: contextvars.ContextVar[Carrier | None] = contextvars.ContextVar("layby_trace_passing", default=None)
"""The carrier of an unsampled trace being handled: no span is made for it, and the messages
sent meanwhile carry it on as it came (see :func:`_unsampled`)."""


def _unsampled(carrier: Mapping[str, str] | None) -> Carrier | None:
    """``carrier`` itself when it is a well-formed W3C context whose trace was not sampled, else
    None. Such a trace records nothing anywhere (the sampler follows the parent), so the work
    done under it makes no span object at all: it only passes the context on, unchanged, so every
    later hop knows the decision too. Nine questions in ten take this path (docs/tracing.md#cost)."""
    if not carrier:
        return None
    parent = carrier.get(TRACEPARENT)
    if parent is None or len(parent) != 55 or parent[2] != "-" or parent[35] != "-" or parent[52] != "-":
        return None
    try:
        flags = int(parent[53:], 16)
        int(parent[3:35], 16), int(parent[36:52], 16)
    except ValueError:
        return None
    if flags & 1 or parent.startswith("ff") or parent[3:35] == "0" * 32 or parent[36:52] == "0" * 16:
        return None
    state = carrier.get(TRACESTATE)
    return {TRACEPARENT: parent, TRACESTATE: state} if state else {TRACEPARENT: parent}


class _Passing:
    """A ``with`` block handling an unsampled trace: no span (``as`` gives None); what is sent
    inside carries the trace's context on."""

    __slots__ = ("_carrier", "_token")

    def __init__(self, carrier: Carrier) -> None:
        self._carrier = carrier

    def __enter__(self) -> None:
        self._token = _passing.set(self._carrier)

    def __exit__(self, *_: object) -> None:
        _passing.reset(self._token)


def _untraced() -> _Passing:
    """A block of work in a trace Layby decided not to keep (the default sampling, a new trace
    dropped): no span, and nothing added to what is sent — a message without trace context is read
    as untraced by the next hop, so the decision travels for free (docs/tracing.md#sampling). The
    work nested in it is untraced too."""
    return _Passing({})


class _Current:
    """A started span made current for a ``with`` block, then ended; an exception escaping the
    block is recorded and marks the span failed. What the SDK's ``start_as_current_span`` does,
    without its generic context-manager layers (a fifth of a span's cost)."""

    __slots__ = ("_passed", "_span", "_token")

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def __enter__(self) -> trace.Span:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        self._passed = _passing.set(None)  # a span of its own, inside an unsampled block: its own
        return self._span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, _tb: object) -> None:
        _passing.reset(self._passed)
        otel_context.detach(self._token)
        if isinstance(error, Exception):
            failed(self._span, error)
        self._span.end()


def _current(
    tracer: trace.Tracer,
    name: str,
    *,
    context: otel_context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, AttributeValue] | None = None,
    links: Sequence[Link] | None = None,
    decided: bool = False,
) -> _Current | _Passing:
    """``decided``: the caller already decided to keep this new trace."""
    if (
        not decided
        and _root_bound is not None
        and not trace.get_current_span(context).get_span_context().is_valid
        and not _kept_root()
    ):
        return _untraced()
    span = tracer.start_span(
        name,
        context=context,
        kind=kind,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    )
    return _Current(span)


def enabled() -> bool:
    return _tracer is not None


def install(provider: trace.TracerProvider, *, root_ratio: float | None = None) -> None:
    """Trace with ``provider`` from now on (``configure`` in a service; a test's in-memory one).
    ``root_ratio``: Layby decides which new traces are kept (see :func:`_dropped_root`), the
    provider's sampler then keeping every root it is handed; None leaves every decision to the
    provider's sampler."""
    global _tracer, _root_bound  # noqa: PLW0603 - one tracer per process, chosen once at start-up
    _tracer = provider.get_tracer("layby")
    _root_bound = None if root_ratio is None else round(root_ratio * _ID_SPACE)


_ID_SPACE = 1 << 64
_root_bound: int | None = None
"""Layby's own root decision: a new trace is kept when the low 64 bits of its id fall below this
(the rule of OpenTelemetry's trace-id-ratio sampler), or None when the provider decides."""


def _fresh(parent: Mapping[str, str] | None) -> bool:
    """Layby decides new traces (the default sampling) and this message carries no trace context
    at all: a command then starts a new trace, decided before any span work; an event or an
    answer belongs to a question whose trace was not kept."""
    return _root_bound is not None and (parent is None or TRACEPARENT not in parent)


def _kept_root() -> bool:
    """Decide whether a new trace is kept, before any span work. One that is not costs nothing
    more anywhere: no span object, and no header on anything sent (:func:`_untraced`)."""
    assert _root_bound is not None
    return (random.getrandbits(64) & (_ID_SPACE - 1)) < _root_bound


def uninstall() -> None:
    """Stop tracing (a test that installed a provider)."""
    global _tracer, _root_bound  # noqa: PLW0603
    _tracer = None
    _root_bound = None


def configure(service: str, exporter: str = "otlp") -> bool:
    """Install the OpenTelemetry SDK's tracer provider for this process, once: the resource, the
    sampler (``OTEL_TRACES_SAMPLER``, else :func:`default_sampler`), a batch span processor
    and ``exporter`` (``OTEL_TRACES_EXPORTER``: ``otlp``, the default, is OTLP over HTTP to
    ``OTEL_EXPORTER_OTLP[_TRACES]_ENDPOINT``; ``console`` writes spans to standard output).
    ``service`` is the service name unless ``OTEL_SERVICE_NAME`` (or ``OTEL_RESOURCE_ATTRIBUTES``)
    gives one. Returns whether this call installed it (a second service in one process keeps the
    first one's)."""
    global _provider  # noqa: PLW0603
    if _provider is not None:
        return False
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: service}))
    sampler = default_sampler()
    provider = TracerProvider(resource=resource, sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(_exporter(exporter)))
    _provider = provider
    install(provider, root_ratio=None if sampler is None else DEFAULT_SAMPLE_RATIO)
    return True


DEFAULT_SAMPLE_RATIO = 0.1
"""Where nothing upstream decided and ``OTEL_TRACES_SAMPLER`` is not set, one trace in ten is
kept (docs/tracing.md#sampling): tracing every question costs the sync cycle about 9 %, one in
ten keeps the cost inside the 5 % that metrics and tracing may take together."""


def default_sampler() -> Any:
    """None when ``OTEL_TRACES_SAMPLER`` names a sampler (the SDK reads it, with its argument).
    Without it, parent-based, keeping every root the provider is handed: Layby itself keeps
    :data:`DEFAULT_SAMPLE_RATIO` of new traces before any span is made (``install``'s
    ``root_ratio``), so a dropped one costs no span object at all. A sampled parent (a client's
    own trace, or a question's) is always followed, so a kept trace is whole from ask to wake."""
    if os.environ.get("OTEL_TRACES_SAMPLER", "").strip():
        return None  # the SDK's TracerProvider reads the variable itself
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased

    return ParentBased(ALWAYS_ON)


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def span(
    name: str,
    *,
    parent: Mapping[str, str] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Mapping[str, AttributeValue] | None = None,
    links: Sequence[Link] | None = None,
) -> AbstractContextManager[trace.Span | None]:
    """A span made current for the ``with`` block, or nothing at all when tracing is off.

    ``parent``: the headers of the message being handled — its W3C context is the span's parent,
    and a missing or malformed one makes the span a new root (never an error). Without
    ``parent`` the span is a child of the current span, if any."""
    tracer = _tracer
    if tracer is None:
        return NOTHING
    if parent is None:
        passing = _passing.get()
        if passing is not None:
            return _Passing(passing)  # inside an unsampled trace: so is this
    elif (carrier := _unsampled(parent)) is not None:
        return _Passing(carrier)
    context = None if parent is None else _w3c.extract(parent)
    return _current(tracer, name, context=context, kind=kind, attributes=attributes, links=links)


_EVENT_KEYS = ("interaction_id", "run_id", "flow", "answer_format")
"""Fields of an event worth a span attribute: identifiers and low-cardinality facts, never a
question, an answer, a token or a ticket. Few: each attribute costs CPU to record and to encode."""


def event_attributes(event: Any, seq: int | None = None) -> dict[str, AttributeValue]:
    """A span's attributes for one event or command: its stream sequence and its identifiers
    (its type is in the span's name)."""
    attributes: dict[str, AttributeValue] = {}
    if seq is not None:
        attributes["layby.stream.seq"] = seq
    for key in _EVENT_KEYS:
        value = getattr(event, key, None)
        if isinstance(value, str):
            attributes[f"layby.{key}"] = value
    return attributes


def _tag(event: Any) -> str:
    config = getattr(type(event), "__struct_config__", None)
    return str(getattr(config, "tag", None) or type(event).__name__)


def on_event(
    role: str, seq: int, event: Any, parent: Mapping[str, str] | None
) -> AbstractContextManager[Any]:
    """The span of a consumer handling one event: named ``<role> <event type>``, a child of the
    context the event was appended under (a new root when it carries none, or a malformed one)."""
    tracer = _tracer
    if tracer is None:
        return NOTHING
    if (carrier := _unsampled(parent)) is not None:
        return _Passing(carrier)
    if _fresh(parent):
        return _untraced()  # appended without context: a question whose trace is not kept
    return _current(
        tracer,
        f"{role} {_tag(event)}",
        context=_w3c.extract(parent or {}),
        kind=SpanKind.CONSUMER,
        attributes=event_attributes(event, seq),
    )


def on_command(service: str, command: Any, parent: Mapping[str, str] | None) -> AbstractContextManager[Any]:
    """The span of a service handling one command (a NATS request): ``<service> <command type>``,
    a child of the sender's span when the request carried its context."""
    tracer = _tracer
    if tracer is None:
        return NOTHING
    if (carrier := _unsampled(parent)) is not None:
        return _Passing(carrier)
    fresh = _fresh(parent)
    if fresh and not _kept_root():
        return _untraced()
    return _current(
        tracer,
        f"{service} {_tag(command)}",
        decided=fresh,
        context=_w3c.extract(parent or {}),
        kind=SpanKind.SERVER,
        attributes=event_attributes(command),
    )


def joining(
    name: str,
    carrier: Mapping[str, str] | None,
    attributes: Mapping[str, AttributeValue],
    *,
    request: Mapping[str, str] | None = None,
) -> AbstractContextManager[Any]:
    """The span of a request that acts on an event read back: a child of ``carrier`` (the
    question's asked event), so the answer continues the question's trace. The request's trace
    is a link: ``request``, the trace headers the client sent, for a handler that makes its
    request's only span; otherwise the span current now (the door's request span). Without a
    carrier, or with a malformed one, the span is simply a child of the request's trace."""
    tracer = _tracer
    if tracer is None:
        return NOTHING
    if (unsampled := _unsampled(carrier)) is not None:
        return _Passing(unsampled)  # the question's trace is not kept: neither is its answer
    if _fresh(carrier) and (request is None or TRACEPARENT not in request):
        return _untraced()  # a question asked without context when Layby decides: not kept either
    asked = _w3c.extract(carrier) if carrier else None
    client = _w3c.extract(request) if request is not None else None
    if asked is None or not _valid(asked):
        return _current(tracer, name, context=client, kind=SpanKind.SERVER, attributes=attributes)
    there = trace.get_current_span(client).get_span_context()
    return _current(
        tracer,
        name,
        context=asked,
        kind=SpanKind.SERVER,
        attributes=attributes,
        links=[Link(there)] if there.is_valid else None,
    )


def _valid(context: Any) -> bool:
    return bool(trace.get_current_span(context).get_span_context().is_valid)


def refused(span: trace.Span | None, error: BaseException) -> None:
    """Record on ``span`` that its work was refused (a ``LaybyError``: bad input, a conflict...):
    the refusal's kind, not its message, and the span is not marked as failed."""
    if span is not None:
        span.set_attribute("layby.refused", getattr(error, "kind", type(error).__name__))


def failed(span: trace.Span | None, error: BaseException) -> None:
    """Mark ``span`` as failed by ``error`` (caught, so the span's own block never saw it)."""
    if span is not None:
        span.record_exception(error)
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))


def failed_status(span: trace.Span, description: str) -> None:
    """Mark ``span`` as failed without an exception (an HTTP 5xx)."""
    span.set_status(trace.Status(trace.StatusCode.ERROR, description))


def inject(headers: dict[str, str]) -> None:
    """Add the current span's W3C context to the headers of a message about to be sent (nothing
    when tracing is off or no span is current; every other header is left as it is)."""
    if _tracer is not None:
        passing = _passing.get()
        if passing is not None:
            headers.update(passing)
        else:
            _w3c.inject(headers)


def headers_or_none() -> dict[str, str] | None:
    """The current span's W3C context as a fresh header dict, or None (tracing off, no span)."""
    if _tracer is None:
        return None
    passing = _passing.get()
    if passing is not None:
        return dict(passing) or None
    carrier: dict[str, str] = {}
    _w3c.inject(carrier)
    return carrier or None


def carrier_of(headers: Mapping[str, str] | None) -> Carrier | None:
    """The W3C trace headers of a message read back, kept for later use as a parent; None when
    tracing is off or the message has none."""
    if _tracer is None or not headers:
        return None
    parent = headers.get(TRACEPARENT)
    if parent is None:
        return None
    state = headers.get(TRACESTATE)
    return {TRACEPARENT: parent, TRACESTATE: state} if state else {TRACEPARENT: parent}


def log_ids(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: ``trace_id`` and ``span_id`` on every line written inside a span."""
    if _tracer is None:
        return event_dict
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event_dict.setdefault("trace_id", format(context.trace_id, "032x"))
        event_dict.setdefault("span_id", format(context.span_id, "016x"))
    return event_dict
