"""Golden encoded samples of every event, command and reply decode, so what is already in the
streams and on the wire stays readable (docs/engineering.md#evolving-event-schemas)."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import msgspec
import pytest

from layby_contracts.commands import (
    COMMAND_DECODER,
    DOOR_COMMAND_DECODER,
    NOTIFY_DECODER,
    REPLY_DECODER,
    Command,
    Continuation,
    DoorCommand,
    Notify,
    Reply,
    Wake,
)
from layby_contracts.events import EVENT_DECODER, Event, InteractionRemoved, decode_event
from layby_contracts.webhooks import ATTEMPT_DECODER, WebhookAttempt
from layby_server.write.feed import FeedEntry

pytestmark = pytest.mark.unit
GOLDEN = Path(__file__).parent / "golden"


def _tagged(union: Any) -> dict[str, type]:
    return {cls.__struct_config__.tag: cls for cls in typing.get_args(union)}


EVENTS = _tagged(Event)
COMMANDS = {**_tagged(Command), **_tagged(DoorCommand)}
REPLIES = {f"reply.{tag}": cls for tag, cls in _tagged(Reply).items()}
SAMPLES: dict[str, tuple[type, Any]] = {
    **{tag: (cls, EVENT_DECODER) for tag, cls in EVENTS.items()},
    **{tag: (cls, COMMAND_DECODER) for tag, cls in _tagged(Command).items()},
    **{tag: (cls, DOOR_COMMAND_DECODER) for tag, cls in _tagged(DoorCommand).items()},
    **{tag: (cls, REPLY_DECODER) for tag, cls in REPLIES.items()},
    "continuation.v1": (Continuation, msgspec.json.Decoder(Continuation)),
    "cmd.notify.v1": (Notify, NOTIFY_DECODER),
    "feed.notification.v1": (FeedEntry, msgspec.json.Decoder(FeedEntry)),
    "wake": (Wake, msgspec.json.Decoder(Wake)),
    "webhook.attempted.v1": (WebhookAttempt, ATTEMPT_DECODER),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_golden_sample_decodes_to_its_struct(name: str) -> None:
    """Each sample decodes to its Struct and keeps every field it had (fields added later take
    their defaults)."""
    cls, decoder = SAMPLES[name]
    raw = (GOLDEN / f"{name}.json").read_bytes()
    decoded = decoder.decode(raw)
    assert isinstance(decoded, cls)
    original = msgspec.json.decode(raw)
    kept = {k: msgspec.to_builtins(getattr(decoded, k)) for k in original if k != "type"}
    assert kept == {k: v for k, v in original.items() if k != "type"}


def test_unknown_fields_from_newer_writers_are_skipped() -> None:
    """Events do not forbid unknown fields: an old reader skips a new one."""
    raw = msgspec.json.decode((GOLDEN / "interaction.removed.v1.json").read_bytes())
    raw["added_in_v1_5"] = {"x": 1}
    assert isinstance(decode_event(msgspec.json.encode(raw)), InteractionRemoved)


def test_every_event_command_and_reply_has_a_golden_sample() -> None:
    """No tag ships without a sample, and no sample outlives its tag."""
    assert set(SAMPLES) == {p.stem for p in GOLDEN.glob("*.json")}
