"""The checker: a ``History`` of what clients tried and saw, judged against the event log.

``check`` is pure (no I/O): it takes the history, the log (``LogEntry``: sequence, subject, the
time JetStream stored it, the decoded event), the effects and executions the parked flow committed
(tests/faults/flows.py) and the faults' windows, and reports every violation of these rules:

- **lost**: an acknowledged operation whose event is not on the log (a sync ask that returned, an
  answer or a callback taken with 200, a run start); a value that came back wrong; a sync ask that
  timed out though the log holds its answer in time; a started and answered run that never
  finished; an SSE frame the stream should have sent a resumed client and did not;
- **duplicated**: two resolutions of one question, two acknowledgments of one answer, a run
  resumed more often than it parked, a resume id twice, two ``RunFinished``, an effect per run
  more than once or under a resume id the log does not hold, an SSE id seen twice or out of order;
- **wrongly refused**: ``InteractionLimitError`` while fewer questions than the cap were open; a
  refusal our (valid) input never justifies; a 404 or 409 the log's state at that moment does not
  justify;
- **late**: a sync ask that ended after its deadline plus ``DEADLINE_MARGIN``, or with an error
  that is not Layby's own;
- **stale**: a read of an answered question's outcome, on the other door replica right after the
  answer was acknowledged, that did not see the answer.

Each violation has a time, so it is counted against the fault whose window holds it; the per-fault
recovery time comes from the rate of completed sync cycles (``recovery_seconds``).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext

from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    RunFailed,
    RunFinished,
    RunParked,
    RunResumed,
    RunStarted,
    decode_event,
)
from layby_domain.interaction import of_caller_ask
from tests.faults.harness import FaultRecord
from tests.faults.load import EXTERNAL, PARK, SYNC, History, Op

DEADLINE_MARGIN = 3.0
"""Seconds past a sync ask's timeout it may take to return (its withdrawal is bounded by 1 s)."""
CLOCK_SLACK = 0.05
"""Seconds of slack between a client's clock and JetStream's stored time (one machine)."""
BUCKET = 0.5
ROLLING_BUCKETS = 4
RECOVERED = 0.8
PRE_FAULT_SECONDS = 8.0
ALLOWED_REFUSALS = frozenset({"Unavailable", "Transient", "InteractionTimeoutError"})
"""Refusals a sync ask or a run start may meet under faults: nothing was decided, try again."""
CATEGORIES = ("lost", "duplicated", "wrongly_refused", "late", "stale")


@dataclass(frozen=True)
class LogEntry:
    seq: int
    subject: str
    time: float
    event: Any


@dataclass(frozen=True)
class Violation:
    category: str
    at: float
    rule: str
    detail: str


@dataclass
class FaultStats:
    fault: FaultRecord
    tried: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    recovery: float | None = None
    """Seconds from the fault's start until the sync cycle rate stays at >= 80 % of before."""
    rate_before: float = 0.0


@dataclass
class Report:
    violations: list[Violation]
    faults: list[FaultStats]
    baseline: FaultStats
    totals: Counter[str]

    @property
    def ok(self) -> bool:
        return not self.violations


async def read_log(js: JetStreamContext, stream: str, subjects: str) -> list[LogEntry]:
    """Every message of ``stream``, in order, with the time JetStream stored it."""
    info = await js.stream_info(stream)
    first, last = int(info.state.first_seq), int(info.state.last_seq)
    out: list[LogEntry] = []
    if last < max(first, 1) or info.state.messages == 0:
        return out
    sub = await js.subscribe(
        subjects,
        ordered_consumer=True,
        config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
        pending_msgs_limit=100_000,
    )
    try:
        while True:
            msg = await sub.next_msg(timeout=10)
            meta = msg.metadata
            out.append(
                LogEntry(
                    meta.sequence.stream, msg.subject, meta.timestamp.timestamp(), decode_event(msg.data)
                )
            )
            if meta.sequence.stream >= last:
                return out
    finally:
        await sub.unsubscribe()


def served_by_stream(event: Any) -> str | None:
    """The frame event the stream door sends for a log event, or None (docs/doors/stream.md#skipped-events)."""
    if not isinstance(event, InteractionAsked | InteractionAnswered | InteractionRemoved):
        return None
    if of_caller_ask(event):
        return None
    match event:
        case InteractionAsked():
            return "interaction.add"
        case InteractionAnswered():
            return "interaction.answered"
        case InteractionRemoved():
            return "interaction.removed" if event.group_id else None


class _Index:
    """The log, indexed for the rules."""

    def __init__(self, log: list[LogEntry]) -> None:
        self.log = log
        self.by_seq = {e.seq: e for e in log}
        self.asked: dict[str, list[LogEntry]] = defaultdict(list)
        self.resolved: dict[str, list[LogEntry]] = defaultdict(list)
        self.by_question: dict[str, list[LogEntry]] = defaultdict(list)
        self.runs: dict[str, list[LogEntry]] = defaultdict(list)
        for entry in log:
            ev = entry.event
            if isinstance(ev, InteractionAsked):
                self.asked[ev.interaction_id].append(entry)
                self.by_question[ev.question].append(entry)
            elif isinstance(ev, InteractionAnswered | InteractionRemoved):
                self.resolved[ev.interaction_id].append(entry)
            run_id = getattr(ev, "run_id", None)
            if isinstance(ev, RunStarted | RunParked | RunResumed | RunFinished | RunFailed) and run_id:
                self.runs[run_id].append(entry)
        # Open person questions over time, for the cap rule: (time, +1 / -1) in log order.
        self.open_steps: list[tuple[float, int]] = []
        for entry in log:
            ev = entry.event
            if of_caller_ask(ev):
                continue
            if isinstance(ev, InteractionAsked):
                self.open_steps.append((entry.time, 1))
            elif isinstance(ev, InteractionAnswered | InteractionRemoved) and ev.interaction_id in self.asked:
                self.open_steps.append((entry.time, -1))
        self.open_times = [t for t, _ in self.open_steps]

    def iid_of(self, op: Op) -> str | None:
        if "interaction_id" in op.ids:
            return op.ids["interaction_id"]
        found = self.by_question.get(op.ids.get("question", ""))
        return found[0].event.interaction_id if found else None

    def answered(self, iid: str) -> LogEntry | None:
        return next((e for e in self.resolved.get(iid, []) if isinstance(e.event, InteractionAnswered)), None)

    def max_open(self, start: float, end: float) -> int:
        """The most person questions open at once between ``start`` and ``end``."""
        i = bisect.bisect_right(self.open_times, start)
        level = sum(step for _, step in self.open_steps[:i])
        peak = level
        for _, step in self.open_steps[i : bisect.bisect_right(self.open_times, end)]:
            level += step
            peak = max(peak, level)
        return peak


def check(
    history: History,
    log: list[LogEntry],
    *,
    effects: Iterable[tuple[str, str]] = (),
    executions: Iterable[tuple[str, str]] = (),
    faults: list[FaultRecord] | None = None,
    cap: int | None = 1000,
    stopped_at: float | None = None,
) -> Report:
    """Judge ``history`` against ``log``. ``effects`` and ``executions``: (resume id, run id) rows
    the flow committed; ``cap``: ``INTERACTIONS_MAX_CONCURRENT``; ``stopped_at``: when the load
    stopped (the last fault's window ends there)."""
    idx = _Index(log)
    found: list[Violation] = []

    def flag(category: str, at: float, rule: str, detail: str) -> None:
        found.append(Violation(category, at, rule, detail))

    _check_ops(history, idx, cap, flag)
    _check_runs(history, idx, list(effects), list(executions), flag)
    _check_resolutions(idx, flag)
    _check_sse(history, idx, flag)
    return _tally(history, found, faults or [], stopped_at)


Flag = Any


def _check_ops(history: History, idx: _Index, cap: int | None, flag: Flag) -> None:
    acks: dict[str, list[Op]] = defaultdict(list)
    for op in history.ops:
        if op.result == "cancelled":
            continue
        iid = idx.iid_of(op)
        what = f"{op.kind} {op.ids} ({op.result} {op.error} {op.message[:160]!r}"
        what += f" status {op.status} {str(op.value)[:160]!r})" if op.status is not None else ")"
        if op.kind in ("ask", "external_ask"):
            _check_ask(history, idx, op, iid, cap, what, flag)
        elif op.kind == "run_start":
            if op.result == "ok" and op.ids["run_id"] not in idx.runs:
                flag("lost", op.start, "acknowledged run start on the log", what)
            if op.result == "refused":
                _judge_refusal(idx, op, cap, what, flag)
        elif op.kind == "answer":
            if op.result == "ok":
                assert iid is not None
                acks[iid].append(op)
                entry = idx.answered(iid)
                if entry is None or entry.event.answer != op.ids["question"]:
                    flag("lost", op.start, "acknowledged answer on the log", f"{what}; log: {entry}")
            elif op.result == "refused":
                _judge_answer_refusal(idx, op, iid, what, flag)
        elif op.kind == "callback":
            status = op.value.get("data", {}).get("status") if isinstance(op.value, dict) else None
            if op.result == "ok" and status == "answered":
                if iid is None or idx.answered(iid) is None:
                    flag("lost", op.start, "acknowledged callback answer on the log", what)
                else:
                    acks[iid].append(op)
            elif (op.result == "ok" and status == "already_answered") or op.result == "refused":
                _judge_callback_refusal(idx, op, iid, status, what, flag)
        elif op.kind == "read_after_answer" and op.result != "indeterminate":
            status = op.value.get("data", {}).get("status") if isinstance(op.value, dict) else None
            if status != "answered":
                flag("stale", op.start, "a read on the other door right after the answer sees it", what)
    for iid, ops in acks.items():
        if len(ops) > 1:
            flag(
                "duplicated", ops[1].start, "one acknowledged answer per question", f"{iid}: {len(ops)} acks"
            )


def _check_ask(
    history: History, idx: _Index, op: Op, iid: str | None, cap: int | None, what: str, flag: Flag
) -> None:
    question = op.ids["question"]
    if op.result in ("ok", "refused") and op.end - op.start > history.ask_timeout + DEADLINE_MARGIN:
        flag("late", op.start, "a sync ask ends by its deadline", f"{what} took {op.end - op.start:.1f}s")
    if op.result == "indeterminate":
        flag("late", op.start, "a sync ask raises only Layby's own errors", what)
    if op.result == "ok":
        expected: Any = question if op.kind == "ask" else {"q": question}
        answered = idx.answered(iid) if iid else None
        if op.value != expected:
            flag("lost", op.start, "the asker gets the answer given", f"{what} returned {op.value!r}")
        if iid is None or answered is None:
            flag("lost", op.start, "an answered ask is on the log", what)
    elif op.result == "refused":
        if op.error == "InteractionTimeoutError" and iid is not None:
            answered = idx.answered(iid)
            asked = idx.asked.get(iid)
            if answered is not None and asked and answered.event.answered_at <= asked[0].event.timeout_at:
                flag(
                    "lost",
                    op.start,
                    "an answer recorded in time reaches its asker",
                    f"{what}; answered at {answered.event.answered_at.isoformat()} (seq {answered.seq}), "
                    f"deadline {asked[0].event.timeout_at.isoformat()}",
                )
        _judge_refusal(idx, op, cap, what, flag)


def _judge_refusal(idx: _Index, op: Op, cap: int | None, what: str, flag: Flag) -> None:
    if op.error == "InteractionLimitError":
        peak = idx.max_open(op.start - CLOCK_SLACK, op.end + CLOCK_SLACK)
        if cap is None or peak < cap:
            flag(
                "wrongly_refused", op.start, "the cap refuses only at the cap", f"{what}; open at most {peak}"
            )
    elif op.error not in ALLOWED_REFUSALS:
        flag("wrongly_refused", op.start, "valid input is not refused", what)


def _judge_answer_refusal(idx: _Index, op: Op, iid: str | None, what: str, flag: Flag) -> None:
    asked = idx.asked.get(iid or "", [])
    resolved = idx.resolved.get(iid or "", [])
    if op.status == 409:
        if not any(e.time <= op.end + CLOCK_SLACK for e in resolved):
            flag("wrongly_refused", op.start, "409 only for a decided question", what)
    elif op.status == 404:
        removed = any(
            isinstance(e.event, InteractionRemoved) and e.time <= op.end + CLOCK_SLACK for e in resolved
        )
        if asked and asked[0].time < op.start - CLOCK_SLACK and not removed:
            flag("wrongly_refused", op.start, "404 only for a question not recorded or removed", what)
    else:
        flag("wrongly_refused", op.start, "a valid answer is not refused", what)


def _judge_callback_refusal(
    idx: _Index, op: Op, iid: str | None, status: str | None, what: str, flag: Flag
) -> None:
    asked = idx.asked.get(iid or "", [])
    resolved = idx.resolved.get(iid or "", [])
    if status == "already_answered":
        if not any(
            isinstance(e.event, InteractionAnswered) and e.time <= op.end + CLOCK_SLACK for e in resolved
        ):
            flag("wrongly_refused", op.start, "already_answered only for an answered question", what)
    elif op.status == 404:
        removed = any(e.time <= op.end + CLOCK_SLACK for e in resolved)
        if asked and asked[0].time < op.start - CLOCK_SLACK and not removed:
            flag(
                "wrongly_refused",
                op.start,
                "404 only for a ticket whose question is not recorded or gone",
                what,
            )
    else:
        flag("wrongly_refused", op.start, "a valid callback is not refused", what)


def _check_resolutions(idx: _Index, flag: Flag) -> None:
    for iid, entries in idx.asked.items():
        if len(entries) > 1:
            flag(
                "duplicated",
                entries[1].time,
                "one asked event per question",
                f"{iid}: seqs {[e.seq for e in entries]}",
            )
    for iid, entries in idx.resolved.items():
        if len(entries) > 1:
            kinds = [(e.seq, type(e.event).__name__) for e in entries]
            flag("duplicated", entries[1].time, "one resolution per question", f"{iid}: {kinds}")


def _check_runs(
    history: History,
    idx: _Index,
    effects: list[tuple[str, str]],
    executions: list[tuple[str, str]],
    flag: Flag,
) -> None:
    answered_tags = {op.ids["question"] for op in history.ops if op.kind == "answer" and op.result == "ok"}
    effects_by_run: dict[str, list[str]] = defaultdict(list)
    for resume_id, run_id in effects:
        effects_by_run[run_id].append(resume_id)
    executed = Counter(resume_id for resume_id, _ in executions)
    for op in history.ops:
        if op.kind != "run_start" or op.result != "ok":
            continue
        run_id, tag = op.ids["run_id"], op.ids["question"]
        entries = idx.runs.get(run_id, [])
        events = [e.event for e in entries]
        parked = [e for e in events if isinstance(e, RunParked)]
        resumed = [e for e in events if isinstance(e, RunResumed)]
        finished = [e for e in events if isinstance(e, RunFinished)]
        started = [e for e in events if isinstance(e, RunStarted)]
        at = entries[-1].time if entries else op.start
        detail = f"run {run_id}: {[type(e).__name__ for e in events]}"
        if len(started) > 1:
            flag("duplicated", at, "one RunStarted per run", detail)
        if len(resumed) > len(parked) or len({r.resume_id for r in resumed}) < len(resumed):
            flag(
                "duplicated",
                at,
                "one RunResumed per park",
                f"{detail}; resume ids {[r.resume_id for r in resumed]}",
            )
        if len(finished) > 1:
            flag("duplicated", at, "one RunFinished per run", detail)
        mine = effects_by_run.get(run_id, [])
        if len(mine) > 1:
            flag("duplicated", at, "one committed effect per run", f"{detail}; effects under {mine}")
        known = {r.resume_id for r in resumed}
        for resume_id in mine:
            if resume_id not in known:
                flag(
                    "duplicated",
                    at,
                    "an effect only under a resume id the log holds",
                    f"{detail}; {resume_id}",
                )
        if tag in answered_tags:
            if len(finished) != 1:
                flag("lost", at, "an answered park resumes and finishes", detail)
            elif finished[0].result != {"tag": tag, "value": tag}:
                flag("lost", at, "the run resumes with the answer given", f"{detail}; {finished[0].result!r}")
            elif not mine:
                flag("lost", at, "a finished run committed its effect", detail)
    for resume_id, n in executed.items():
        outcomes = (
            [
                e
                for entries in idx.runs.values()
                for e in entries
                if isinstance(e.event, RunFinished | RunFailed) and e.event.resume_id == resume_id
            ]
            if n > 1
            else []
        )
        if len(outcomes) > 1:
            flag(
                "duplicated", outcomes[1].time, "two executions of one resume id never both commit", resume_id
            )


def _check_sse(history: History, idx: _Index, flag: Flag) -> None:
    for client in history.sse:
        seen: list[tuple[int, str, float]] = []
        begin: int | None = None
        for seg in client.segments:
            if seg.status == 200 and begin is None and seg.stream_seq is not None:
                begin = seg.stream_seq
            seen.extend((fid, event, seg.start) for fid, event, _ in seg.frames if event != "stream.evicted")
        if begin is None or not seen:
            continue
        previous = begin
        for fid, event, at in seen:
            if fid <= previous:
                flag(
                    "duplicated",
                    at,
                    "an SSE client sees each id once, in order",
                    f"{client.name}: {fid} after {previous}",
                )
            previous = max(previous, fid)
            entry = idx.by_seq.get(fid)
            want = served_by_stream(entry.event) if entry else None
            if want != event:
                flag(
                    "lost",
                    at,
                    "an SSE frame is its log event",
                    f"{client.name}: id {fid} {event}, log says {want}",
                )
        ids = {fid for fid, _, _ in seen}
        last = max(ids)
        for entry in idx.log:
            if begin < entry.seq <= last and entry.seq not in ids and served_by_stream(entry.event):
                flag(
                    "lost",
                    entry.time,
                    "a resumed SSE client misses no event",
                    f"{client.name}: seq {entry.seq} {type(entry.event).__name__} missing "
                    f"(between {begin} and {last}){_segment_of(client.segments, entry.seq)}",
                )


def _segment_of(segments: list[Any], seq: int) -> str:
    for i, seg in enumerate(segments):
        ids = [f[0] for f in seg.frames]
        if ids and ids[0] > seq:
            prev = segments[i - 1] if i else None
            return (
                f"; the connection after it sent Last-Event-ID {seg.sent_last_id}, got "
                f"Layby-Stream-Seq {seg.stream_seq}, first id {ids[0]}"
                + (f"; the one before ended {prev.reason!r}" if prev else "")
            )
    return ""


def _tally(
    history: History, found: list[Violation], faults: list[FaultRecord], stopped_at: float | None
) -> Report:
    end_all = stopped_at or max((op.end for op in history.ops), default=0.0)
    ordered = sorted(faults, key=lambda f: f.start)
    windows = [
        (f, f.start, ordered[i + 1].start if i + 1 < len(ordered) else end_all) for i, f in enumerate(ordered)
    ]
    baseline = FaultStats(FaultRecord(kind="none", target="", start=0.0, end=0.0))
    stats = [FaultStats(f) for f in ordered]

    def slot(at: float) -> FaultStats:
        for s, (_, start, end) in zip(stats, windows, strict=True):
            if start <= at < end:
                return s
        return baseline

    for op in history.ops:
        if op.result != "cancelled":
            slot(op.start).tried += 1
    totals: Counter[str] = Counter()
    for v in found:
        slot(v.at).counts[v.category] += 1
        totals[v.category] += 1
    cycles = sorted(op.end for op in history.ops if op.kind in ("ask", "external_ask") and op.result == "ok")
    for s, (_, start, end) in zip(stats, windows, strict=True):
        s.rate_before, s.recovery = recovery_seconds(cycles, start, end)
    return Report(violations=found, faults=stats, baseline=baseline, totals=totals)


def recovery_seconds(cycles: list[float], start: float, end: float) -> tuple[float, float | None]:
    """(rate before, seconds after ``start`` until the system serves at its previous rate again).

    The rate is completed cycles per second in 0.5 s buckets, over a rolling 2 s. The fault's
    disruption begins at the first window after ``start`` below 80 % of the rate before (none: it
    cost nothing, 0.0); it ends at the first window after that, wholly past the disruption's
    start, at 80 % again. None when that never came before ``end``. A dip later on (noise on a
    busy machine, the next fault) is not counted against this fault."""
    before = bisect.bisect_left(cycles, start) - bisect.bisect_left(cycles, start - PRE_FAULT_SECONDS)
    rate = before / PRE_FAULT_SECONDS
    if rate == 0:
        return 0.0, None
    n = max(1, math.ceil((end - start) / BUCKET))
    counts = [
        bisect.bisect_left(cycles, start + (i + 1) * BUCKET) - bisect.bisect_left(cycles, start + i * BUCKET)
        for i in range(n)
    ]
    floor = RECOVERED * rate * ROLLING_BUCKETS * BUCKET

    def served(first: int) -> bool:
        return sum(counts[first : first + ROLLING_BUCKETS]) >= floor

    disrupted = next((i for i in range(n - ROLLING_BUCKETS + 1) if not served(i)), None)
    if disrupted is None:
        return rate, 0.0
    back = next((i for i in range(disrupted + 1, n - ROLLING_BUCKETS + 1) if served(i)), None)
    if back is None:
        return rate, None
    return rate, (back + ROLLING_BUCKETS) * BUCKET


def summary(report: Report) -> list[dict[str, Any]]:
    """One row per fault kind: tried, each violation category, p99 recovery seconds."""
    rows: dict[str, dict[str, Any]] = {}
    recoveries: dict[str, list[float]] = defaultdict(list)
    for s in [report.baseline, *report.faults]:
        row = rows.setdefault(
            s.fault.kind, {"kind": s.fault.kind, "faults": 0, "tried": 0, **dict.fromkeys(CATEGORIES, 0)}
        )
        row["faults"] += 0 if s is report.baseline else 1
        row["tried"] += s.tried
        for c in CATEGORIES:
            row[c] += s.counts[c]
        if s is not report.baseline:
            recoveries[s.fault.kind].append(math.inf if s.recovery is None else s.recovery)
    for kind, values in recoveries.items():
        values.sort()
        rows[kind]["p99_recovery_s"] = values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)]
    return list(rows.values())


def format_table(rows: list[dict[str, Any]]) -> str:
    cols = ["kind", "faults", "tried", *CATEGORIES, "p99_recovery_s"]
    cells = [[_cell(row.get(c, "")) for c in cols] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return "never" if math.isinf(value) else f"{value:.1f}"
    return str(value)


def encode_report(report: Report) -> bytes:
    """The violations and per-fault numbers as JSON, for a run's record."""
    return msgspec.json.encode(
        {
            "violations": [v.__dict__ for v in report.violations],
            "faults": [
                {
                    "kind": s.fault.kind,
                    "target": s.fault.target,
                    "start": s.fault.start,
                    "end": s.fault.end,
                    "tried": s.tried,
                    "counts": dict(s.counts),
                    "rate_before": s.rate_before,
                    "recovery": s.recovery,
                }
                for s in report.faults
            ],
        }
    )


__all__ = ["EXTERNAL", "PARK", "SYNC", "LogEntry", "Report", "Violation", "check", "read_log", "summary"]
