"""Where chat questions were posted, remembered on the log (docs/channels.md#correlation).

When a chat channel posts a question, the delivery service records three facts on the chat
stream, each the last message of its own subject (read by direct get, so every door replica
and every restart sees them at once, with no projection to lag behind):

- the posted message -> the question (a thread reply, a reply-to or a tap on it finds it);
- the chat -> the last question posted there (a plain message in the person's direct chat with
  the bot answers it; in a shared chat a reply must name its question by thread or reply-to);
- the question and channel -> the posted message (the delivery service edits it when the
  question is resolved elsewhere).

Provider ids (a Slack ``ts`` holds a dot, a Telegram chat id a minus) never become subject
tokens themselves: each key is a hash.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Protocol

from layby_contracts.channels import InboundReply, Posted
from layby_contracts.subjects import Names


class ChatStore(Protocol):
    names: Names

    async def put_chat(self, subject: str, value: dict[str, Any]) -> None: ...

    async def get_chat(self, subject: str) -> dict[str, Any] | None: ...


POSTED_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8)
"""How long a reply to a message not known yet waits for its record (1.55 s in all, well inside
a provider's acknowledgement window); only replies to unknown messages pay it."""


def key(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:40]


async def remember(
    store: ChatStore, channel: str, posted: Posted, interaction_id: str, question: str | None = None
) -> None:
    """Record where ``interaction_id`` was posted on ``channel`` (with its ``question``, which
    the message shows again when it is retracted)."""
    names = store.names
    sent: dict[str, Any] = {"posted": _posted(posted)}
    if question is not None:
        sent["question"] = question
    await asyncio.gather(
        store.put_chat(names.chat_sent(interaction_id, channel), sent),
        store.put_chat(
            names.chat_ref(key(channel, posted.chat, posted.message)), {"interaction_id": interaction_id}
        ),
        store.put_chat(names.chat_latest(key(channel, posted.chat)), {"interaction_id": interaction_id}),
    )


def _posted(posted: Posted) -> dict[str, Any]:
    value: dict[str, Any] = {"chat": posted.chat, "message": posted.message}
    if posted.extra:
        value["extra"] = posted.extra
    return value


async def posted_of(store: ChatStore, interaction_id: str, channel: str) -> tuple[Posted, str | None] | None:
    """Where ``interaction_id`` was posted on ``channel`` and its question text (None when the
    record holds none), if it was posted there."""
    found = await store.get_chat(store.names.chat_sent(interaction_id, channel))
    if not found or not isinstance(found.get("posted"), dict):
        return None
    raw = found["posted"]
    question = found.get("question")
    posted = Posted(chat=str(raw["chat"]), message=str(raw["message"]), extra=raw.get("extra"))
    return posted, question if isinstance(question, str) else None


async def question_of(store: ChatStore, channel: str, reply: InboundReply) -> str | None:
    """The question a reply refers to: the one its control names, else the posted message it
    replies to (a thread, a reply-to), else the last question posted in its chat."""
    if reply.interaction_id is not None:
        return reply.interaction_id
    names = store.names
    if reply.message is not None:
        subject = names.chat_ref(key(channel, reply.chat, reply.message))
        found = await store.get_chat(subject)
        for pause in POSTED_PAUSES if found is None else ():
            # A reply can reach the door before the delivery service has recorded where the
            # question went (it records right after the provider answers): look again briefly.
            await asyncio.sleep(pause)
            found = await store.get_chat(subject)
            if found is not None:
                break
        return _interaction(found)
    if not reply.direct:
        return None  # in a shared chat, a message that replies to nothing answers nothing
    return _interaction(await store.get_chat(names.chat_latest(key(channel, reply.chat))))


def by_latest(reply: InboundReply) -> bool:
    """Whether ``question_of`` took the reply for the last question posted in its chat."""
    return reply.interaction_id is None and reply.message is None and reply.direct


async def newer_latest(store: ChatStore, channel: str, reply: InboundReply, seen: str | None) -> str | None:
    """A question posted in the reply's chat after ``seen`` (None: any), recorded within a moment.

    A person can answer a question as soon as it reaches them, before the delivery service has
    recorded it as the chat's last (it records right after the provider answers): a message that
    would be late for the last question recorded, or finds none, looks again briefly, as a reply to
    a message does."""
    subject = store.names.chat_latest(key(channel, reply.chat))
    for pause in POSTED_PAUSES:
        await asyncio.sleep(pause)
        found = _interaction(await store.get_chat(subject))
        if found is not None and found != seen:
            return found
    return None


def _interaction(found: dict[str, Any] | None) -> str | None:
    value = (found or {}).get("interaction_id")
    return value if isinstance(value, str) else None
