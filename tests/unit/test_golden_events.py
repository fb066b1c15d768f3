"""Golden encoded samples of every event decode, so old logs stay readable (docs/engineering.md#evolving-event-schemas)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from layby_contracts.events import InteractionAnswered, InteractionAsked, InteractionRemoved, decode_event

pytestmark = pytest.mark.unit
GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize(
    ("tag", "cls"),
    [
        ("interaction.asked.v1", InteractionAsked),
        ("interaction.answered.v1", InteractionAnswered),
        ("interaction.removed.v1", InteractionRemoved),
    ],
)
def test_golden_sample_decodes_to_its_event(tag: str, cls: type) -> None:
    """Each tag's golden sample decodes to its Struct and keeps every field it had (fields added
    later take their defaults)."""
    raw = (GOLDEN / f"{tag}.json").read_bytes()
    event = decode_event(raw)
    assert isinstance(event, cls)
    again = msgspec.json.decode(msgspec.json.encode(event))
    original = msgspec.json.decode(raw)
    assert {k: again[k] for k in original} == original


def test_unknown_fields_from_newer_writers_are_skipped() -> None:
    """Events do not forbid unknown fields: an old reader skips a new one (docs/engineering.md#evolving-event-schemas)."""
    raw = msgspec.json.decode((GOLDEN / "interaction.removed.v1.json").read_bytes())
    raw["added_in_v1_5"] = {"x": 1}
    assert isinstance(decode_event(msgspec.json.encode(raw)), InteractionRemoved)


def test_every_event_type_has_a_golden_sample() -> None:
    """No event tag ships without a sample."""
    tags = {cls.__struct_config__.tag for cls in (InteractionAsked, InteractionAnswered, InteractionRemoved)}
    assert tags == {p.stem for p in GOLDEN.glob("*.json")}
