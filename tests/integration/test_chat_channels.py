"""The channel-neutral rules of chat channels (docs/channels.md#replies,
docs/doors/channels.md, docs/doors/messages.md): real services, a scripted chat plugin
(``tests.channel_plugins:ScriptedChat``) whose inbound requests are signed JSON replies, so each
rule is checked apart from any one provider's wire format."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import msgspec
import pytest
from httpx_sse import aconnect_sse

from layby.sdk import AnswerDetails, Client
from layby_contracts.errors import BadInput
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import ScriptedChat, sign_chat
from tests.conftest import System
from tests.helpers import eventually


@pytest.fixture(autouse=True)
def _fresh_logs() -> None:
    ScriptedChat.LOGS.clear()


async def _posted(channel: str, n: int = 1) -> Any:
    async def seen() -> Any:
        log = ScriptedChat.LOGS.get(channel)
        return log.posted[n - 1] if log is not None and len(log.posted) >= n else None

    return await eventually(seen, f"question {n} posted on {channel}", timeout=10)


async def _reply(system: System, channel: str, **reply: Any) -> httpx.Response:
    body = msgspec.json.encode(
        {"sender": "U1", "chat": "room", "direct": True, "event_id": uuid.uuid4().hex, **reply}
    )
    async with httpx.AsyncClient(base_url=system.url, timeout=10) as http:
        return await http.post(f"/api/channels/{channel}/events", content=body, headers=sign_chat(body))


async def test_a_tap_answers_with_the_option_text_and_the_author_reply_id_as_params(
    chan: System, client: Client
) -> None:
    """A select answer is always the option text; a tapped control's author id rides the answer
    as opaque params, readable beside the answer; answered_by is the channel identity."""
    ask = asyncio.create_task(
        client.ask_user(
            "Region?",
            answer_format="select",
            options=["eu", "us"],
            channel="chat-a",
            reply_ids=["r-eu", "r-us"],
            details=True,
            timeout=30,
        )
    )
    posted = await _posted("chat-a")
    assert posted.options == ["eu", "us"] and posted.reply_ids == ["r-eu", "r-us"]
    resp = await _reply(chan, "chat-a", kind="tap", interaction_id=posted.interaction_id, index=1)
    assert resp.status_code == 200 and resp.json()["status"] == "answered"
    got = await asyncio.wait_for(ask, 10)
    assert isinstance(got, AnswerDetails)
    assert got.answer == "us" and got.params == {"reply_id": "r-us"} and got.answered_by == "chat-a:U1"


async def test_a_typed_reply_in_the_chat_answers_the_last_question_posted_there(
    chan: System, client: Client
) -> None:
    """A typed reply is correlated durably: to the posted message it replies to, or else to the
    last question posted in its chat; a plain typed answer carries no params."""
    ask = asyncio.create_task(
        client.ask_user("Why?", channel="chat-a", recipient="room", details=True, timeout=30)
    )
    posted = await _posted("chat-a")
    resp = await _reply(chan, "chat-a", kind="typed", value="because", message=f"m-{posted.interaction_id}")
    assert resp.json()["status"] == "answered"
    got = await asyncio.wait_for(ask, 10)
    assert got.answer == "because" and got.params is None


async def test_a_refused_reply_keeps_the_question_open_and_retry_sends_the_notice_with_the_reason(
    chan: System, client: Client
) -> None:
    """on_mismatch retry (the default): the ask stays parked and the person gets mismatch_notice
    with {reason} filled in; an unmatched reply never ends the ask."""
    ask = asyncio.create_task(
        client.ask_user(
            "Pick",
            answer_format="select",
            options=["a", "b"],
            channel="chat-a",
            mismatch_notice="Nope: {reason}",
            timeout=30,
        )
    )
    await _posted("chat-a")
    resp = await _reply(chan, "chat-a", kind="typed", value="c")
    outcome = resp.json()
    assert outcome["status"] == "rejected"
    assert outcome["notice"] == f"Nope: {outcome['reason']}" and "'a', 'b'" in outcome["reason"]
    assert not ask.done()
    assert (await _reply(chan, "chat-a", kind="typed", value="b")).json()["status"] == "answered"
    assert await asyncio.wait_for(ask, 10) == "b"


async def test_bridge_sends_no_notice_and_hands_the_reply_to_the_messages_door(
    chan: System, client: Client
) -> None:
    """on_mismatch bridge: no notice; the reply becomes an inbound message (reason mismatch)
    readable on the messages door, resumable by Last-Event-ID."""
    ask = asyncio.create_task(
        client.ask_user("Yes?", answer_format="confirm", channel="chat-a", on_mismatch="bridge", timeout=30)
    )
    posted = await _posted("chat-a")
    first = await _reply(chan, "chat-a", kind="typed", value="what is this about?")
    assert first.json()["status"] == "bridged" and "notice" not in first.json()
    second = await _reply(chan, "chat-a", kind="typed", value="and who asks?")
    assert second.json()["status"] == "bridged"
    frames = await _messages(chan, 2)
    assert [f["text"] for _, f in frames] == ["what is this about?", "and who asks?"]
    assert frames[0][1]["reason"] == "mismatch" and frames[0][1]["interaction_id"] == posted.interaction_id
    resumed = await _messages(chan, 1, last_event_id=frames[0][0])
    assert resumed[0][1]["text"] == "and who asks?"
    assert (
        await _reply(chan, "chat-a", kind="yes_no", interaction_id=posted.interaction_id, value=True)
    ).json()["status"] == "answered"
    assert await asyncio.wait_for(ask, 10) is True


async def _messages(
    system: System, n: int, last_event_id: str | None = None
) -> list[tuple[str, dict[str, Any]]]:
    got: list[tuple[str, dict[str, Any]]] = []
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    if last_event_id is None:
        headers["Last-Event-ID"] = "0"
    async with (
        system.http() as http,
        aconnect_sse(http, "GET", "/api/messages/stream", headers=headers) as source,
    ):
        async for sse in source.aiter_sse():
            if sse.event == "message":
                got.append((sse.id, msgspec.json.decode(sse.data)))
                if len(got) == n:
                    return got
    return got


async def test_a_late_reply_is_not_lost_and_the_resolved_question_is_retracted(
    chan: System, client: Client
) -> None:
    """A reply to a question answered elsewhere becomes an inbound message (reason late); the
    chat copy of a question answered in the inbox is retracted, naming who answered where."""
    ask = asyncio.create_task(client.ask_user("Ship?", answer_format="confirm", channel="chat-a", timeout=30))
    posted = await _posted("chat-a")
    async with chan.http() as http:
        resp = await http.post(
            f"/api/interactions/{posted.interaction_id}/answer",
            json={"answer": False},
            headers={"Layby-Client": "inbox"},
        )
        assert resp.status_code == 200
    assert await asyncio.wait_for(ask, 10) is False

    async def retracted() -> Any:
        return ScriptedChat.LOGS["chat-a"].retracted.get(posted.interaction_id)

    retraction = await eventually(retracted, "the chat copy retracted", timeout=10)
    assert retraction.outcome == "answered" and retraction.question == "Ship?"
    late = await _reply(chan, "chat-a", kind="yes_no", interaction_id=posted.interaction_id, value=True)
    assert late.json()["status"] == "late"
    frames = await _messages(chan, 1)
    assert frames[0][1]["reason"] == "late" and frames[0][1]["interaction_id"] == posted.interaction_id


async def test_one_question_on_two_channels_the_first_reply_wins_and_the_other_copy_is_retracted(
    chan: System, client: Client
) -> None:
    """channel=[a, b] delivers to both; replies on both at once: exactly one answers, the other
    is late; both copies are retracted."""
    ask = asyncio.create_task(
        client.ask_user(
            "Who?", channel=["chat-a", "chat-b"], recipient={"chat-a": "ra", "chat-b": "rb"}, timeout=30
        )
    )
    a, b = await _posted("chat-a"), await _posted("chat-b")
    assert a.interaction_id == b.interaction_id and (a.recipient, b.recipient) == ("ra", "rb")
    one, two = await asyncio.gather(
        _reply(chan, "chat-a", kind="typed", value="from a", chat="ra"),
        _reply(chan, "chat-b", kind="typed", value="from b", chat="rb"),
    )
    statuses = sorted([one.json()["status"], two.json()["status"]])
    assert statuses == ["answered", "late"]
    assert await asyncio.wait_for(ask, 10) in ("from a", "from b")

    async def both() -> bool:
        return all(a.interaction_id in ScriptedChat.LOGS[c].retracted for c in ("chat-a", "chat-b"))

    await eventually(both, "both copies retracted", timeout=10)


async def test_a_redelivered_event_is_taken_once(chan: System, client: Client) -> None:
    """A provider's redelivery (the same event id) is an idempotent no-op: one inbound message."""
    body = {"kind": "typed", "value": "hello bot", "chat": "nowhere", "event_id": "evt-1"}
    assert (await _reply(chan, "chat-a", **body)).json()["status"] == "unmatched"
    again = await _reply(chan, "chat-a", **body)
    assert again.status_code == 200 and again.content == b""
    marker = await _reply(chan, "chat-a", kind="typed", value="second", chat="nowhere")
    assert marker.json()["status"] == "unmatched"
    frames = await _messages(chan, 2)
    assert [f["text"] for _, f in frames] == ["hello bot", "second"]


@pytest.mark.parametrize("headers", [{}, {"X-Test-Signature": "0" * 64}])
async def test_an_unsigned_or_forged_inbound_request_is_401_and_nothing_is_recorded(
    chan: System, client: Client, headers: dict[str, str]
) -> None:
    """Fail closed: no valid signature, 401 with a fixed body (nothing of the request echoed),
    nothing recorded."""
    ask = asyncio.create_task(client.ask_user("Ok?", answer_format="confirm", channel="chat-a", timeout=30))
    posted = await _posted("chat-a")
    body = msgspec.json.encode(
        {
            "kind": "yes_no",
            "sender": "<script>",
            "chat": "room",
            "value": True,
            "interaction_id": posted.interaction_id,
        }
    )
    async with httpx.AsyncClient(base_url=chan.url, timeout=10) as http:
        resp = await http.post("/api/channels/chat-a/events", content=body, headers=headers)
    assert resp.status_code == 401 and b"script" not in resp.content
    assert resp.json() == {"error": "the request is not signed by the channel's provider"}
    assert not ask.done()
    ask.cancel()


async def test_an_unknown_channel_name_is_the_uniform_404(chan: System) -> None:
    """A name that is not a configured chat channel (or a channel without an inbound webhook)
    gets the same 404."""
    async with httpx.AsyncClient(base_url=chan.url, timeout=10) as http:
        for name in ("nope", "ops"):
            resp = await http.post(f"/api/channels/{name}/events", content=b"{}")
            assert resp.status_code == 404 and resp.json() == {"error": "not found"}


async def test_chat_options_are_refused_with_the_argument_named(chan: System, client: Client) -> None:
    """Bad chat options fail before anything is stored, naming the argument."""
    cases = [
        ({"on_mismatch": "ignore", "channel": "chat-a"}, "on_mismatch"),
        ({"mismatch_notice": " ", "channel": "chat-a"}, "mismatch_notice"),
        (
            {"reply_ids": ["x"], "channel": "chat-a", "answer_format": "select", "options": ["a", "b"]},
            "reply_ids",
        ),
        ({"channel": ["chat-a", "chat-a"]}, "channel"),
        ({"channel": ["chat-a", "nope"]}, "channel"),
        ({"channel": ["chat-a"], "recipient": {"chat-b": "x"}}, "recipient"),
    ]
    for kwargs, field in cases:
        with pytest.raises(BadInput) as caught:
            await client.ask_user("Q?", timeout=5, **kwargs)
        assert caught.value.field == field, (kwargs, caught.value)


async def test_a_reply_lands_after_the_delivery_service_and_the_door_restart(
    chan: System, client: Client
) -> None:
    """The correlation is durable: with the delivery service and the door restarted between the
    delivery and the reply, a typed reply in the thread still answers the question."""
    ask = asyncio.create_task(client.ask_user("Still there?", channel="chat-a", recipient="r9", timeout=60))
    posted = await _posted("chat-a")
    await chan.stop_service("delivery")
    await chan.stop_service("door")
    await chan.start_service("delivery")
    await chan.start_service("door")
    resp = await _reply(
        chan, "chat-a", kind="typed", value="yes, here", chat="r9", message=f"m-{posted.interaction_id}"
    )
    assert resp.json()["status"] == "answered"
    assert await asyncio.wait_for(ask, 10) == "yes, here"


async def test_a_control_naming_a_question_of_another_channel_answers_nothing(
    chan: System, client: Client
) -> None:
    """Only a question posted on a channel can be answered from it: a tap on chat-b naming a
    chat-a question is an unmatched inbound message."""
    ask = asyncio.create_task(client.ask_user("Go?", answer_format="confirm", channel="chat-a", timeout=30))
    posted = await _posted("chat-a")
    resp = await _reply(chan, "chat-b", kind="yes_no", interaction_id=posted.interaction_id, value=True)
    assert resp.json()["status"] == "unmatched"
    assert not ask.done()
    ask.cancel()


async def test_an_oversized_inbound_body_is_413_before_anything_is_read(chan: System) -> None:
    """The door's body cap applies to inbound webhooks (counted bytes, not Content-Length)."""
    body = b"x" * (chan.settings.max_body_bytes + 1)
    async with httpx.AsyncClient(base_url=chan.url, timeout=10) as http:
        resp = await http.post("/api/channels/chat-a/events", content=body, headers=sign_chat(body))
    assert resp.status_code == 413


async def test_an_inbound_event_is_taken_once_and_a_released_one_can_be_taken_again(
    store: EventStore,
) -> None:
    """The claim behind 'taken once': a second claim of the same event fails; after a failure
    released it, the provider's redelivery takes it again, once."""
    subject = store.names.chat_seen("k" * 40)
    assert await store.claim_once(subject) is True
    assert await store.claim_once(subject) is False
    await store.release(subject)
    assert await store.claim_once(subject) is True
    assert await store.claim_once(subject) is False


async def test_in_a_shared_chat_a_message_that_replies_to_nothing_answers_nothing(
    chan: System, client: Client
) -> None:
    """Only the person's direct chat with the bot lets a plain message answer the last question
    posted there; in a shared chat it is an unmatched inbound message and the question stays open."""
    ask = asyncio.create_task(client.ask_user("Name?", channel="chat-a", recipient="room", timeout=30))
    await _posted("chat-a")
    resp = await _reply(chan, "chat-a", kind="typed", value="lunch anyone?", direct=False)
    assert resp.json()["status"] == "unmatched" and not ask.done()
    assert (await _reply(chan, "chat-a", kind="typed", value="Ada")).json()["status"] == "answered"
    assert await asyncio.wait_for(ask, 10) == "Ada"


async def test_a_restricted_identity_reads_only_replies_to_what_it_asked(chan: System) -> None:
    """The messages door clamps by audience: alice sees the late replies to her own question,
    not the one to bob's, nor a message about no question; the operator sees them all."""
    from tests.conftest import ALICE, BOB

    alice, bob = (
        await chan.sdk(ALICE, public_base_url=chan.url),
        await chan.sdk(BOB, public_base_url=chan.url),
    )
    first = asyncio.create_task(
        alice.ask_user("Alice asks?", answer_format="confirm", channel="chat-a", timeout=30)
    )
    hers = await _posted("chat-a")
    second = asyncio.create_task(
        bob.ask_user("Bob asks?", answer_format="confirm", channel="chat-a", timeout=30)
    )
    his = await _posted("chat-a", 2)
    for posted in (hers, his):
        tap = {"kind": "yes_no", "interaction_id": posted.interaction_id}
        assert (await _reply(chan, "chat-a", **tap, value=True)).json()["status"] == "answered"
    await asyncio.gather(first, second)
    await _reply(chan, "chat-a", kind="yes_no", interaction_id=his.interaction_id, value=False, sender="U2")
    await _reply(chan, "chat-a", kind="typed", value="hi bot", chat="elsewhere", sender="U2")
    await _reply(chan, "chat-a", kind="yes_no", interaction_id=hers.interaction_id, value=False, sender="U3")
    everything = await _messages(chan, 3)
    assert [(f["reason"], f["sender"]) for _, f in everything] == [
        ("late", "U2"),
        ("unmatched", "U2"),
        ("late", "U3"),
    ]
    seen: list[dict[str, Any]] = []
    async with (
        chan.http(ALICE) as http,
        aconnect_sse(http, "GET", "/api/messages/stream", headers={"Last-Event-ID": "0"}) as source,
    ):
        async for sse in source.aiter_sse():
            if sse.event == "message":
                seen.append(msgspec.json.decode(sse.data))
                break  # her first frame is the last message recorded: nothing before it was hers
    assert [(f["sender"], f["interaction_id"]) for f in seen] == [("U3", hers.interaction_id)]


async def test_the_sdk_follows_inbound_messages_and_resumes_after_the_last_one_seen(chan: System) -> None:
    """layby.messages(): each inbound message once, in order, as a typed InboundMessage; started
    again with the last id seen, it continues after it (one channel's messages only)."""
    import layby
    from tests.conftest import OPERATOR

    await _reply(chan, "chat-a", kind="typed", value="one", chat="nowhere")
    await _reply(chan, "chat-b", kind="typed", value="other channel", chat="nowhere")
    await _reply(chan, "chat-a", kind="typed", value="two", chat="nowhere")
    seen: list[tuple[str, str | None]] = []
    async for event_id, message in layby.messages("chat-a", url=chan.url, token=OPERATOR, last_event_id="0"):
        seen.append((event_id, message.text))
        if len(seen) == 2:
            break
    assert [text for _, text in seen] == ["one", "two"]
    await _reply(chan, "chat-a", kind="typed", value="three", chat="nowhere")
    async for _, message in layby.messages("chat-a", url=chan.url, token=OPERATOR, last_event_id=seen[-1][0]):
        assert (message.text, message.reason, message.channel) == ("three", "unmatched", "chat-a")
        break
