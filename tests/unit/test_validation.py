"""Ask and answer validation rules (docs/asking.md#asking-a-question, docs/asking.md#validated-before-anything-is-stored, docs/doors/answer.md#answer-validation), pure and socket-free."""

from __future__ import annotations

import msgspec
import pytest

from layby_contracts.errors import BadInput
from layby_domain.validation import validate_answer
from tests.unit.keywords import validate_ask

pytestmark = pytest.mark.unit


def test_question_of_8192_characters_is_accepted_and_8193_refused() -> None:
    """question is at most QUESTION_MAX_CHARS = 8192 characters (docs/asking.md#question-text)."""
    assert validate_ask("x" * 8192).question == "x" * 8192
    with pytest.raises(BadInput, match="question is 8193 characters; the limit is 8192") as info:
        validate_ask("x" * 8193)
    assert info.value.field == "question"


def test_unknown_answer_format_raises_naming_it() -> None:
    """Any other answer_format raises ValueError('unknown answer_format: ...') (docs/asking.md#answer-formats)."""
    with pytest.raises(ValueError, match="unknown answer_format: 'essay'"):
        validate_ask("q", answer_format="essay")


def test_select_requires_a_non_empty_options_list() -> None:
    """select requires a non-empty list of options (docs/asking.md#options)."""
    with pytest.raises(BadInput, match="requires a non-empty options list") as info:
        validate_ask("q", answer_format="select")
    assert info.value.field == "options"
    with pytest.raises(BadInput, match="non-empty list of strings"):
        validate_ask("q", answer_format="select", options=[])


def test_select_options_must_be_unique_non_blank_strings() -> None:
    """Each option is a non-blank string, named by index when it is not (docs/asking.md#options)."""
    with pytest.raises(BadInput, match=r"options\[1\] must be a non-blank string"):
        validate_ask("q", answer_format="select", options=["a", " "])
    with pytest.raises(BadInput, match=r"options\[1\] repeats 'a'"):
        validate_ask("q", answer_format="select", options=["a", "a"])


def test_text_accepts_options_as_suggested_replies() -> None:
    """text may carry options as suggested replies that constrain nothing (docs/asking.md#options)."""
    spec = validate_ask("q", answer_format="text", options=["yes", "later"])
    assert spec.format_payload == {"options": ["yes", "later"]}
    assert validate_answer("text", spec.format_payload, "something else") == "something else"


def test_options_on_confirm_are_refused_naming_the_field() -> None:
    """options belong to select and text only; elsewhere they are an error, never ignored."""
    with pytest.raises(BadInput, match="options are only for") as info:
        validate_ask("q", answer_format="confirm", options=["a"])
    assert info.value.field == "options"


def test_form_requires_a_schema() -> None:
    """answer_format 'form' requires a schema (docs/asking.md#schema)."""
    with pytest.raises(BadInput, match="answer_format 'form' requires a schema"):
        validate_ask("q", answer_format="form")


def test_form_schema_must_be_a_valid_json_schema_dict() -> None:
    """A schema that is not a dict, or not a valid JSON schema, is refused naming 'schema'."""
    with pytest.raises(
        BadInput, match="schema must be a msgspec Struct type or a non-empty JSON-schema dict"
    ):
        validate_ask("q", answer_format="form", schema="nope")
    with pytest.raises(BadInput, match="schema is not a valid JSON schema") as info:
        validate_ask("q", answer_format="form", schema={"type": 12})
    assert info.value.field == "schema"


@pytest.mark.parametrize("bad", [0, -1, 0.0, float("nan"), float("inf")])
def test_timeout_must_be_positive(bad: float) -> None:
    """A timeout <= 0 raises ValueError('timeout must be positive, got ...') (docs/asking.md#timeout)."""
    with pytest.raises(ValueError, match="timeout must be positive, got"):
        validate_ask("q", timeout=bad)


@pytest.mark.parametrize("bad", ["", "   ", 5])
def test_blank_or_non_string_audience_is_refused(bad: object) -> None:
    """audience must be a non-empty identity (docs/asking.md#audience)."""
    with pytest.raises(BadInput, match="audience must be a non-empty identity"):
        validate_ask("q", audience=bad)


def test_timeout_error_comes_first_in_validation_order() -> None:
    """Validation follows the reference order: timeout before format (docs/asking.md#validation-order)."""
    with pytest.raises(BadInput, match="timeout must be positive"):
        validate_ask("q", answer_format="nope", timeout=0)


@pytest.mark.parametrize(
    ("fmt", "payload", "answer", "message"),
    [
        ("text", None, 5, "answer must be a string"),
        ("confirm", None, "yes", "answer must be a boolean"),
        ("select", {"options": ["a", "b"]}, "c", "answer must be one of ['a', 'b']"),
        ("form", {"schema": {"type": "object"}}, [1], "answer must be an object"),
        ("form", None, {}, "question schema is invalid: missing or non-object schema"),
    ],
)
def test_answer_format_validation_messages(
    fmt: str, payload: dict | None, answer: object, message: str
) -> None:
    """Each format rejects a wrong answer with the door's exact message (docs/doors/answer.md#answer-validation)."""
    with pytest.raises(BadInput) as info:
        validate_answer(fmt, payload, answer)
    assert info.value.message == message


def test_form_answer_error_names_the_dotted_field() -> None:
    """A failing nested field is named by its dotted path; root faults name none (docs/doors/answer.md#answer-validation)."""
    schema = {
        "type": "object",
        "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}},
        "required": ["a"],
    }
    with pytest.raises(BadInput) as info:
        validate_answer("form", {"schema": schema}, {"a": {"b": "x"}})
    assert info.value.message == "answer does not match schema at a.b: 'x' is not of type 'integer'"
    assert info.value.field == "a.b"
    with pytest.raises(BadInput) as root:
        validate_answer("form", {"schema": schema}, {})
    assert root.value.message == "answer does not match schema: 'a' is a required property"
    assert root.value.field is None


def test_msgspec_struct_schema_becomes_a_json_schema() -> None:
    """A msgspec Struct type is accepted as a form schema (docs/asking.md#schema)."""
    from layby.sdk import _schema_of

    class Release(msgspec.Struct):
        version: str
        canary: bool = False

    schema = _schema_of(Release)
    spec = validate_ask("q", answer_format="form", schema=schema)
    assert spec.format_payload is not None
    assert validate_answer("form", spec.format_payload, {"version": "2.0"}) == {"version": "2.0"}
    with pytest.raises(BadInput, match="answer does not match schema"):
        validate_answer("form", spec.format_payload, {"canary": True})
