"""The messages door's frames (docs/doors/messages.md): every key a recorded inbound message
holds reaches the reader, and a key that does not apply is absent, never null."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec

from layby_contracts.events import ChannelMessageReceived, encode_event
from layby_server.auth import Principal
from layby_services.door.routes.messages import message_frame

OPS = Principal("ops", "operator")
AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def _data(frame: bytes | None) -> dict[str, object]:
    assert frame is not None
    line = next(ln for ln in frame.split(b"\n") if ln.startswith(b"data: "))
    decoded = msgspec.json.decode(line[len(b"data: ") :])
    assert isinstance(decoded, dict)
    return decoded


def test_a_reply_to_a_notification_names_it_and_carries_the_params_the_channel_read() -> None:
    event = ChannelMessageReceived(
        message_id="m1",
        channel="wa",
        sender="15550001111",
        chat="15550001111",
        received_at=AT,
        reason="unmatched",
        text="Roll it back",
        notification_id="n-1",
        params={"payload": "rollback"},
    )
    data = _data(message_frame(7, encode_event(event), OPS))
    assert data["notification_id"] == "n-1"
    assert data["params"] == {"payload": "rollback"}
    assert data["text"] == "Roll it back"


def test_a_message_about_nothing_has_no_notification_or_params_keys() -> None:
    event = ChannelMessageReceived(
        message_id="m2", channel="wa", sender="1", chat="1", received_at=AT, reason="unmatched", text="hi"
    )
    data = _data(message_frame(8, encode_event(event), OPS))
    assert "notification_id" not in data and "params" not in data and "interaction_id" not in data
