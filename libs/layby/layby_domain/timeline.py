"""A run's timeline (docs/doors/runs.md#the-timeline): the run's events, its steps and the history of
every question it asked, as one list in time order with the wait before each entry. Pure: the door
reads the log, this arranges."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from msgspec import UNSET

from layby_contracts.events import (
    Event,
    InteractionAsked,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunParked,
    RunResumed,
    RunStarted,
    RunStepRecorded,
    StepRecorded,
)
from layby_contracts.http.timeline import TimelineEntry
from layby_domain.history import entry_of


def asked_ids(run_events: Iterable[Event]) -> list[str]:
    """The questions a run parked on (not the child runs it called), in the order it asked them."""
    seen: dict[str, None] = {}
    for event in run_events:
        if isinstance(event, RunParked):
            for ask in event.asks:
                if ask.kind == "ask":
                    seen.setdefault(ask.interaction_id, None)
    return list(seen)


def timeline_of(
    run_events: Iterable[Event],
    step_events: Iterable[Event],
    questions: Mapping[str, list[tuple[int, Event]]],
) -> list[TimelineEntry]:
    """Every entry of a run's story, oldest first (ties keep the order they were recorded in), each
    with the milliseconds since the one before (``after_ms``)."""
    raw: list[dict[str, Any]] = []
    for event in run_events:
        entry = _run_entry(event)
        if entry is not None:
            raw.append(entry)
    for event in step_events:
        if isinstance(event, StepRecorded):
            raw.append(_step(event.step, event.recorded_at, event.generation))
    for interaction_id, events in questions.items():
        raw.extend(_question_entries(interaction_id, events))
    raw.sort(key=lambda e: e["at"])
    entries: list[TimelineEntry] = []
    previous: datetime | None = None
    for fields in raw:
        at: datetime = fields["at"]
        waited = 0 if previous is None else max(0, round((at - previous).total_seconds() * 1000))
        entries.append(TimelineEntry(after_ms=waited, **fields))
        previous = at
    return entries


def _run_entry(event: Event) -> dict[str, Any] | None:
    moved = getattr(event, "moved", None)
    if isinstance(event, RunParked | RunResumed | RunFailed) and moved is not None:
        return {
            "kind": "moved",
            "at": moved.at,
            "generation": event.generation,
            "by": moved.by,
            "detail": f"version {moved.from_version} to {event.version}",
        }
    match event:
        case RunStarted():
            return {"kind": "started", "at": event.started_at, "by": event.identity, "detail": event.flow}
        case RunParked():
            return {
                "kind": "parked",
                "at": event.parked_at,
                "generation": event.generation,
                "detail": f"waits on {len(event.asks)}",
            }
        case RunResumed():
            kind = "retried" if event.retried_by is not None else "resumed"
            return {
                "kind": kind,
                "at": event.resumed_at,
                "generation": event.generation,
                "by": event.retried_by,
            }
        case RunFinished():
            return {"kind": "finished", "at": event.finished_at, "generation": event.generation}
        case RunFailed():
            return {
                "kind": "failed",
                "at": event.failed_at,
                "generation": event.generation,
                "error": event.error,
            }
        case RunCancelled():
            return {
                "kind": "cancelled",
                "at": event.cancelled_at,
                "generation": event.generation,
                "by": event.by,
                "detail": f"was {event.was}",
            }
        case RunStepRecorded():  # steps recorded on the run's own subject, before the step streams
            return _step(event.step, event.recorded_at, event.generation)
    return None


def _step(step: Any, at: datetime, generation: int) -> dict[str, Any]:
    return {
        "kind": "step",
        "at": at,
        "generation": generation,
        "name": step.name,
        "attempts": step.attempts,
        "error": step.error,
    }


def _question_entries(interaction_id: str, events: list[tuple[int, Event]]) -> list[dict[str, Any]]:
    """A question's history entries (``layby_domain.history``) as timeline entries naming it."""
    out: list[dict[str, Any]] = []
    asked = next((e for _, e in events if isinstance(e, InteractionAsked)), None)
    if asked is None:
        return out
    for seq, event in events:
        entry = entry_of(seq, event, asked.answer_format)
        if entry is None:
            continue
        fields: dict[str, Any] = {
            "kind": entry.kind,
            "at": entry.at,
            "by": entry.by,
            "via": entry.via,
            "channels": entry.channels,
            "interaction_id": interaction_id,
            "question": asked.question,
            "detail": entry.reason or entry.detail or (", ".join(entry.to) if entry.to else None),
        }
        if entry.kind == "asked" and entry.audience:
            fields["detail"] = f"to {entry.audience}"
        if entry.answer is not UNSET and entry.kind in ("answered", "voted"):
            fields["answer"] = entry.answer
        out.append(fields)
    return out
