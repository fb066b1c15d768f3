"""A question's history from its events (docs/doors/history.md), given the log, then the entries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from layby_contracts.events import InteractionAnswered, InteractionRemoved
from layby_contracts.webhooks import WebhookAttempt
from layby_domain.history import history_of
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit

T0 = datetime(2026, 1, 1, tzinfo=UTC)
IID = "0b4e3f4e-2c1a-4d6e-9a51-3f1f0f4c1a2b"


def answered(**fields: object) -> InteractionAnswered:
    base = {
        "interaction_id": IID,
        "group_id": "g",
        "answered_by": "alice",
        "answered_at": T0 + timedelta(seconds=5),
    }
    return InteractionAnswered(**{**base, **fields})  # type: ignore[arg-type]


def test_the_history_says_who_asked_and_who_answered_where_with_log_sequences() -> None:
    asked = interaction_asked(IID, T0, audience="alice", channel="slack")
    entries = history_of([(3, asked), (9, answered(answer="ship it", via="channel", channels=["slack"]))])
    assert [(e.kind, e.seq, e.by) for e in entries] == [("asked", 3, "ops"), ("answered", 9, "alice")]
    assert entries[0].channels == ["slack"] and entries[0].audience == "alice"
    assert (entries[1].via, entries[1].answer) == ("channel", "ship it")


def test_a_sensitive_answer_never_appears_in_the_history() -> None:
    entries = history_of([(1, interaction_asked(IID, T0, sensitive=True)), (2, answered(sensitive=True))])
    assert entries[1].answer is msgspec.UNSET
    assert "answer" not in msgspec.json.decode(msgspec.json.encode(entries[1]))
    assert entries[1].by == "alice"


def test_a_reviews_decision_is_named_in_the_history() -> None:
    asked = interaction_asked(IID, T0, answer_format="review", format_payload={"action": {"name": "pay"}})
    decision = {"decision": "reject", "reason": "wrong vendor"}
    entries = history_of([(1, asked), (2, answered(answer=decision))])
    assert (entries[1].decision, entries[1].reason) == ("reject", "wrong vendor")


def test_a_removal_and_the_webhook_attempts_come_in_time_order() -> None:
    removed = InteractionRemoved(
        interaction_id=IID, group_id="g", reason="timeout", removed_at=T0 + timedelta(seconds=10)
    )
    attempts = [
        WebhookAttempt(
            webhook_id="w",
            interaction_id=IID,
            attempt=2,
            at=T0 + timedelta(seconds=14),
            result="delivered",
            status=200,
        ),
        WebhookAttempt(
            webhook_id="w",
            interaction_id=IID,
            attempt=1,
            at=T0 + timedelta(seconds=11),
            result="failed",
            error="refused",
        ),
    ]
    entries = history_of([(1, interaction_asked(IID, T0)), (4, removed)], attempts)
    assert [(e.kind, e.attempt) for e in entries] == [
        ("asked", None),
        ("removed", None),
        ("webhook_attempt", 1),
        ("webhook_attempt", 2),
    ]
    assert entries[1].reason == "timeout"
    assert (entries[2].detail, entries[3].status) == ("refused", 200)
