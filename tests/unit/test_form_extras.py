"""Per-send form refinements: ``data.values``, ``data.options`` and ``pages`` (docs/asking.md#per-send-form-data-and-pages)."""

from __future__ import annotations

from typing import Any

import pytest

from layby_contracts.errors import BadInput
from layby_domain.validation import validate_answer, validate_ask

SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "date": {"type": "string", "enum": ["2030-01-01", "2030-03-01"]},
        "note": {"type": "string"},
    },
    "required": ["count", "date"],
}


def ask(**kwargs: Any) -> Any:
    return validate_ask("Book?", answer_format="form", schema=SCHEMA, **kwargs)


def test_prefill_options_and_pages_are_carried_on_the_question() -> None:
    data = {"values": {"count": 2}, "options": {"date": [{"value": "2030-02-01", "label": "February"}]}}
    pages = [{"title": "How many", "fields": ["count"]}, {"title": "When", "fields": ["date", "note"]}]
    spec = ask(data=data, pages=pages)
    assert spec.format_payload == {"schema": SCHEMA, "data": data, "pages": pages}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"data": {"values": {"nope": 1}}}, "data.values.nope"),
        ({"data": {"values": {"count": 0}}}, "data.values.count"),
        ({"data": {"values": {"count": "two"}}}, "data.values.count"),
        ({"data": {"options": {"count": [{"value": "1"}]}}}, "data.options.count"),
        ({"data": {"options": {"nope": [{"value": "x"}]}}}, "data.options.nope"),
        ({"data": {"options": {"date": []}}}, "data.options.date"),
        ({"data": {"options": {"date": [{"value": 3}]}}}, "data.options.date[0].value"),
        ({"data": {"options": {"date": [{"value": "x", "label": " "}]}}}, "data.options.date[0].label"),
        ({"data": {"options": {"date": [{"val": "x"}]}}}, "data.options.date[0]"),
        ({"data": {"extra": 1}}, "data.extra"),
        ({"pages": [{"title": "A", "fields": ["count", "date"]}]}, "pages"),
        ({"pages": [{"title": "A", "fields": ["count", "date", "note", "count"]}]}, "pages[0].fields[3]"),
        ({"pages": [{"title": "A", "fields": ["count", "date", "note", "ghost"]}]}, "pages[0].fields[3]"),
        ({"pages": [{"title": "", "fields": ["count", "date", "note"]}]}, "pages[0].title"),
        ({"pages": []}, "pages"),
    ],
)
def test_every_refinement_error_names_its_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(BadInput) as info:
        ask(**kwargs)
    assert info.value.field == field


def test_data_and_pages_belong_to_forms_only() -> None:
    with pytest.raises(BadInput) as info:
        validate_ask("Hi?", data={"values": {}})
    assert info.value.field == "data"
    with pytest.raises(BadInput) as info:
        validate_ask("Hi?", pages=[{"title": "A", "fields": []}])
    assert info.value.field == "pages"


def test_answers_are_validated_against_the_effective_schema() -> None:
    payload = ask(data={"options": {"date": [{"value": "2030-02-01", "label": "February"}]}}).format_payload
    assert validate_answer("form", payload, {"count": 1, "date": "2030-02-01"}) == {
        "count": 1,
        "date": "2030-02-01",
    }
    with pytest.raises(BadInput) as info:
        validate_answer("form", payload, {"count": 1, "date": "2030-01-01"})  # in the schema, not this send
    assert info.value.field == "date"
