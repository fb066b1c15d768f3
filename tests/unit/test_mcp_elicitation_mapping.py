"""The mapping of an MCP requestedSchema onto the channel form subset (docs/mcp-elicitation.md#schema-mapping)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mcp")

from layby.mcp.elicitation import (
    DECLINE_FIELD,
    OutsideSubset,
    content_from_answer,
    elicitation_handler,
    map_requested_schema,
)
from layby_contracts.errors import BadInput
from layby_domain.formats.form import check_form_subset

ALL_KINDS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "email": {"type": "string", "title": "Email", "format": "email", "minLength": 3, "maxLength": 80},
        "age": {"type": "integer", "minimum": 0, "maximum": 130, "default": 30},
        "score": {"type": "number", "description": "0 to 1", "minimum": 0, "maximum": 1},
        "agree": {"type": "boolean", "default": True},
        "colour": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "size": {
            "type": "string",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "plain": {"type": "string", "enum": ["a", "b"], "default": "b"},
    },
    "required": ["email", "colour"],
}


def test_every_mcp_primitive_maps_into_the_channel_form_subset() -> None:
    """The mapped schema passes Layby's own channel form check."""
    schema, _ = map_requested_schema(ALL_KINDS)
    check_form_subset(schema)
    assert schema["properties"]["email"] == {
        "type": "string",
        "title": "Email",
        "minLength": 3,
        "maxLength": 80,
        "format": "email",
    }
    assert schema["properties"]["score"] == {
        "type": "number",
        "description": "0 to 1",
        "minimum": 0,
        "maximum": 1,
    }


def test_enum_names_and_titled_one_of_become_option_labels() -> None:
    schema, data = map_requested_schema(ALL_KINDS)
    assert schema["properties"]["colour"]["enum"] == ["r", "g"]
    assert schema["properties"]["size"] == {"type": "string", "enum": ["s", "l"]}
    assert data["options"] == {
        "colour": [{"value": "r", "label": "Red"}, {"value": "g", "label": "Green"}],
        "size": [{"value": "s", "label": "Small"}, {"value": "l", "label": "Large"}],
    }


def test_defaults_prefill_data_values() -> None:
    _, data = map_requested_schema(ALL_KINDS)
    assert data["values"] == {"age": 30, "agree": True, "plain": "b"}


def test_required_holds_unless_the_decline_box_is_ticked() -> None:
    schema, _ = map_requested_schema(ALL_KINDS)
    assert "required" not in schema
    assert schema["if"] == {"properties": {DECLINE_FIELD: {"const": True}}, "required": [DECLINE_FIELD]}
    assert schema["else"] == {"required": ["email", "colour"]}
    assert schema["properties"][DECLINE_FIELD]["type"] == "boolean"


@pytest.mark.parametrize(
    ("prop", "field"),
    [
        ({"type": "object", "properties": {"x": {"type": "string"}}}, "requestedSchema.properties.p"),
        ({"type": "array", "items": {"type": "string", "enum": ["a"]}}, "requestedSchema.properties.p"),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "requestedSchema.properties.p"),
        ({"type": "integer", "enum": [1, 2]}, "requestedSchema.properties.p"),
        ({"type": "string", "enum": []}, "requestedSchema.properties.p.enum"),
        (
            {"type": "string", "enum": ["a", "b"], "enumNames": ["A"]},
            "requestedSchema.properties.p.enumNames",
        ),
        ({"type": "string", "oneOf": [{"const": 1}]}, "requestedSchema.properties.p.oneOf"),
    ],
)
def test_a_property_outside_the_subset_is_refused_naming_it(prop: dict[str, Any], field: str) -> None:
    with pytest.raises(OutsideSubset) as caught:
        map_requested_schema({"type": "object", "properties": {"ok": {"type": "string"}, "p": prop}})
    assert caught.value.field == field
    assert "requestedSchema.properties.p" in str(caught.value)


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ({"type": "array"}, "requestedSchema"),
        ({"type": "object", "properties": {}}, "requestedSchema.properties"),
        (
            {"type": "object", "properties": {DECLINE_FIELD: {"type": "boolean"}}},
            f"requestedSchema.properties.{DECLINE_FIELD}",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]},
            "requestedSchema.required",
        ),
    ],
)
def test_a_root_outside_the_subset_is_refused_naming_the_field(schema: dict[str, Any], field: str) -> None:
    with pytest.raises(OutsideSubset) as caught:
        map_requested_schema(schema)
    assert caught.value.field == field


def test_the_content_keeps_declared_properties_typed_and_drops_the_decline_box_and_empties() -> None:
    answer = {
        "email": "a@b.c",
        "age": 41.0,
        "score": 0.5,
        "agree": False,
        "plain": None,
        DECLINE_FIELD: False,
    }
    assert content_from_answer(ALL_KINDS, answer) == {
        "email": "a@b.c",
        "age": 41,
        "score": 0.5,
        "agree": False,
    }
    assert isinstance(content_from_answer(ALL_KINDS, answer)["age"], int)


def test_on_timeout_is_cancel_or_decline() -> None:
    """docs/mcp-elicitation.md#installing-the-handler"""
    with pytest.raises(BadInput, match="on_timeout must be 'cancel' or 'decline'") as caught:
        elicitation_handler(on_timeout="accept")  # type: ignore[arg-type]
    assert caught.value.field == "on_timeout"
