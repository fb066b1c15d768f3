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
