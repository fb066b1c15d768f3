"""The renderable subset of a channel form (docs/asking.md#channel-form-subset): each refusal names the property or rule."""

from __future__ import annotations

from typing import Any

import pytest

from layby_contracts.errors import BadInput
from layby_domain.formats.form import check_form_subset


def prop(**p: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": p}}


@pytest.mark.parametrize(
    ("schema", "field", "message"),
    [
        ([], "schema", 'a channel form schema must have {"type": "object"} at its root'),
        ({"type": "array"}, "schema", 'a channel form schema must have {"type": "object"} at its root'),
        ({"type": "object"}, "schema.properties", "a channel form schema needs a non-empty properties map"),
        ({"type": "object", "properties": {}}, "schema.properties", "non-empty properties map"),
        (prop(), "schema.properties.x", "must have a scalar type"),
        (prop(type="object"), "schema.properties.x", "nested objects, arrays"),
        (prop(type="array"), "schema.properties.x", "must have a scalar type"),
        (prop(anyOf=[{"type": "string"}]), "schema.properties.x", "anyOf/oneOf/$ref"),
        (prop(type=["string", "null"]), "schema.properties.x", "must have a scalar type"),
        (prop(type="integer", enum=[1, 2]), "schema.properties.x.enum", "enum is allowed only on string"),
        (
            prop(type="string", enum=[]),
            "schema.properties.x.enum",
            "enum must be a non-empty list of strings",
        ),
        (prop(type="string", enum=["a", 1]), "schema.properties.x.enum", "non-empty list of strings"),
        ({**prop(type="string"), "required": "x"}, "schema.required", "must be a list of property names"),
        ({**prop(type="string"), "required": ["y"]}, "schema.required", "names 'y', which is not a declared"),
    ],
)
def test_a_schema_outside_the_subset_is_refused_naming_the_property_or_rule(
    schema: Any, field: str, message: str
) -> None:
    """docs/asking.md#channel-form-subset: every violation raises naming the offending property or rule."""
    with pytest.raises(BadInput) as err:
        check_form_subset(schema)
    assert err.value.field == field
    assert message in err.value.message


def test_scalar_properties_with_extra_constraints_are_in_the_subset() -> None:
    """docs/asking.md#channel-form-subset: constraint keywords beside a scalar type are allowed (enforced on the answer)."""
    check_form_subset(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "pattern": "^[a-z]+$", "enum": ["ab", "cd"]},
                "b": {"type": "integer", "minimum": 1},
                "c": {"type": "number"},
                "d": {"type": "boolean"},
            },
            "required": ["a", "d"],
        }
    )


def test_a_property_without_a_scalar_type_is_refused_with_the_whole_rule() -> None:
    """docs/asking.md#channel-form-subset: the refusal lists the scalar types and what cannot be rendered."""
    with pytest.raises(BadInput) as err:
        check_form_subset(prop(type="object"))
    assert err.value.message == (
        "schema.properties.x: a channel form property must have a scalar type (string, boolean, "
        "integer, number); nested objects, arrays, anyOf/oneOf/$ref and a missing type cannot be rendered"
    )


def test_subset_errors_come_property_by_property_then_required() -> None:
    """docs/asking.md#channel-form-subset: properties in order (type, then enum), then ``required``."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "integer", "enum": [1]}, "b": {"type": "array"}},
        "required": ["ghost"],
    }
    with pytest.raises(BadInput) as err:
        check_form_subset(schema)
    assert err.value.field == "schema.properties.a.enum"
    schema["properties"]["a"] = {"type": "integer"}
    with pytest.raises(BadInput) as err:
        check_form_subset(schema)
    assert err.value.field == "schema.properties.b"
    schema["properties"]["b"] = {"type": "string"}
    with pytest.raises(BadInput) as err:
        check_form_subset(schema)
    assert err.value.field == "schema.required"


def test_enum_on_a_non_string_is_refused_before_its_list_is_looked_at() -> None:
    """docs/asking.md#channel-form-subset: an enum on a non-string is refused before its list is looked at."""
    with pytest.raises(BadInput) as err:
        check_form_subset(prop(type="number", enum="nope"))
    assert err.value.message == "schema.properties.x: enum is allowed only on string properties"
