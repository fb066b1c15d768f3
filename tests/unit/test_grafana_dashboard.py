"""The Grafana dashboard (deploy/grafana/layby.json) and docs/observability.md name only metrics the
services export: the names are read from the services' own registries (docs/observability.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from layby_domain.clock import ManualClock
from layby_server.observability.gauges import ConsumerGauges, ReadModelGauges
from layby_server.observability.metrics import ServiceMetrics

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy/grafana/layby.json"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported() -> set[str]:
    """Every series name a service can expose: its metrics and both gauge sets, in one registry."""
    metrics = ServiceMetrics()
    clock = ManualClock()
    ConsumerGauges(None, metrics.registry, clock, 15, ["resume"])  # type: ignore[arg-type]
    ReadModelGauges(None, metrics.registry, clock, 15)  # type: ignore[arg-type]
    return {
        family.name + suffix for family in metrics.registry.collect() for suffix in _SUFFIXES[family.type]
    }


def expressions(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["expr"]] if isinstance(node.get("expr"), str) else []
        return found + [e for value in node.values() for e in expressions(value)]
    if isinstance(node, list):
        return [e for item in node for e in expressions(item)]
    return []


def test_every_metric_the_dashboard_queries_is_one_the_services_export() -> None:
    """The dashboard parses, every panel has a query, and each PromQL expression names only
    exported series (a renamed metric fails here, not on an empty panel)."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    names = exported()
    exprs = expressions(dashboard["panels"])
    assert len(exprs) >= len(dashboard["panels"])
    for expr in exprs:
        used = set(re.findall(r"\blayby_[a-z0-9_]+", expr))
        assert used, expr
        assert used <= names, f"{expr}: {sorted(used - names)} not exported"


def test_the_dashboard_shows_what_operators_watch() -> None:
    """Asks and answers, resolution kinds, door latency p50 and p99, consumer backlog, open
    questions, parked runs and delivery failures each have a panel."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    text = " ".join(expressions(dashboard["panels"]))
    for needle in (
        "layby_asks_recorded_total",
        "layby_answers_total",
        "sum by (kind) (rate(layby_resolutions_total",
        "histogram_quantile(0.5,",
        "histogram_quantile(0.99,",
        "layby_consumer_pending",
        "layby_open_questions",
        "layby_parked_runs",
        'layby_delivery_attempts_total{result!="sent"}',
    ):
        assert needle in text, needle


def test_every_exported_metric_is_documented() -> None:
    """docs/observability.md names every metric family the services export."""
    doc = (ROOT / "docs/observability.md").read_text(encoding="utf-8")
    families = {name.removesuffix("_total") for name in exported() if not name.endswith(("_bucket", "_sum"))}
    families = {name.removesuffix("_count") for name in families}
    missing = sorted(name for name in families if f"`{name}" not in doc)
    assert missing == []
