"""Each service's Prometheus metrics: one registry per service, counted where facts become durable
(docs/observability.md, docs/decisions/0022-metrics.md).

A service's ``ServiceMetrics`` owns its ``CollectorRegistry``; the health port serves it as
``GET /metrics``. Nothing registers into the library's global registry, so the five services
running in one process (``layby up`` in a test, the integration suite) keep five apart, and a test
reads exactly one service's numbers.

Facts recorded as events are counted by ``appended``, which the event store calls once per append
that landed (not for a lost race, not for a de-duplicated retry). Every label value comes from a
closed set written here or from the operator's configuration (channel names); anything else folds
into ``other``, so no client can grow the series count. Children are bound on first use and kept:
the hot path is two or three dict lookups and an ``inc``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from layby_contracts import events
from layby_contracts.formats import FORMAT_NAMES

__all__ = ["CONTENT_TYPE", "HTTP_BUCKETS", "ServiceMetrics"]

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The classic text format: every Prometheus reads it, and every name here is plain ASCII."""
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Door latency buckets: a sync cycle's requests take milliseconds; streams and long polls last
until their client leaves and land in the last buckets."""

OTHER = "other"
_FORMATS = frozenset(FORMAT_NAMES)
_VIA = frozenset({"inbox", "cli", "api", "callback", "channel", "caller"})
_KINDS = frozenset({"answered", "expired", "timeout", "cancelled", "abandoned", "delivery_failed", "dropped"})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
DELIVERY_RESULTS = ("sent", "retryable_error", "permanent_error")
NOTIFY_RESULTS = ("sent", "recorded", "refused", "unsupported", "retryable_error", "permanent_error")
NO_CHANNEL = "none"
"""The channel label of a notification recorded to the feed only."""


def _mode(event: events.InteractionAsked) -> str:
    if event.to == "caller":
        return "caller"
    return "park" if event.mode == "async" else "sync"


class ServiceMetrics:
    """The counters and histograms of one service process, in a registry of its own."""

    def __init__(self) -> None:
        # A ``_created`` series per child would double the series count for nothing a dashboard reads.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._asks = Counter(
            "layby_asks_recorded_total",
            "Questions recorded (the Asked event appended), by answer format and mode (sync, park, caller).",
            ["format", "mode"],
            registry=r,
        )
        self._answers = Counter(
            "layby_answers_total",
            "Answers recorded (an Answered event that is not an expiry), by where the answer came from.",
            ["via"],
            registry=r,
        )
        self._resolutions = Counter(
            "layby_resolutions_total",
            "Questions that ended, by how: answered, expired, or removed for a reason "
            "(timeout, cancelled, abandoned, delivery_failed, dropped).",
            ["kind"],
            registry=r,
        )
        self._parks = Counter("layby_runs_parked_total", "Parks of runs recorded.", registry=r)
        self._resumes = Counter(
            "layby_run_resumes_total",
            "Resumes of parked runs recorded (exactly one per park), by cause (resolved, retry).",
            ["cause"],
            registry=r,
        )
        self._run_ends = Counter(
            "layby_runs_ended_total",
            "Runs that ended, by outcome (finished, failed, cancelled).",
            ["outcome"],
            registry=r,
        )
        self._deliveries = Counter(
            "layby_delivery_attempts_total",
            "Attempts to hand a question to a channel, by channel and result "
            "(sent, retryable_error, permanent_error).",
            ["channel", "result"],
            registry=r,
        )
        self._notifications = Counter(
            "layby_notifications_total",
            "Notifications by channel (``none``: the feed only) and result: sent, recorded (to the "
            "feed only), refused (bad input or audience), unsupported (the channel cannot), "
            "retryable_error, permanent_error (the medium failed the one attempt).",
            ["channel", "result"],
            registry=r,
        )
        self._http = Histogram(
            "layby_http_request_duration_seconds",
            "Door requests from the first byte of the request to the last byte of the response, by route "
            "template, method and status.",
            ["route", "method", "status"],
            buckets=HTTP_BUCKETS,
            registry=r,
        )
        self._ask_children: dict[str, dict[str, Counter]] = {}
        self._answer_children: dict[str, Counter] = {}
        self._resolution_children: dict[str, Counter] = {}
        self._resume_children = {
            "resolved": self._resumes.labels(cause="resolved"),
            "retry": self._resumes.labels(cause="retry"),
        }
        self._end_children = {
            "finished": self._run_ends.labels(outcome="finished"),
            "failed": self._run_ends.labels(outcome="failed"),
            "cancelled": self._run_ends.labels(outcome="cancelled"),
        }
        self._delivery_children: dict[str, dict[str, Counter]] = {}
        self._notify_children: dict[str, dict[str, Counter]] = {}
        self._http_children: dict[str, dict[str, dict[int, Histogram]]] = {}

    def render(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    # -- facts recorded as events ---------------------------------------------------------------

    def appended(self, event: events.Event) -> None:
        """Count one event that just landed in the log (called by the event store, once)."""
        match event:
            case events.InteractionAsked():
                self._asked(event.answer_format, _mode(event)).inc()
            case events.InteractionAnswered():
                if event.answered_by == events.EXPIRY_ANSWERER or event.via == "expiry":
                    self._resolution("expired").inc()
                else:
                    self._answer(event.via).inc()
                    self._resolution("answered").inc()
            case events.InteractionRemoved():
                self._resolution(event.reason).inc()
            case events.RunParked():
                self._parks.inc()
            case events.RunResumed():
                self._resume_children["retry" if event.retried_by else "resolved"].inc()
            case events.RunFinished():
                self._end_children["finished"].inc()
            case events.RunFailed():
                self._end_children["failed"].inc()
            case events.RunCancelled():
                self._end_children["cancelled"].inc()
            case _:
                pass

    def _asked(self, fmt: str, mode: str) -> Counter:
        if fmt not in _FORMATS:
            fmt = OTHER
        by_mode = self._ask_children.get(fmt)
        if by_mode is None:
            by_mode = self._ask_children[fmt] = {}
        child = by_mode.get(mode)
        if child is None:
            child = by_mode[mode] = self._asks.labels(format=fmt, mode=mode)
        return child

    def _answer(self, via: str | None) -> Counter:
        label = via if via in _VIA else OTHER
        child = self._answer_children.get(label)
        if child is None:
            child = self._answer_children[label] = self._answers.labels(via=label)
        return child

    def _resolution(self, kind: str) -> Counter:
        if kind not in _KINDS:
            kind = OTHER
        child = self._resolution_children.get(kind)
        if child is None:
            child = self._resolution_children[kind] = self._resolutions.labels(kind=kind)
        return child

    # -- the delivery service -------------------------------------------------------------------

    def delivery_attempt(self, channel: str, result: str) -> None:
        """One attempt to hand a question to ``channel`` (a configured channel's name) ended."""
        by_result = self._delivery_children.get(channel)
        if by_result is None:
            by_result = self._delivery_children[channel] = {
                name: self._deliveries.labels(channel=channel, result=name) for name in DELIVERY_RESULTS
            }
        by_result[result].inc()

    # -- the ask service's notifications ---------------------------------------------------------

    def notification(self, channel: str, result: str) -> None:
        """One notification ended with ``result`` on ``channel`` (a configured channel's name,
        ``none`` for the feed only, ``other`` for a name no channel has)."""
        by_result = self._notify_children.get(channel)
        if by_result is None:
            by_result = self._notify_children[channel] = {
                name: self._notifications.labels(channel=channel, result=name) for name in NOTIFY_RESULTS
            }
        by_result[result].inc()

    # -- the door -------------------------------------------------------------------------------

    def http_request(self, route: str, method: str, status: int) -> Histogram:
        """The latency histogram of one route template, method and status (bound once)."""
        if method not in _METHODS:
            method = OTHER
        by_method = self._http_children.get(route)
        if by_method is None:
            by_method = self._http_children[route] = {}
        by_status = by_method.get(method)
        if by_status is None:
            by_status = by_method[method] = {}
        child = by_status.get(status)
        if child is None:
            child = by_status[status] = self._http.labels(route=route, method=method, status=str(status))
        return child
