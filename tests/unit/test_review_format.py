"""The review format's rules (docs/review.md), given a question, when a decision comes, then
what is recorded or refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from layby_contracts.errors import BadInput, Conflict
from layby_contracts.formats import ProposedAction, ReviewPayload, payload_of
from layby_contracts.question import Question
from layby_domain.formats import FORMATS, AskInputs
from layby_domain.formats.review import arguments_sha256, canonical_json
from layby_domain.frames import add_frame
from layby_domain.validation import validate_answer, validate_ask
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit

REVIEW = FORMATS["review"]
SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "integer", "minimum": 1}},
    "required": ["to", "amount"],
}
ARGS = {"to": "acme", "amount": 120}


def asked(**action: Any) -> ReviewPayload:
    checked = REVIEW.check_ask(AskInputs(action={"name": "pay", "arguments": ARGS, **action}))
    payload = payload_of("review", checked)
    assert isinstance(payload, ReviewPayload)
    return payload


def decided(payload: ReviewPayload, answer: Any) -> Any:
    return REVIEW.check_answer(payload, answer)


def test_the_hash_is_sha256_of_the_canonical_json() -> None:
    """Keys sorted, no whitespace, UTF-8 as it is: the same arguments in any key order hash alike."""
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()
    assert arguments_sha256({"b": 1, "a": 2}) == arguments_sha256({"a": 2, "b": 1})
    assert arguments_sha256({"a": 1}) != arguments_sha256({"a": 2})


def test_an_accept_of_the_proposal_records_its_arguments_and_hash() -> None:
    payload = asked()
    h = arguments_sha256(ARGS)
    assert decided(payload, {"decision": "accept", "arguments_sha256": h}) == {
        "decision": "accept",
        "arguments": ARGS,
        "arguments_sha256": h,
        "proposal_sha256": h,
    }


def test_an_accept_of_other_arguments_is_a_conflict() -> None:
    """An accept names the proposal's hash; any other is refused with 409, naming the field."""
    with pytest.raises(Conflict) as caught:
        decided(asked(), {"decision": "accept", "arguments_sha256": arguments_sha256({"to": "evil"})})
    assert caught.value.field == "arguments_sha256"


def test_an_accept_without_a_hash_is_refused_naming_the_field() -> None:
    with pytest.raises(BadInput) as caught:
        decided(asked(), {"decision": "accept"})
    assert caught.value.field == "arguments_sha256"


def test_an_edit_records_the_new_arguments_with_their_own_hash() -> None:
    payload = asked(schema=SCHEMA)
    new = {"to": "acme", "amount": 100}
    got = decided(payload, {"decision": "edit", "arguments": new, "arguments_sha256": arguments_sha256(ARGS)})
    assert got["arguments"] == new
    assert got["arguments_sha256"] == arguments_sha256(new)
    assert got["proposal_sha256"] == arguments_sha256(ARGS)


def test_an_edit_of_a_stale_proposal_is_a_conflict() -> None:
    with pytest.raises(Conflict):
        decided(asked(), {"decision": "edit", "arguments": {}, "arguments_sha256": "0" * 64})


def test_an_edit_is_checked_against_the_actions_schema() -> None:
    """The failing path is named below ``arguments``."""
    with pytest.raises(BadInput, match="minimum") as caught:
        decided(
            asked(schema=SCHEMA),
            {
                "decision": "edit",
                "arguments": {"to": "acme", "amount": 0},
                "arguments_sha256": arguments_sha256(ARGS),
            },
        )
    assert caught.value.field == "arguments.amount"


def test_a_reject_carries_its_reason() -> None:
    assert decided(asked(), {"decision": "reject", "reason": "wrong vendor"}) == {
        "decision": "reject",
        "reason": "wrong vendor",
    }
    assert decided(asked(), {"decision": "reject"}) == {"decision": "reject"}


def test_a_decision_the_question_does_not_allow_is_refused() -> None:
    """respond is not among the defaults (accept, edit, reject)."""
    with pytest.raises(BadInput, match="does not allow 'respond'") as caught:
        decided(asked(), {"decision": "respond", "text": "why?"})
    assert caught.value.field == "decision"


def test_a_respond_needs_text_when_allowed() -> None:
    payload = payload_of(
        "review",
        REVIEW.check_ask(
            AskInputs(action={"name": "pay", "arguments": ARGS}, decisions=["respond", "accept"])
        ),
    )
    assert isinstance(payload, ReviewPayload)
    assert payload.decisions == ["accept", "respond"]
    assert (
        decided(payload, {"decision": "respond", "text": "use the other card"})["text"]
        == "use the other card"
    )
    with pytest.raises(BadInput) as caught:
        decided(payload, {"decision": "respond", "text": " "})
    assert caught.value.field == "text"


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ("accept", None),
        ({"decision": "maybe"}, "decision"),
        ({"decision": "reject", "arguments": {}}, "arguments"),
        ({"decision": "reject", "reason": 5}, "reason"),
    ],
)
def test_a_malformed_decision_names_its_field(answer: Any, field: str | None) -> None:
    with pytest.raises(BadInput) as caught:
        decided(asked(), answer)
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("action", "field"),
    [
        (None, "action"),
        ("pay", "action"),
        ({"arguments": {}}, "action.name"),
        ({"name": " ", "arguments": {}}, "action.name"),
        ({"name": "pay", "arguments": [1]}, "action.arguments"),
        ({"name": "pay", "arguments": {}, "colour": "red"}, "action.colour"),
        ({"name": "pay", "arguments": {}, "schema": {"type": 5}}, "action.schema"),
        ({"name": "pay", "arguments": {"amount": "x"}, "schema": SCHEMA}, "action.arguments"),
        ({"name": "pay", "arguments": {}, "description": 3}, "action.description"),
    ],
)
def test_a_bad_action_is_refused_at_ask_time_naming_its_field(action: Any, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        REVIEW.check_ask(AskInputs(action=action))
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("decisions", "field"),
    [
        ([], "decisions"),
        (["accept", "accept"], "decisions[1]"),
        (["approve"], "decisions[0]"),
        ("accept", "decisions"),
    ],
)
def test_bad_decisions_are_refused_naming_the_item(decisions: Any, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        REVIEW.check_ask(AskInputs(action={"name": "pay", "arguments": {}}, decisions=decisions))
    assert caught.value.field == field


@pytest.mark.parametrize("name", ["text", "confirm", "form"])
def test_an_action_belongs_to_review_only(name: str) -> None:
    schema = {"type": "object"} if name == "form" else None
    with pytest.raises(BadInput, match="only for 'review'") as caught:
        validate_ask(Question(question="q", answer_format=name, schema=schema, action={"name": "x"}))
    assert caught.value.field == "action"


def test_a_review_ask_validates_end_to_end_and_the_answer_door_uses_the_same_rules() -> None:
    spec = validate_ask(
        Question(question="Pay?", answer_format="review", action={"name": "pay", "arguments": ARGS})
    )
    assert spec.format_payload == {
        "action": {"name": "pay", "arguments": ARGS},
        "decisions": ["accept", "edit", "reject"],
    }
    got = validate_answer(
        "review", spec.format_payload, {"decision": "accept", "arguments_sha256": arguments_sha256(ARGS)}
    )
    assert got["decision"] == "accept"


def test_the_pending_question_shows_the_proposals_hash() -> None:
    event = interaction_asked(
        interaction_id="01J0000000000000000000000A",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        answer_format="review",
        format_payload={"action": {"name": "pay", "arguments": ARGS}, "decisions": ["accept", "reject"]},
        asked_by="a",
    )
    frame = add_frame(event)
    assert frame["format_payload"]["arguments_sha256"] == arguments_sha256(ARGS)
    assert frame["format_payload"]["action"]["arguments"] == ARGS


def test_a_chat_tap_of_accept_is_an_accept_of_the_shown_arguments() -> None:
    """Accept and Reject are the buttons (edit needs the review page); typed words work too."""
    payload = asked()
    assert REVIEW.choices(payload) == ["Accept", "Reject"]
    tap = REVIEW.reply_answer(payload, "tap", 0, None)
    assert decided(payload, tap)["arguments"] == ARGS
    assert REVIEW.reply_answer(payload, "tap", 1, None) == {"decision": "reject"}
    assert REVIEW.reply_answer(payload, "typed", None, "reject: too much") == {
        "decision": "reject",
        "reason": "too much",
    }
    with pytest.raises(BadInput, match="accept or reject"):
        REVIEW.reply_answer(payload, "typed", None, "hmm")


def test_a_chat_message_shows_the_action_and_its_arguments() -> None:
    text = REVIEW.chat_text(
        "Pay the invoice?", asked(description="the March invoice"), "https://x.example/cb/T"
    )
    assert "Action: pay" in text
    assert '"amount": 120' in text
    assert "the March invoice" in text
    assert "To edit the arguments: https://x.example/cb/T" in text


def test_a_review_payload_round_trips_on_the_wire() -> None:
    payload = ReviewPayload(action=ProposedAction(name="pay", arguments=ARGS))
    assert payload_of("review", {"action": {"name": "pay", "arguments": ARGS}}) == payload


def test_slack_and_telegram_offer_accept_and_reject_and_show_the_arguments() -> None:
    """The channel's delivery carries the action in its text and Accept / Reject as controls."""
    from layby_server.channels import delivery_of
    from layby_server.chat.slack.blocks import message_blocks
    from layby_server.chat.telegram.rendering import render

    event = interaction_asked(
        interaction_id="01J0000000000000000000000B",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        question="Pay?",
        answer_format="review",
        format_payload={
            "action": {"name": "pay", "arguments": ARGS},
            "decisions": ["accept", "edit", "reject"],
        },
        channel="slack",
    )
    delivery = delivery_of(
        event,
        callback_url="https://layby.example/cb/T",
        public_base_url="https://layby.example",
        recipient=None,
    )
    assert delivery.options == ["Accept", "Reject"]
    assert "Action: pay" in delivery.question
    assert "https://layby.example/cb/T" in delivery.question
    blocks = str(message_blocks(delivery))
    assert "Accept" in blocks and "Reject" in blocks and "amount" in blocks
    rendered = render(delivery, 42)
    assert rendered.keyboard is not None
    labels = [button.text for row in rendered.keyboard.inline_keyboard for button in row]
    assert [label.split(" ", 1)[-1] for label in labels] == ["Accept", "Reject"]
