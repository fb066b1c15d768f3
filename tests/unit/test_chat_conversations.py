"""The pure rules of conversations on a chat channel (docs/doors/hooks.md#conversations-on-a-chat-channel):
the subject a chat becomes, the input document a message becomes, the text a reply shows."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest

from layby_contracts.doors import Entry, Outcome
from layby_contracts.events import ChannelMessageReceived
from layby_domain.conversations import chat_input, chat_subject, reply_text
from layby_domain.validation import is_subject

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("channel", "chat", "subject"),
    [
        ("team", "D0ALICE01", "team:D0ALICE01"),
        ("tg", "-1001234567890", "tg:-1001234567890"),
        ("tg", "@ops_channel", "tg:@ops_channel"),
    ],
)
def test_a_chat_that_is_a_subject_as_it_stands_keeps_its_name(channel: str, chat: str, subject: str) -> None:
    """``<channel>:<chat>`` is the subject when it is already 1-128 of ``[A-Za-z0-9_:@-]``."""
    assert chat_subject(channel, chat) == subject


def test_other_characters_become_dashes_and_a_hash_of_the_original_keeps_chats_apart() -> None:
    """A changed subject ends in ``-`` and 16 hex digits of the SHA-256 of ``<channel>:<chat>``,
    so two chats that differ only in replaced characters never share a subject."""
    digest = hashlib.sha256(b"team:room.1/b").hexdigest()[:16]
    assert chat_subject("team", "room.1/b") == f"team:room-1-b-{digest}"
    assert chat_subject("team", "room.1/b") != chat_subject("team", "room,1/b")
    assert chat_subject("team", "room.1/b") == chat_subject("team", "room.1/b")  # deterministic


def test_a_long_chat_id_is_cut_to_the_subject_limit_with_its_hash() -> None:
    """A subject longer than 128 characters is cut to 111 and the hash appended: 128 in all."""
    chat = "C" * 200
    subject = chat_subject("team", chat)
    digest = hashlib.sha256(f"team:{chat}".encode()).hexdigest()[:16]
    assert len(subject) == 128 and is_subject(subject)
    assert subject == f"team:{'C' * 106}-{digest}"
    assert chat_subject("team", "C" * 123) == f"team:{'C' * 123}"  # exactly 128: unchanged


@pytest.mark.parametrize("chat", ["", "ü", "a b", "x" * 500, "日本語", "a\x00b", "..", "a:b:c"])
def test_every_chat_maps_to_a_valid_subject(chat: str) -> None:
    """Whatever a provider calls its chat, the subject obeys the subject rule."""
    assert is_subject(chat_subject("team", chat))


def test_the_input_document_leaves_out_the_keys_a_message_does_not_have() -> None:
    """The document holds text, value, sender, sender_name, chat, channel and message_id; an
    absent one is left out, never null."""
    typed = ChannelMessageReceived(
        message_id="m1", channel="team", sender="U1", chat="D1", received_at=datetime.now(UTC),
        reason="unmatched", text="hi",
    )  # fmt: skip
    assert chat_input(typed) == {
        "text": "hi",
        "sender": "U1",
        "chat": "D1",
        "channel": "team",
        "message_id": "m1",
    }
    tapped = ChannelMessageReceived(
        message_id="m2", channel="team", sender="U1", sender_name="ada", chat="D1",
        received_at=datetime.now(UTC), reason="unmatched", value={"a": 1},
    )  # fmt: skip
    assert chat_input(tapped) == {
        "value": {"a": 1}, "sender": "U1", "sender_name": "ada", "chat": "D1", "channel": "team",
        "message_id": "m2",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("result", "text"),
    [
        ("hello back", "hello back"),
        ({"text": "hello back", "extra": 1}, "hello back"),
        ({"n": 1, "ok": True}, '{"n":1,"ok":true}'),
        ([1, "a"], '[1,"a"]'),
        (42, "42"),
        ({"text": 7}, '{"text":7}'),
        (None, None),
        ("   ", None),
        ({"text": ""}, None),
    ],
)
def test_a_finished_result_is_its_string_its_text_or_compact_json(result: object, text: str | None) -> None:
    """A string as it is, ``{"text": ...}`` by its text, anything else as compact JSON; a
    ``null`` result or blank text posts nothing."""
    assert reply_text(Outcome(status="finished", result=result)) == text


def test_a_long_reply_is_cut_with_an_ellipsis() -> None:
    """A reply's text is at most 4000 characters."""
    got = reply_text(Outcome(status="finished", result="x" * 5000))
    assert got is not None and len(got) == 4000 and got.endswith("…")
    assert len(reply_text(Outcome(status="finished", result=list(range(5000)))) or "") == 4000


def test_a_failure_is_one_short_line_never_the_whole_error() -> None:
    """A failed outcome shows the first line of its error, at most 200 characters."""
    error = "ValueError: " + "y" * 500 + "\nTraceback (most recent call last):\n  secret internals"
    got = reply_text(Outcome(status="failed", error=error))
    assert got is not None and got.startswith("That failed: ValueError: yyy")
    assert len(got) == len("That failed: ") + 200 and "Traceback" not in got
    assert reply_text(Outcome(status="failed", error="the run was cancelled")) == (
        "That failed: the run was cancelled"
    )
    assert reply_text(Outcome(status="failed")) == "That failed."


def test_a_park_shows_the_questions_of_its_caller_asks() -> None:
    """A parked outcome shows each caller ask's question on its own line; a park that waits for
    a person (no caller asks) posts nothing."""
    asks = [
        Entry(id="a", status="asking", question="approve?"),
        Entry(id="b", status="asking", question="which region?"),
    ]
    assert reply_text(Outcome(status="parked", asks=asks)) == "approve?\nwhich region?"
    assert reply_text(Outcome(status="parked")) is None
