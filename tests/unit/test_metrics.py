"""The services' metrics without sockets: what each event counts, label values from closed sets,
gauges refreshed at most once per interval, the door's request ids and access log
(docs/observability.md)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from layby_contracts.events import (
    EXPIRY_ANSWERER,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    RunResumed,
)
from layby_domain.clock import ManualClock
from layby_server.observability.gauges import ReadModelGauges
from layby_server.observability.logs import get_logger
from layby_server.observability.metrics import ServiceMetrics
from layby_services.door.access import AccessMiddleware, request_id_of
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def sample(metrics: ServiceMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def asked(fmt: str = "confirm", mode: str = "sync", to: str | None = None) -> InteractionAsked:
    return interaction_asked("i1", NOW, answer_format=fmt, mode=mode, to=to)


def answered(via: str | None, by: str = "ops") -> InteractionAnswered:
    return InteractionAnswered(interaction_id="i1", group_id="g", answered_by=by, answered_at=NOW, via=via)


def test_each_recorded_fact_is_counted_under_its_labels() -> None:
    """Asks by format and mode, answers by where they came from, resolutions by kind, resumes by cause."""
    m = ServiceMetrics()
    for event in (
        asked(),
        asked("text", "async"),
        asked("text", "async", to="caller"),
        answered("inbox"),
        answered("expiry", by=EXPIRY_ANSWERER),
        InteractionRemoved(interaction_id="i1", group_id="g", reason="abandoned", removed_at=NOW),
        RunResumed(run_id="r", generation=1, resume_id="x", resumed_at=NOW),
    ):
        m.appended(event)
    assert sample(m, "layby_asks_recorded_total", format="confirm", mode="sync") == 1
    assert sample(m, "layby_asks_recorded_total", format="text", mode="park") == 1
    assert sample(m, "layby_asks_recorded_total", format="text", mode="caller") == 1
    assert sample(m, "layby_answers_total", via="inbox") == 1
    assert sample(m, "layby_answers_total", via="expiry") is None  # an expiry is no answer
    assert sample(m, "layby_resolutions_total", kind="answered") == 1
    assert sample(m, "layby_resolutions_total", kind="expired") == 1
    assert sample(m, "layby_resolutions_total", kind="abandoned") == 1
    assert sample(m, "layby_run_resumes_total", cause="resolved") == 1


def test_label_values_outside_their_closed_set_fold_into_other() -> None:
    """No value a client or a newer event can choose grows the series: unknown ones count as ``other``."""
    m = ServiceMetrics()
    m.appended(answered("made-up-by-a-client"))
    m.appended(answered(None))
    m.appended(asked(fmt="a-future-format"))
    m.http_request("/api/interactions", "BREW", 418).observe(0.001)
    assert sample(m, "layby_answers_total", via="other") == 2
    assert sample(m, "layby_asks_recorded_total", format="other", mode="sync") == 1
    assert sample(m, "layby_http_request_duration_seconds_count", route="/api/interactions",
                  method="other", status="418") == 1  # fmt: skip


def test_each_service_counts_into_a_registry_of_its_own() -> None:
    """Two services in one process (the tests, ``layby up``) never see each other's numbers."""
    ask, door = ServiceMetrics(), ServiceMetrics()
    ask.appended(asked())
    assert sample(ask, "layby_asks_recorded_total", format="confirm", mode="sync") == 1
    assert sample(door, "layby_asks_recorded_total", format="confirm", mode="sync") is None
    assert b"layby_asks_recorded_total{" not in door.render()


class _Pool:
    """A stand-in pool that counts its queries."""

    def __init__(self) -> None:
        self.queries = 0
        self.pending: list[dict[str, Any]] = [{"mode": "sync", "n": 2}, {"mode": "async", "n": 3}]
        self.parked = 3

    async def fetch(self, sql: str) -> list[dict[str, Any]]:
        self.queries += 1
        return self.pending

    async def fetchval(self, sql: str) -> int:
        self.queries += 1
        return self.parked


async def test_read_model_gauges_query_at_most_once_per_interval_of_the_clock() -> None:
    """Open questions and parked runs are read once per interval of the injected clock, however
    often the loop (or a scrape storm) asks; the next interval reads again."""
    clock, pool, m = ManualClock(NOW), _Pool(), ServiceMetrics()
    gauges = ReadModelGauges(pool, m.registry, clock, interval=15)  # type: ignore[arg-type]
    assert await gauges.refresh_if_due()
    for _ in range(50):
        assert not await gauges.refresh_if_due()
    assert pool.queries == 2
    assert sample(m, "layby_open_questions", mode="sync") == 2
    assert sample(m, "layby_open_questions", mode="park") == 3
    assert sample(m, "layby_parked_runs") == 3
    pool.pending, pool.parked = [], 0
    clock.advance(14.9)
    assert not await gauges.refresh_if_due()
    clock.advance(0.1)
    assert await gauges.refresh_if_due()
    assert (sample(m, "layby_open_questions", mode="sync"), sample(m, "layby_parked_runs")) == (0, 0)


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (b"abc-123.X_y", True),
        (b"x" * 128, True),
        (b"x" * 129, False),
        (b"", False),
        (b"a b", False),
        (b"a/b", False),
        (b"\xc3\xa9t\xc3\xa9", False),
        (b"a\nb", False),
    ],
)
def test_an_inbound_request_id_is_kept_only_when_short_and_safe(sent: bytes, kept: bool) -> None:
    """1 to 128 characters of [A-Za-z0-9._-] are kept; anything else gets a fresh id."""
    got = request_id_of([(b"host", b"x"), (b"x-request-id", sent)])
    assert (got == sent) is kept
    if not kept:
        assert re.fullmatch(rb"[0-9a-f]{16}", got)


async def _call(app: AccessMiddleware, headers: list[tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/x/secret", "query_string": b"q=1", "headers": headers}
    await app(scope, receive, send)  # type: ignore[arg-type]
    return sent


async def _inner(scope: Any, receive: Any, send: Any) -> None:
    """A door in miniature: routed to a template, one log line of its own, then a 204."""
    scope["path_template"] = "/x/{id}"
    get_logger("test.door").info("door.work")
    await send({"type": "http.response.start", "status": 204, "headers": [(b"a", b"1")]})
    await send({"type": "http.response.body", "body": b""})


async def test_every_line_of_a_request_carries_its_id_and_the_access_line_its_template(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The request id is bound for every line logged while the request runs, returned in
    X-Request-Id, and the one access line names the route template, never the path or query."""
    m = ServiceMetrics()
    sent = await _call(AccessMiddleware(_inner, m), [(b"x-request-id", b"req-1")])
    assert sent[0]["headers"] == [(b"a", b"1"), (b"x-request-id", b"req-1")]
    lines = [line for line in capsys.readouterr().err.splitlines() if "req-1" in line]
    assert [("door.work" in line, "http.request" in line) for line in lines] == [(True, False), (False, True)]
    assert "route=/x/{id}" in lines[1]
    assert "status=204" in lines[1]
    assert "secret" not in lines[1]
    assert "q=1" not in lines[1]
    assert (
        sample(m, "layby_http_request_duration_seconds_count", route="/x/{id}", method="GET", status="204")
        == 1
    )


async def test_with_the_access_log_off_no_line_is_written_and_the_request_is_still_measured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LAYBY_ACCESS_LOG=off drops the access line only: the histogram still counts the request."""
    m = ServiceMetrics()
    await _call(AccessMiddleware(_inner, m, access_log=False), [])
    assert "http.request" not in capsys.readouterr().err
    assert (
        sample(m, "layby_http_request_duration_seconds_count", route="/x/{id}", method="GET", status="204")
        == 1
    )
