"""The interaction aggregate's rules, given/when/then, without I/O (docs/aggregates/interaction.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from layby_contracts.errors import BadInput, Conflict, Forbidden, NotFound
from layby_contracts.events import (
    EXPIRY_ANSWER,
    EXPIRY_ANSWERER,
    InteractionAnswered,
    InteractionAsked,
    InteractionEvent,
    InteractionRemoved,
)
from layby_domain.interaction import (
    Append,
    Facts,
    Interaction,
    Keep,
    decide_answer,
    decide_claim,
    decide_expire,
    decide_prune,
    decide_remove,
    decide_withdrawn,
    evolve,
    withdrawal,
)

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
IX = "0b0c5d4e-6f70-4a81-92a3-b4c5d6e7f801"


def asked(**overrides: Any) -> InteractionAsked:
    fields: dict[str, Any] = {
        "interaction_id": IX,
        "group_id": "g-1",
        "question": "Deploy?",
        "answer_format": "confirm",
        "created_at": NOW,
        "timeout_at": NOW + timedelta(minutes=5),
        "asked_by": "alice",
        "audience": "bob",
        "waiter": "waiter-12345678",
        "run_id": None,
    }
    fields.update(overrides)
    return InteractionAsked(**fields)


def given(*events: InteractionEvent) -> Interaction:
    state = Interaction()
    for seq, event in enumerate(events, start=1):
        state = evolve(state, event, seq)
    return state


def answered_by(who: str) -> InteractionAnswered:
    return InteractionAnswered(
        interaction_id=IX, group_id="g-1", answered_by=who, answered_at=NOW, answer=True
    )


def removed(reason: Any = "timeout") -> InteractionRemoved:
    return InteractionRemoved(interaction_id=IX, group_id="g-1", reason=reason, removed_at=NOW)


def test_state_follows_the_log_asked_then_one_resolution() -> None:
    """An interaction is absent, then pending once asked, then answered or removed."""
    assert given().status == "absent"
    assert given(asked()).status == "pending"
    assert given(asked()).seq == 1
    assert given(asked(), answered_by("bob")).status == "answered"
    assert given(asked(), removed()).status == "removed"
    assert given(asked(), removed()).seq == 2


def test_an_answer_copies_every_fact_of_its_question() -> None:
    """The Answered event carries the question's group, audience, waiter and run."""
    state = given(asked(run_id="11111111-2222-4333-8444-555555555555", mode="async", call=0))
    decision = decide_answer(state, by="bob", restricted=True, answer=True, now=NOW)
    event = decision.event
    assert isinstance(event, InteractionAnswered)
    assert (event.group_id, event.audience, event.waiter, event.run_id) == (
        "g-1",
        "bob",
        "waiter-12345678",
        "11111111-2222-4333-8444-555555555555",
    )
    assert (event.answered_by, event.answered_at, event.answer) == ("bob", NOW, True)


def test_the_first_answer_wins_a_second_gets_conflict() -> None:
    """Answering an answered question is refused with 'Interaction already answered'."""
    with pytest.raises(Conflict, match=r"^Interaction already answered$"):
        decide_answer(given(asked(), answered_by("bob")), by="bob", restricted=False, answer=True, now=NOW)


@pytest.mark.parametrize("state", [given(), given(asked(), removed())], ids=["absent", "removed"])
def test_a_missing_or_removed_question_is_not_found(state: Interaction) -> None:
    """Answering a question that is not pending (and not answered) is a 404."""
    with pytest.raises(NotFound, match=r"^Interaction not found$"):
        decide_answer(state, by="bob", restricted=False, answer=True, now=NOW)


def test_external_questions_are_answered_only_through_their_callback() -> None:
    """The answer door refuses an external question."""
    state = given(
        asked(answer_format="external", format_payload={"link": "https://x.example/{callback_url}"})
    )
    with pytest.raises(BadInput, match=r"^external interactions are answered via their callback URL$"):
        decide_answer(state, by="op", restricted=False, answer={}, now=NOW)


def test_a_restricted_identity_answers_only_what_is_addressed_to_it() -> None:
    """Restricted identities may answer only questions whose audience is them."""
    with pytest.raises(Forbidden, match=r"^interaction is addressed to another identity$"):
        decide_answer(given(asked()), by="carol", restricted=True, answer=True, now=NOW)
    with pytest.raises(
        Forbidden, match=r"^restricted identities may answer only interactions addressed to them$"
    ):
        decide_answer(given(asked(audience=None)), by="carol", restricted=True, answer=True, now=NOW)
    assert decide_answer(given(asked()), by="carol", restricted=False, answer=True, now=NOW).event


def test_an_answer_is_checked_against_the_format() -> None:
    """A confirm question takes a boolean; anything else is a 400 naming the rule."""
    with pytest.raises(BadInput):
        decide_answer(given(asked()), by="bob", restricted=True, answer="yes", now=NOW)


def test_a_sensitive_answer_never_enters_the_event() -> None:
    """For a sensitive question the value travels beside the event, to the secret store."""
    decision = decide_answer(given(asked(sensitive=True)), by="bob", restricted=True, answer=True, now=NOW)
    assert isinstance(decision.event, InteractionAnswered)
    assert decision.event.answer is None
    assert decision.event.sensitive is True
    assert decision.secret is True


def test_a_claim_on_a_resolved_question_keeps_the_resolution() -> None:
    """A callback after an answer is the idempotent success; after a removal, not found."""
    assert decide_claim(given(asked(), answered_by("x")), by="cb", answer={}, now=NOW) == Keep("answered")
    assert decide_claim(given(asked(), removed()), by="cb", answer={}, now=NOW) == Keep("removed")
    claim = decide_claim(given(asked()), by="external-callback", answer={"ok": 1}, now=NOW)
    assert isinstance(claim, Append)
    assert isinstance(claim.event, InteractionAnswered)
    assert claim.event.answer == {"ok": 1}


def test_expiry_answers_with_the_reserved_marker_by_the_system() -> None:
    """A pending park past its deadline is answered with the expiry marker by system:expiry,
    and the marker is never hidden as a secret."""
    facts = Facts(interaction_id=IX, group_id="g-1", run_id="r", sensitive=True)
    decision = decide_expire(Interaction.pending(facts, seq=7), now=NOW)
    assert isinstance(decision, Append)
    event = decision.event
    assert isinstance(event, InteractionAnswered)
    assert (event.answered_by, event.answer, event.sensitive, event.run_id) == (
        EXPIRY_ANSWERER,
        EXPIRY_ANSWER,
        False,
        "r",
    )
    assert decision.secret is None


def test_expiry_and_removal_leave_a_resolved_question_alone() -> None:
    """An answer that won stands against a late expiry or removal."""
    done = given(asked(), answered_by("bob"))
    assert decide_expire(done, now=NOW) == Keep("answered")
    assert decide_remove(done, reason="delivery_failed", now=NOW, detail="x") == Keep("answered")


def test_a_failed_delivery_removes_the_question_with_its_detail() -> None:
    """delivery_failed carries why, and every fact of the question."""
    decision = decide_remove(given(asked()), reason="delivery_failed", now=NOW, detail="bridge said 400")
    assert isinstance(decision, Append)
    event = decision.event
    assert isinstance(event, InteractionRemoved)
    assert (event.reason, event.detail, event.waiter, event.audience) == (
        "delivery_failed",
        "bridge said 400",
        "waiter-12345678",
        "bob",
    )


def test_pruning_before_the_ask_lands_writes_nothing_on_the_questions_subject() -> None:
    """Nothing recorded yet: the prune keeps the question's subject untouched (the caller records
    a withdrawal elsewhere, which binds only its author)."""
    assert decide_prune(given(), reason="cancelled", now=NOW, restricted_to=None) == Keep("absent")
    event = withdrawal(IX, by="alice", reason="cancelled", now=NOW)
    assert (event.interaction_id, event.by, event.reason) == (IX, "alice", "cancelled")


def test_a_withdrawal_removes_only_its_authors_question() -> None:
    """After a withdrawal by alice, alice's question of that id is removed; bob's is left alone."""
    removal = decide_withdrawn(given(asked()), by="alice", reason="cancelled", now=NOW)
    assert isinstance(removal, Append)
    assert isinstance(removal.event, InteractionRemoved)
    assert decide_withdrawn(given(asked()), by="bob", reason="cancelled", now=NOW) == Keep("pending")
    assert decide_withdrawn(given(), by="alice", reason="cancelled", now=NOW) == Keep("absent")


def test_only_the_asker_may_prune_its_question() -> None:
    """A restricted identity other than the asker is refused."""
    with pytest.raises(Forbidden, match=r"^only the asker may prune its question$"):
        decide_prune(given(asked()), reason="abandoned", now=NOW, restricted_to="mallory")
    ok = decide_prune(given(asked()), reason="abandoned", now=NOW, restricted_to="alice")
    assert isinstance(ok, Append)
