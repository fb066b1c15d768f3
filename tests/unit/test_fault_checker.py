"""The fault suite's checker (tests/faults/history.py) reports each broken invariant it is shown:
a clean history passes, and one lost, duplicated, wrongly refused or stale thing each fails it
(docs/aggregates/run.md#resumed-exactly-once, docs/doors/stream.md#resume-with-last-event-id)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    ParkedAsk,
    RunFinished,
    RunParked,
    RunResumed,
    RunStarted,
)
from tests.faults.harness import FaultRecord
from tests.faults.history import LogEntry, Report, check, recovery_seconds, summary
from tests.faults.load import History, Op, Segment, SseHistory

pytestmark = pytest.mark.unit
T0 = 1_800_000_000.0
IX, PIX, RUN = "ix-sync", "ix-park", "run-1"
QUESTION, TAG = "sync-q", "park-q"


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def asked(iid: str, question: str, t: float, **extra: Any) -> InteractionAsked:
    return InteractionAsked(
        interaction_id=iid,
        group_id=iid,
        question=question,
        answer_format="text",
        created_at=at(t),
        timeout_at=at(t + 30),
        asked_by="ops",
        **extra,
    )


def answered(iid: str, answer: str, t: float, **extra: Any) -> InteractionAnswered:
    return InteractionAnswered(
        interaction_id=iid, group_id=iid, answered_by="ops", answered_at=at(t), answer=answer, **extra
    )


def resumed(resume_id: str, t: float) -> RunResumed:
    return RunResumed(run_id=RUN, generation=1, resume_id=resume_id, resumed_at=at(t))


def clean_log() -> list[LogEntry]:
    events: list[tuple[float, Any]] = [
        (1.0, RunStarted(run_id=RUN, flow="faulty", identity="ops", input=TAG, started_at=at(1.0))),
        (1.1, asked(IX, QUESTION, 1.1)),
        (1.2, asked(PIX, TAG, 1.2, mode="async", run_id=RUN, call=1)),
        (
            1.3,
            RunParked(
                run_id=RUN,
                generation=0,
                asks=[ParkedAsk(interaction_id=PIX, call=1, question=TAG, expiry_at=at(3600))],
                parked_at=at(1.3),
            ),
        ),
        (1.5, answered(IX, QUESTION, 1.5)),
        (1.6, answered(PIX, TAG, 1.6, run_id=RUN)),
        (1.7, resumed("r1", 1.7)),
        (
            1.8,
            RunFinished(
                run_id=RUN,
                generation=1,
                result={"tag": TAG, "value": TAG},
                finished_at=at(1.8),
                resume_id="r1",
            ),
        ),
    ]
    return [LogEntry(seq=i + 1, subject="ev", time=T0 + t, event=ev) for i, (t, ev) in enumerate(events)]


def op(kind: str, start: float, end: float, result: str = "ok", **fields: Any) -> Op:
    ids = fields.pop("ids")
    return Op(kind=kind, ids=ids, start=T0 + start, end=T0 + end, result=result, **fields)


def clean_history() -> History:
    history = History()
    history.ops = [
        op("run_start", 0.9, 1.05, ids={"run_id": RUN, "question": TAG}),
        op("ask", 1.0, 1.55, ids={"question": QUESTION}, value=QUESTION),
        op("answer", 1.4, 1.5, ids={"interaction_id": IX, "question": QUESTION}, status=200, door=0),
        op("answer", 1.5, 1.6, ids={"interaction_id": PIX, "question": TAG}, status=200, door=1),
        op(
            "read_after_answer",
            1.51,
            1.52,
            ids={"interaction_id": IX, "question": QUESTION},
            status=200,
            door=1,
            value={"data": {"status": "answered"}},
        ),
    ]
    first = Segment(door=0, start=T0, sent_last_id=None, status=200, stream_seq=0, end=T0 + 1.4)
    first.frames = [(2, "interaction.add", IX), (3, "interaction.add", PIX)]
    second = Segment(door=1, start=T0 + 1.4, sent_last_id=3, status=200, stream_seq=3, end=T0 + 2)
    second.frames = [(5, "interaction.answered", IX), (6, "interaction.answered", PIX)]
    history.sse = [SseHistory("sse-0", [first, second])]
    return history


def run_check(history: History, log: list[LogEntry], **options: Any) -> Report:
    options.setdefault("effects", [("r1", RUN)])
    options.setdefault("executions", [("r1", RUN)])
    return check(history, log, **options)


def rules(report: Report) -> list[tuple[str, str]]:
    return [(v.category, v.rule) for v in report.violations]


def test_a_clean_history_has_no_violation() -> None:
    """Every acknowledged operation on the log, each run resumed once: nothing to report."""
    report = run_check(clean_history(), clean_log())
    assert report.violations == []
    assert report.ok


def test_a_second_run_resumed_for_one_park_is_reported_duplicated() -> None:
    """Two RunResumed for the run's one park break "one RunResumed per park"."""
    log = clean_log()
    log.append(LogEntry(seq=9, subject="ev", time=T0 + 1.9, event=resumed("r2", 1.9)))
    report = run_check(clean_history(), log)
    assert rules(report) == [("duplicated", "one RunResumed per park")]
    assert "resume ids ['r1', 'r2']" in report.violations[0].detail


def test_an_effect_committed_under_two_resume_ids_is_reported_duplicated() -> None:
    """The flow's effect committed twice for one run, once under a resume id the log never held."""
    report = run_check(clean_history(), clean_log(), effects=[("r1", RUN), ("r-ghost", RUN)])
    assert rules(report) == [
        ("duplicated", "one committed effect per run"),
        ("duplicated", "an effect only under a resume id the log holds"),
    ]


def test_an_acknowledged_answer_missing_from_the_log_is_reported_lost() -> None:
    """A 200 from the answer door whose InteractionAnswered is not on the log is a lost answer
    (and the ask that returned it, and the SSE frame it would have been)."""
    log = [
        e
        for e in clean_log()
        if not (isinstance(e.event, InteractionAnswered) and e.event.interaction_id == IX)
    ]
    history = clean_history()
    history.sse[0].segments[1].frames = [(6, "interaction.answered", PIX)]
    report = run_check(history, log)
    assert ("lost", "acknowledged answer on the log") in rules(report)
    assert ("lost", "an answered ask is on the log") in rules(report)
    assert report.totals["lost"] == 2


def test_a_gap_and_a_repeated_id_in_a_resumed_sse_client_are_reported() -> None:
    """A reconnected client that skipped an event of the log, or got one twice."""
    history = clean_history()
    history.sse[0].segments[1].frames = [(3, "interaction.add", PIX), (6, "interaction.answered", PIX)]
    report = run_check(history, clean_log())
    assert rules(report) == [
        ("duplicated", "an SSE client sees each id once, in order"),
        ("lost", "a resumed SSE client misses no event"),
    ]
    assert "seq 5 InteractionAnswered missing" in report.violations[1].detail


def test_a_limit_refusal_under_the_cap_is_reported_wrongly_refused() -> None:
    """InteractionLimitError while one question was open, with a cap of 1000."""
    history = clean_history()
    history.ops.append(
        op(
            "ask",
            1.2,
            1.25,
            "refused",
            ids={"question": "sync-refused"},
            error="InteractionLimitError",
            message="1000 open interactions",
        )
    )
    report = run_check(history, clean_log(), cap=1000)
    assert rules(report) == [("wrongly_refused", "the cap refuses only at the cap")]
    assert report.violations[0].detail.endswith("open at most 2")


def test_a_404_for_a_recorded_question_and_a_stale_read_are_reported() -> None:
    """The answer door said 404 for a question already on the log, and the other door replica
    did not see an acknowledged answer right after it."""
    history = clean_history()
    history.ops.insert(
        2, op("answer", 1.3, 1.35, "refused", ids={"interaction_id": IX, "question": QUESTION}, status=404)
    )
    history.ops[-1].value = {"data": {"status": "pending"}}
    report = run_check(history, clean_log())
    assert rules(report) == [
        ("wrongly_refused", "404 only for a question not recorded or removed"),
        ("stale", "a read on the other door right after the answer sees it"),
    ]


def test_a_sync_ask_past_its_deadline_and_an_answered_timeout_are_reported() -> None:
    """An ask that returned 40 s after it began with a 30 s timeout is late; one that raised a
    timeout although its answer was on the log in time lost that answer."""
    history = clean_history()
    history.ops[1] = op(
        "ask",
        1.0,
        41.0,
        "refused",
        ids={"question": QUESTION, "interaction_id": IX},
        error="InteractionTimeoutError",
        message="no answer",
    )
    report = run_check(history, clean_log())
    assert rules(report) == [
        ("late", "a sync ask ends by its deadline"),
        ("lost", "an answer recorded in time reaches its asker"),
    ]


def test_violations_are_counted_against_the_fault_whose_window_holds_them() -> None:
    """A violation after a fault's start (and before the next) is that fault's; before it, the
    baseline's."""
    log = clean_log()
    log.append(LogEntry(seq=9, subject="ev", time=T0 + 1.9, event=resumed("r2", 1.9)))
    fault = FaultRecord(kind="kill_stream_leader", target="n1", start=T0 + 1.85, end=T0 + 1.95)
    report = run_check(clean_history(), log, faults=[fault], stopped_at=T0 + 3)
    rows = {row["kind"]: row for row in summary(report)}
    assert rows["kill_stream_leader"]["duplicated"] == 1
    assert rows["none"]["duplicated"] == 0
    assert report.faults[0].fault is fault
    assert report.baseline.tried == len(clean_history().ops)


def test_recovery_is_the_time_until_the_cycle_rate_is_back_at_80_percent_of_before() -> None:
    """10 cycles a second, none for 3 s after the fault's start, then 10 a second again: the
    rate is back (over 2 s) 5 s after the start; a rate that never returns is None; a fault that
    costs nothing recovers at 0; a later dip (the next fault) does not count against this one."""
    steady = [T0 - 10 + i / 10 for i in range(100)]
    after = [T0 + 3 + i / 10 for i in range(100)]
    rate, recovery = recovery_seconds([*steady, *after], T0, T0 + 13)
    assert rate == pytest.approx(10, rel=0.05)
    assert recovery == pytest.approx(5.0, abs=0.6)
    assert recovery_seconds(steady, T0, T0 + 13) == (pytest.approx(10, rel=0.05), None)
    unbroken = [T0 - 10 + i / 10 for i in range(230)]
    assert recovery_seconds(unbroken, T0, T0 + 13)[1] == 0.0
    dip_later = [c for c in [*steady, *after] if not T0 + 10 <= c < T0 + 11.5]
    assert recovery_seconds(dip_later, T0, T0 + 13)[1] == pytest.approx(5.0, abs=0.6)
