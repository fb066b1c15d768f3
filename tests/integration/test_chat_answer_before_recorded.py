"""A person can answer a question the moment it reaches them, before the delivery service has
recorded it as their chat's last question: a plain message looks again briefly instead of being
taken as unmatched or late (docs/channels.md#correlation)."""

from __future__ import annotations

import asyncio

import pytest

from layby_contracts.channels import InboundReply, Posted
from layby_server.chat.correlation import newer_latest, question_of, remember
from layby_server.store.eventstore import EventStore

pytestmark = pytest.mark.integration
TYPED = InboundReply(kind="typed", sender="p1", chat="chat-1", value="b", direct=True)


async def _record_soon(store: EventStore, interaction_id: str) -> None:
    await asyncio.sleep(0.1)  # the delivery service, still between the provider's answer and its record
    await remember(store, "wa", Posted(chat="chat-1", message=f"m-{interaction_id}"), interaction_id)


async def test_a_plain_message_before_any_question_is_recorded_finds_the_one_recorded_next(
    store: EventStore,
) -> None:
    """No question recorded yet in the chat: the message waits a moment for the one on its way."""
    assert await question_of(store, "wa", TYPED) is None
    recording = asyncio.create_task(_record_soon(store, "ix-1"))
    assert await newer_latest(store, "wa", TYPED, None) == "ix-1"
    await recording


async def test_a_plain_message_that_would_be_late_finds_the_newer_question_recorded_next(
    store: EventStore,
) -> None:
    """The chat's last recorded question is an older one: the message waits a moment for a newer."""
    await remember(store, "wa", Posted(chat="chat-1", message="m-old"), "ix-old")
    assert await question_of(store, "wa", TYPED) == "ix-old"
    recording = asyncio.create_task(_record_soon(store, "ix-new"))
    assert await newer_latest(store, "wa", TYPED, "ix-old") == "ix-new"
    await recording


async def test_a_message_with_no_question_on_its_way_stays_unmatched(store: EventStore) -> None:
    """Nothing is posted after the last question: the look finds nothing newer and gives up."""
    await remember(store, "wa", Posted(chat="chat-1", message="m-old"), "ix-old")
    assert await newer_latest(store, "wa", TYPED, "ix-old") is None
