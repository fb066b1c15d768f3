"""One home per answer format, found through one registry (docs/asking.md#answer-formats)."""

from __future__ import annotations

from typing import Any

import pytest

from layby_contracts.errors import BadInput
from layby_contracts.formats import (
    FORMAT_NAMES,
    ConfirmPayload,
    ExternalPayload,
    FormPayload,
    SelectPayload,
    TextPayload,
    payload_of,
    wire_payload,
)
from layby_contracts.limits import ANSWER_FORMATS
from layby_domain.formats import FORMATS, NAMES, AskInputs, format_named
from layby_domain.frames import add_frame
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit


def test_the_registry_holds_exactly_the_contracts_formats() -> None:
    """Every format of the wire contract has one module, and nothing else is registered."""
    assert NAMES == FORMAT_NAMES == tuple(ANSWER_FORMATS)
    assert all(FORMATS[name].name == name for name in NAMES)


def test_an_unknown_format_names_the_field() -> None:
    """An unknown answer_format is refused naming answer_format."""
    with pytest.raises(BadInput, match="unknown answer_format: 'poll'") as caught:
        format_named("poll")
    assert caught.value.field == "answer_format"


@pytest.mark.parametrize(
    ("name", "payload", "typed"),
    [
        ("text", None, TextPayload()),
        ("text", {"options": ["ok"]}, TextPayload(options=["ok"])),
        ("confirm", None, ConfirmPayload()),
        ("select", {"options": ["eu", "us"]}, SelectPayload(options=["eu", "us"])),
        ("form", {"schema": {"type": "object"}}, FormPayload(schema={"type": "object"})),
        ("external", {"url": "https://x.example/a"}, ExternalPayload(url="https://x.example/a")),
    ],
)
def test_recorded_payloads_decode_to_the_tagged_union_and_back(
    name: str, payload: dict[str, Any] | None, typed: Any
) -> None:
    """A v1 event's (answer_format, format_payload) pair decodes to its typed payload and encodes
    back to the same object, so old events stay readable and new ones are written as before."""
    assert payload_of(name, payload) == typed
    assert wire_payload(typed) == payload


def test_each_format_says_what_a_channel_receives() -> None:
    """select sends its options, text its suggested replies, form its schema; others nothing."""
    assert FORMATS["select"].delivery(SelectPayload(options=["a"])) == {"options": ["a"]}
    assert FORMATS["text"].delivery(TextPayload(options=["a"])) == {"suggested_replies": ["a"]}
    assert FORMATS["form"].delivery(FormPayload(schema={"type": "object"})) == {"schema": {"type": "object"}}
    assert FORMATS["confirm"].delivery(ConfirmPayload()) == {}


def test_each_format_says_how_its_callback_page_and_empty_post_behave() -> None:
    """form renders its form; confirm and external show a confirm button; review its proposal;
    an empty POST confirms."""
    assert {n: FORMATS[n].page for n in NAMES} == {
        "text": "awaiting",
        "confirm": "confirm",
        "select": "awaiting",
        "form": "form",
        "external": "confirm",
        "review": "review",
    }
    assert FORMATS["confirm"].empty_callback_answer() is True
    assert FORMATS["text"].empty_callback_answer() is None


def test_an_external_verifier_never_reaches_a_client() -> None:
    """The frame of a verifier-bound external question hides the binding and says it is verified."""
    from datetime import UTC, datetime

    now = datetime(2026, 11, 30, tzinfo=UTC)
    asked = interaction_asked(
        "i",
        now,
        question="Pay?",
        answer_format="external",
        format_payload={"url": "https://pay.example/x", "verifier": {"name": "stripe", "config": {}}},
        asked_by="a",
    )
    frame = add_frame(asked)
    assert frame["format_payload"] == {"url": "https://pay.example/x"}
    assert frame["server_verified"] is True


@pytest.mark.parametrize("name", ["confirm", "form", "external"])
def test_options_belong_to_select_and_text_only(name: str) -> None:
    """Options on any other format are refused first, naming options."""
    with pytest.raises(BadInput, match=f"not for '{name}'") as caught:
        FORMATS[name].check_ask(AskInputs(options=["a"], schema={"type": "object"}))
    assert caught.value.field == "options"
