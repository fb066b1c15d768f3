"""The controls of the callback form page, one per JSON type of the channel form subset
(docs/doors/callback.md#form-page)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from layby_services.door.callback_pages import form_page
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def controls(properties: dict[str, Any], *, required: tuple[str, ...] = (), data: Any = None) -> str:
    """The rendered form's controls, between ``<form ...>`` and its submit button."""
    payload: dict[str, Any] = {
        "schema": {"type": "object", "properties": properties, "required": list(required)}
    }
    if data is not None:
        payload["data"] = data
    html = _page(payload)
    start = html.index("<form id=f method=post>") + len("<form id=f method=post>")
    return html[start : html.index("<button type=submit>")]


def _page(payload: dict[str, Any]) -> str:
    """The callback form page of a channel form question with this ``format_payload``."""
    asked = interaction_asked(
        "i",
        NOW,
        question="Q?",
        answer_format="form",
        format_payload=payload,
        timeout_at=NOW + timedelta(minutes=1),
        channel="ops",
    )
    return form_page(asked).decode()


def test_a_boolean_is_a_checkbox_inside_its_label_never_required() -> None:
    """docs/doors/callback.md#form-page: a boolean is a checkbox, never marked required; its hint follows the label."""
    assert controls(
        {"ok": {"type": "boolean", "title": "OK <?>", "description": "tick <b>"}}, required=("ok",)
    ) == (
        '<label for=f0><input type=checkbox id=f0 name="ok" data-kind=boolean> OK &lt;?&gt;</label>'
        "<small>tick &lt;b&gt;</small>"
    )


def test_a_boolean_is_checked_by_its_prefill_else_its_default() -> None:
    """docs/doors/callback.md#form-page: ``data.values`` (else the schema's default) check a checkbox when true."""
    props = {
        "a": {"type": "boolean", "default": True},
        "b": {"type": "boolean"},
        "c": {"type": "boolean", "default": True},
    }
    html = controls(props, data={"values": {"b": True, "c": False}})
    assert '<input type=checkbox id=f0 name="a" data-kind=boolean checked>' in html
    assert '<input type=checkbox id=f1 name="b" data-kind=boolean checked>' in html
    assert '<input type=checkbox id=f2 name="c" data-kind=boolean>' in html


def test_a_string_is_a_text_input_with_its_prefill_escaped() -> None:
    """docs/doors/callback.md#form-page: a string is a text input; label, hint and value are HTML-escaped."""
    props = {"name": {"type": "string", "description": "in <full>", "default": 'Ann "x"'}}
    assert controls(props, required=("name",)) == (
        "<label for=f0>name</label><small>in &lt;full&gt;</small>"
        '<input type=text id=f0 name="name" data-kind=string required value="Ann &quot;x&quot;">'
    )


def test_a_boolean_default_is_not_shown_in_a_text_input() -> None:
    """docs/doors/callback.md#form-page: only a text or number value prefills a text or number input."""
    assert controls({"city": {"type": "string", "default": True}}) == (
        '<label for=f0>city</label><input type=text id=f0 name="city" data-kind=string>'
    )


def test_a_string_with_enum_is_a_select_with_a_leading_blank() -> None:
    """docs/doors/callback.md#form-page: an enum is a select whose first choice is a blank, its default selected."""
    props = {"tier": {"type": "string", "title": "Tier", "enum": ["gold", "silver"], "default": "silver"}}
    assert controls(props, required=("tier",)) == (
        '<label for=f0>Tier</label><select id=f0 name="tier" data-kind=string required>'
        '<option value="">\u2014</option><option value="gold">gold</option>'
        '<option value="silver" selected>silver</option></select>'
    )


def test_per_send_options_label_the_choices_and_a_prefill_selects_one() -> None:
    """docs/asking.md#per-send-form-data-and-pages: ``data.options`` replace the enum, with labels; ``data.values`` selects."""
    data = {
        "values": {"room": "r2"},
        "options": {"room": [{"value": "r1", "label": "One <1>"}, {"value": "r2"}]},
    }
    assert controls({"room": {"type": "string", "enum": ["r0"]}}, data=data) == (
        '<label for=f0>room</label><select id=f0 name="room" data-kind=string>'
        '<option value="">\u2014</option><option value="r1">One &lt;1&gt;</option>'
        '<option value="r2" selected>r2</option></select>'
    )


def test_an_integer_steps_by_one_and_a_number_by_any() -> None:
    """docs/doors/callback.md#form-page: an integer is a number input with step 1, a number one with step any."""
    props = {"n": {"type": "integer", "default": 3}, "x": {"type": "number"}}
    assert controls(props, required=("n",), data={"values": {"x": 2.5}}) == (
        '<label for=f0>n</label><input type=number step=1 id=f0 name="n" data-kind=integer required value="3">'
        '<label for=f1>x</label><input type=number step=any id=f1 name="x" data-kind=number value="2.5">'
    )


def test_controls_are_numbered_by_schema_order_across_pages() -> None:
    """docs/doors/callback.md#form-page: pages become fieldsets; each control keeps its schema position as id."""
    asked_props = {"a": {"type": "string"}, "b": {"type": "string"}}
    payload = {
        "schema": {"type": "object", "properties": asked_props},
        "pages": [{"title": "B <p>", "fields": ["b"]}, {"title": "A", "fields": ["a"]}],
    }
    html = _page(payload)
    assert (
        '<fieldset><legend>B &lt;p&gt;</legend><label for=f1>b</label><input type=text id=f1 name="b" '
        "data-kind=string></fieldset><fieldset><legend>A</legend><label for=f0>a</label>"
        '<input type=text id=f0 name="a" data-kind=string></fieldset>'
    ) in html


def test_null_per_send_options_fall_back_to_the_enum() -> None:
    """``data.options: null`` offers no per-send choices: the field's enum is offered (it crashed)."""
    props = {"tier": {"type": "string", "enum": ["gold"]}}
    assert controls(props, data={"options": None}) == controls(props)
