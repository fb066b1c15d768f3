"""The park-on-subject view: one ``parked_entries`` row per caller ask (docs/caller-asks.md).

Applied by the projector in its batch transaction. Each write is guarded by the row's
``last_seq``, so the rows come out the same whatever order events are applied in, and a
replayed event changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from layby_contracts.events import (
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
    InteractionSettled,
    InteractionTaken,
    VisitRecorded,
)
from layby_server.store.eventlog import StoredEvent

_ASKED = """
INSERT INTO parked_entries AS r (interaction_id, subject, run_id, status, on_expiry, expiry_at,
    created_at, last_seq)
VALUES ($1, $2, $3, 'asking', $4, $5, $6, $7)
ON CONFLICT (interaction_id) DO UPDATE SET
    subject = EXCLUDED.subject, run_id = EXCLUDED.run_id, on_expiry = EXCLUDED.on_expiry,
    expiry_at = EXCLUDED.expiry_at, created_at = EXCLUDED.created_at
"""

_STATUS = """
INSERT INTO parked_entries AS r (interaction_id, subject, status, settled_at, last_seq)
VALUES ($1, '', $2, $3, $4)
ON CONFLICT (interaction_id) DO UPDATE SET
    status = CASE WHEN r.last_seq < EXCLUDED.last_seq THEN EXCLUDED.status ELSE r.status END,
    settled_at = CASE WHEN r.last_seq < EXCLUDED.last_seq THEN EXCLUDED.settled_at ELSE r.settled_at END,
    last_seq = GREATEST(r.last_seq, EXCLUDED.last_seq)
"""


_RESOLVED_BY_RUN = """
UPDATE runs SET resumed_interactions = (
    SELECT jsonb_agg(DISTINCT x ORDER BY x) FROM jsonb_array_elements_text(
        coalesce(resumed_interactions, '[]'::jsonb) || $2::jsonb) x
) WHERE run_id = $1
"""


def parked_changes(batch: Sequence[StoredEvent]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The writes a batch makes to ``parked_entries`` (and runs' ``resumed_interactions``), one
    statement with all its rows each, in the order the statements first appear (every write is
    guarded by sequence, so grouping them changes nothing)."""
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for sql, args in _changes(batch):
        grouped.setdefault(sql, []).append(args)
    return list(grouped.items())


def _changes(batch: Sequence[StoredEvent]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    for stored in batch:
        ev = stored.event
        seq = stored.seq
        match ev:
            case InteractionAsked() if ev.to == "caller":
                yield (
                    _ASKED,
                    (
                        ev.interaction_id,
                        ev.subject or "",
                        ev.run_id,
                        ev.on_expiry,
                        ev.expiry_at,
                        ev.created_at,
                        seq,
                    ),
                )
            case InteractionAnswered() if ev.to == "caller":
                yield _STATUS, (ev.interaction_id, "running", None, seq)
            case InteractionSettled():
                status = "gone" if ev.outcome == "parked" else ev.outcome
                yield _STATUS, (ev.interaction_id, status, ev.settled_at, seq)
            case InteractionTaken():
                yield _STATUS, (ev.interaction_id, "gone", None, seq)
            case InteractionRemoved() if ev.to == "caller":
                yield _STATUS, (ev.interaction_id, "gone", None, seq)
            case VisitRecorded() if ev.kind == "tool" and ev.by.startswith("run:") and ev.error is None:
                resolved = [*ev.cancelled, *ev.resumed, *(t.id for t in ev.taken)]
                if resolved:
                    yield (
                        _RESOLVED_BY_RUN,
                        (ev.by.removeprefix("run:"), msgspec.json.encode(resolved).decode()),
                    )
            case _:
                continue
