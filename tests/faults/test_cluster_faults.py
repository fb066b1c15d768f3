"""Faults on the shipped shape, CI-sized: three JetStream nodes with every stream at three
replicas, two replicas of each service, a worker; load throughout; then the checker against the
log (tests/faults/history.py states each rule).

One system is started for the module. Under load, in turn: the event stream's leader node is
killed (and restarted), a node is paused past the election timeout, one replica of each service
is killed (and restarted), PostgreSQL is restarted. Each test then asserts the checker's verdict
for its part of the session.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.faults.harness import Shape
from tests.faults.history import Violation, format_table, summary
from tests.faults.session import Session, run_session

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(230)]
KINDS = ["kill_stream_leader", "pause_node", "kill_service_replicas", "restart_postgres"]
NODE_FAULTS = ("kill_stream_leader", "pause_node")


@pytest.fixture(scope="module")
async def session() -> AsyncIterator[Session]:
    with tempfile.TemporaryDirectory(prefix="layby-faults-") as tmp:
        shape = Shape(Path(tmp))
        try:
            await shape.start()
            yield await run_session(shape, KINDS, warmup=6.0, settle=7.0)
        finally:
            await shape.stop()


def _of(found: Session, kinds: tuple[str, ...]) -> list[Violation]:
    """The violations in the windows of the faults of ``kinds`` (a window ends at the next start)."""
    starts = [f.start for f in found.faults] + [math.inf]
    windows = [(f.start, starts[i + 1]) for i, f in enumerate(found.faults) if f.kind in kinds]
    return [v for v in found.report.violations if any(start <= v.at < end for start, end in windows)]


def _explain(found: Session, violations: list[Violation]) -> str:
    lines = [format_table(summary(found.report))]
    lines += [f"{v.category}: {v.rule}: {v.detail}" for v in violations[:20]]
    return "\n".join(lines)


async def test_nothing_acknowledged_is_lost_and_nothing_resumes_twice_when_a_node_dies_or_freezes(
    session: Session,
) -> None:
    """Killing the event stream's leader node, and pausing a node past the election timeout,
    lose no acknowledged ask, answer or run start, resume no run twice, refuse nothing the state
    does not justify, and leave no gap in a resumed SSE client (docs/architecture.md)."""
    found = _of(session, NODE_FAULTS)
    assert found == [], _explain(session, found)


async def test_nothing_acknowledged_is_lost_and_nothing_resumes_twice_when_a_replica_or_postgres_restarts(
    session: Session,
) -> None:
    """Killing one replica of each service (and the worker), and restarting PostgreSQL, break
    none of the same rules; before the first fault nothing was broken either."""
    found = _of(session, ("kill_service_replicas", "restart_postgres"))
    before = [v for v in session.report.violations if v.at < session.faults[0].start]
    assert found + before == [], _explain(session, found + before)
