"""Per-send form refinements: ``data.values``, ``data.options`` and ``pages`` (docs/asking.md#per-send-form-data-and-pages)."""

from __future__ import annotations

from typing import Any

import pytest

from layby_contracts.errors import BadInput
from layby_domain.formats.form import check_form_extras
from layby_domain.validation import validate_answer
from tests.unit.keywords import validate_ask

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


def extras_refused(data: object = None, pages: object = None) -> tuple[str, str | None]:
    with pytest.raises(BadInput) as info:
        check_form_extras(SCHEMA, data, pages)
    return info.value.message, info.value.field


def test_data_must_be_an_object() -> None:
    """docs/asking.md#per-send-form-data-and-pages: ``data`` is an object, else refused naming ``data``."""
    assert extras_refused(data=[1]) == ("data must be an object with 'values' and/or 'options'", "data")


def test_data_has_only_values_and_options() -> None:
    """docs/asking.md#per-send-form-data-and-pages: any other key of ``data`` is refused by its name."""
    assert extras_refused(data={"values": {}, "extra": 1}) == (
        "data has an unknown key 'extra' (values, options)",
        "data.extra",
    )


def test_data_values_must_be_an_object() -> None:
    """docs/asking.md#per-send-form-data-and-pages: ``data.values`` is keyed by property name."""
    assert extras_refused(data={"values": [1]}) == (
        "data.values must be an object keyed by property name",
        "data.values",
    )


def test_prefill_names_a_property() -> None:
    """docs/asking.md#per-send-form-data-and-pages: a prefilled name must be a property of the schema."""
    assert extras_refused(data={"values": {"nope": 1}}) == (
        "data.values.nope: 'nope' is not a property of the schema",
        "data.values.nope",
    )


def test_prefill_matches_its_property() -> None:
    """docs/asking.md#per-send-form-data-and-pages: a prefilled value must satisfy its property's schema."""
    assert extras_refused(data={"values": {"count": 0}}) == (
        "data.values.count does not match its property's schema: 0 is less than the minimum of 1",
        "data.values.count",
    )


def test_prefill_resolves_defs_of_the_root_schema() -> None:
    """docs/asking.md#per-send-form-data-and-pages: a property's ``$ref`` to the root ``$defs`` is followed."""
    schema = {
        "type": "object",
        "$defs": {"pos": {"type": "integer", "minimum": 1}},
        "properties": {"n": {"$ref": "#/$defs/pos"}},
    }
    assert check_form_extras(schema, {"values": {"n": 2}}, None) == {"data": {"values": {"n": 2}}}
    with pytest.raises(BadInput) as info:
        check_form_extras(schema, {"values": {"n": 0}}, None)
    assert info.value.field == "data.values.n"


def test_data_options_must_be_an_object() -> None:
    """docs/asking.md#per-send-form-data-and-pages: ``data.options`` is keyed by property name."""
    assert extras_refused(data={"options": "x"}) == (
        "data.options must be an object keyed by property name",
        "data.options",
    )


def test_options_name_a_property() -> None:
    """docs/asking.md#per-send-form-data-and-pages: per-send choices must name a property of the schema."""
    assert extras_refused(data={"options": {"nope": [{"value": "x"}]}}) == (
        "data.options.nope: 'nope' is not a property of the schema",
        "data.options.nope",
    )


def test_options_are_for_string_properties_only() -> None:
    """docs/asking.md#per-send-form-data-and-pages: only a string property may have per-send choices."""
    assert extras_refused(data={"options": {"count": [{"value": "1"}]}}) == (
        "data.options.count: options are only for string properties",
        "data.options.count",
    )


def test_options_are_a_non_empty_list() -> None:
    """docs/asking.md#per-send-form-data-and-pages: a property's choices are a non-empty list."""
    assert extras_refused(data={"options": {"date": []}}) == (
        "data.options.date must be a non-empty list of {value, label?}",
        "data.options.date",
    )


@pytest.mark.parametrize("choice", ["x", {"label": "X"}, {"value": "x", "other": 1}])
def test_each_option_is_value_and_label(choice: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: each choice is ``{value, label?}`` and nothing else."""
    assert extras_refused(data={"options": {"date": [choice]}}) == (
        "data.options.date[0] must be {value, label?}",
        "data.options.date[0]",
    )


def test_option_value_is_a_string() -> None:
    """docs/asking.md#per-send-form-data-and-pages: each choice's value is a string."""
    assert extras_refused(data={"options": {"date": [{"value": 3}]}}) == (
        "data.options.date[0].value must be a string",
        "data.options.date[0].value",
    )


def test_option_value_matches_its_property_apart_from_enum() -> None:
    """docs/asking.md#per-send-form-data-and-pages: a choice satisfies the property's schema except its enum."""
    schema = {"type": "object", "properties": {"d": {"type": "string", "enum": ["a"], "maxLength": 2}}}
    assert check_form_extras(schema, {"options": {"d": [{"value": "zz"}]}}, None)
    with pytest.raises(BadInput) as info:
        check_form_extras(schema, {"options": {"d": [{"value": "zz"}, {"value": "long"}]}}, None)
    assert (info.value.message, info.value.field) == (
        "data.options.d[1].value does not match its property's schema: 'long' is too long",
        "data.options.d[1].value",
    )


@pytest.mark.parametrize("label", [" ", 3])
def test_option_label_is_non_blank_text(label: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: a label, when present, is non-blank text."""
    assert extras_refused(data={"options": {"date": [{"value": "x", "label": label}]}}) == (
        "data.options.date[0].label must be non-blank text",
        "data.options.date[0].label",
    )


@pytest.mark.parametrize("pages", [[], {}, "a"])
def test_pages_are_a_non_empty_list(pages: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: ``pages`` is a non-empty list of ``{title, fields}``."""
    assert extras_refused(pages=pages) == ("pages must be a non-empty list of {title, fields}", "pages")


@pytest.mark.parametrize("page", ["A", {"title": "A", "fields": ["count"], "x": 1}])
def test_each_page_is_title_and_fields(page: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: each page is ``{title, fields}`` and nothing else."""
    assert extras_refused(pages=[page]) == ("pages[0] must be {title, fields}", "pages[0]")


@pytest.mark.parametrize("title", [None, "", " ", 3, "t" * 201])
def test_page_title_is_short_non_blank_text(title: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: a page title is non-blank text of at most 200 characters."""
    assert extras_refused(pages=[{"title": title, "fields": ["count"]}]) == (
        "pages[0].title must be non-blank text of at most 200 characters",
        "pages[0].title",
    )


@pytest.mark.parametrize("fields", [None, [], "count"])
def test_page_fields_are_a_non_empty_list(fields: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: a page's fields are a non-empty list of property names."""
    assert extras_refused(pages=[{"title": "A", "fields": fields}]) == (
        "pages[0].fields must be a non-empty list of property names",
        "pages[0].fields",
    )


@pytest.mark.parametrize("name", ["ghost", 3])
def test_page_fields_name_properties(name: object) -> None:
    """docs/asking.md#per-send-form-data-and-pages: every name on a page is a property of the schema."""
    assert extras_refused(pages=[{"title": "A", "fields": ["count", name]}]) == (
        f"pages[0].fields[1]: {name!r} is not a property of the schema",
        "pages[0].fields[1]",
    )


def test_a_field_repeated_on_another_page_names_the_first() -> None:
    """docs/asking.md#per-send-form-data-and-pages: a property appears on one page only."""
    pages = [{"title": "A", "fields": ["count"]}, {"title": "B", "fields": ["date", "count"]}]
    assert extras_refused(pages=pages) == (
        "pages[1].fields[1]: 'count' repeats (already on pages[0])",
        "pages[1].fields[1]",
    )


def test_pages_miss_no_field() -> None:
    """docs/asking.md#per-send-form-data-and-pages: the first property on no page is named."""
    assert extras_refused(pages=[{"title": "A", "fields": ["count"]}]) == (
        "pages miss the field 'date': every property appears exactly once",
        "pages",
    )


def test_extras_errors_come_in_order_data_keys_values_options_then_pages() -> None:
    """docs/asking.md#validation-order: data before pages; within data, unknown keys, values, then options."""
    bad_pages: object = []
    bad_values = {"nope": 1}
    bad_options = {"nope": []}
    assert (
        extras_refused(data={"options": bad_options, "values": bad_values, "x": 1}, pages=bad_pages)[1]
        == "data.x"
    )
    assert extras_refused(data={"options": bad_options, "values": bad_values}, pages=bad_pages)[1] == (
        "data.values.nope"
    )
    assert extras_refused(data={"options": bad_options}, pages=bad_pages)[1] == "data.options.nope"
    assert extras_refused(data={"values": {}}, pages=bad_pages)[1] == "pages"


def test_page_errors_come_page_by_page_before_the_missing_field() -> None:
    """docs/asking.md#per-send-form-data-and-pages: each page's shape, title, then fields, before the coverage check."""
    assert extras_refused(pages=[{"title": "", "fields": []}])[1] == "pages[0].title"
    assert extras_refused(pages=[{"title": "A", "fields": ["ghost"]}, "B"])[1] == "pages[0].fields[0]"
    assert extras_refused(pages=[{"title": "A", "fields": ["count"]}, "B"])[1] == "pages[1]"


def test_no_extras_add_nothing() -> None:
    """docs/asking.md#per-send-form-data-and-pages: without data or pages the payload gains no keys."""
    assert check_form_extras(SCHEMA, None, None) == {}
    assert check_form_extras({"type": "object"}, {}, None) == {"data": {}}
