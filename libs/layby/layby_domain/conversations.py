"""Conversations on a chat channel (docs/doors/hooks.md#conversations-on-a-chat-channel): the
subject a chat's messages visit, the input document a message becomes, and the text each reply
shows in the chat. Pure, so the door (which visits) and the delivery service (which posts the
replies) read the same rules.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import msgspec

from layby_contracts.doors import Outcome
from layby_contracts.events import ChannelMessageReceived

SUBJECT_MAX_CHARS = 128
SUBJECT_HASH_CHARS = 16
"""Hex digits of SHA-256 that end a subject whose chat id had to be changed to fit."""
REPLY_MAX_CHARS = 4000
"""A reply's text is cut here (within what Slack and Telegram show in one message)."""
ERROR_SHOWN_MAX_CHARS = 200
"""A failure shows at most this much of its error's first line: never a whole traceback."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_:@-]")


def chat_subject(channel: str, chat: str) -> str:
    """The conversation subject of a chat: ``<channel>:<chat>`` when that is a subject as it
    stands (1-128 of ``[A-Za-z0-9_:@-]``); otherwise every other character becomes ``-``, the
    result is cut to 111 characters and ``-`` plus the first 16 hex digits of the SHA-256 of
    ``<channel>:<chat>`` are appended, so two chats never share a subject by being changed."""
    raw = f"{channel}:{chat}"
    safe = _UNSAFE.sub("-", raw)
    if safe == raw and len(raw) <= SUBJECT_MAX_CHARS:
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:SUBJECT_HASH_CHARS]
    return f"{safe[: SUBJECT_MAX_CHARS - SUBJECT_HASH_CHARS - 1]}-{digest}"


def chat_input(message: ChannelMessageReceived) -> dict[str, Any]:
    """The input document of a chat message's visit: what the person wrote and where, with the
    keys the message does not have left out (never ``null``)."""
    document = {
        "text": message.text,
        "value": message.value,
        "sender": message.sender,
        "sender_name": message.sender_name,
        "chat": message.chat,
        "channel": message.channel,
        "message_id": message.message_id,
    }
    return {key: value for key, value in document.items() if value is not None}


def reply_text(outcome: Outcome) -> str | None:
    """What a conversation's reply says in the chat (None: nothing to post). A finished result
    that is a string is shown as it is, ``{"text": ...}`` by its text, ``null`` or blank text
    not at all, anything else as compact JSON; a failure as one short line; a park as the
    questions of the caller asks it parked on (none when it waits for a person)."""
    match outcome.status:
        case "finished":
            return _result_text(outcome.result)
        case "failed":
            lines = (outcome.error or "").strip().splitlines()
            detail = _cut(lines[0].strip(), ERROR_SHOWN_MAX_CHARS) if lines else ""
            return f"That failed: {detail}" if detail else "That failed."
        case "parked":
            questions = [a.question for a in outcome.asks or [] if a.question and a.question.strip()]
            return _cut("\n".join(questions), REPLY_MAX_CHARS) if questions else None


def _result_text(result: Any) -> str | None:
    if result is None:
        return None
    if isinstance(result, str):
        text = result
    elif isinstance(result, dict) and isinstance(result.get("text"), str):
        text = result["text"]
    else:
        text = msgspec.json.encode(result).decode()
    return _cut(text, REPLY_MAX_CHARS) if text.strip() else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
