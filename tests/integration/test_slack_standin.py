"""The Slack channel against the Slack stand-in over loopback, through the official SDK
(docs/channels.md#slack): what it posts is what Slack accepts, Slack's refusals become the right
delivery errors, and what a person does comes back as the right reply."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from litestar import Litestar, Request, Response, post

from layby_contracts.channels import (
    ChannelDelivery,
    ChannelDeliveryError,
    ChannelInputError,
    InboundReply,
    InboundRequest,
    ReplyOutcome,
    Retraction,
)
from layby_contracts.events import MediaItem
from layby_server.chat.slack import NO_LONGER_OPEN, SlackChannel
from tests.standins.serving import serve
from tests.standins.slack import (
    BOT_TOKEN,
    CHANNEL,
    PERSON,
    SIGNING_SECRET,
    SlackStandin,
    serve_slack_standin,
)

pytestmark = pytest.mark.timeout(60)

FORM = {
    "type": "object",
    "required": ["service", "replicas"],
    "properties": {
        "service": {"type": "string", "enum": ["api", "web"]},
        "replicas": {"type": "integer", "title": "Replicas"},
        "ratio": {"type": "number"},
        "canary": {"type": "boolean"},
        "note": {"type": "string"},
    },
}


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandin]:
    async with serve_slack_standin() as running:
        yield running


@pytest.fixture
async def plugin(standin: SlackStandin) -> AsyncIterator[SlackChannel]:
    secrets = {"bot": BOT_TOKEN.encode(), "signing": SIGNING_SECRET.encode()}
    config = {
        "bot_token": "bot",
        "signing_secret": "signing",
        "api_url": standin.api_url,
        "default_recipient": CHANNEL,
    }
    channel = SlackChannel(name="team", config=config, secrets=secrets, clock=standin.clock)
    yield channel
    await channel.aclose()


def delivery(standin: SlackStandin, answer_format: str = "text", **fields: Any) -> ChannelDelivery:
    return ChannelDelivery(
        interaction_id="ia_0123456789",
        question=fields.pop("question", "Deploy the hotfix now?"),
        answer_format=answer_format,
        callback_url="https://layby.example.com/api/interactions/callback/tk",
        timeout_at=datetime.fromtimestamp(standin.clock(), UTC) + timedelta(minutes=10),
        **fields,
    )


async def test_every_format_is_accepted_by_slack(plugin: SlackChannel, standin: SlackStandin) -> None:
    """Each answer format posts one message the provider accepts; Posted names its channel and ts."""
    cases = [
        delivery(standin, "text"),
        delivery(standin, "text", suggested_replies=["Ship it", "Wait"]),
        delivery(standin, "confirm"),
        delivery(standin, "select", options=["blue", "green"]),
        delivery(standin, "select", options=[f"region-{n}" for n in range(40)]),
        delivery(standin, "select", options=[f"region-{n}" for n in range(140)]),
        delivery(standin, "form", schema=FORM),
        delivery(standin, "external"),
        delivery(standin, "text", question="q" * 9000, media=[
            MediaItem(kind="image", url="https://i.example/p.png"), MediaItem(kind="link", url="https://e.example/x"),
        ]),
    ]  # fmt: skip
    for case in cases:
        posted = await plugin.deliver(case)
        assert posted.chat == CHANNEL
        assert standin.message(CHANNEL, posted.message).blocks
    assert standin.errors() == []
    assert len(standin.messages(CHANNEL)) == len(cases)


async def test_a_user_id_recipient_is_posted_to_the_direct_message(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """A user id as recipient reaches the app's DM; Posted carries the DM's channel id."""
    posted = await plugin.deliver(delivery(standin, recipient=PERSON))
    assert posted.chat == "D" + PERSON[1:]


async def test_a_rate_limit_is_retryable_after_slacks_pause(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """A 429 is one attempt (the SDK does not retry it) and a retryable error with Retry-After."""
    standin.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=7)
    with pytest.raises(ChannelDeliveryError) as err:
        await plugin.deliver(delivery(standin))
    assert (err.value.retryable, err.value.retry_after) == (True, 7.0)
    assert str(err.value) == "slack 'team': chat.postMessage failed (ratelimited)"
    assert [c.method for c in standin.calls] == ["chat.postMessage"]


async def test_a_server_error_is_retryable(plugin: SlackChannel, standin: SlackStandin) -> None:
    """Slack's 5xx may pass on another attempt."""
    standin.fail_next("chat.postMessage", "internal_error", status=500)
    with pytest.raises(ChannelDeliveryError) as err:
        await plugin.deliver(delivery(standin))
    assert err.value.retryable is True


async def test_an_unknown_channel_is_a_permanent_refusal(plugin: SlackChannel, standin: SlackStandin) -> None:
    """channel_not_found is never retried, and the error names Slack's code but never the token."""
    with pytest.raises(ChannelInputError) as err:
        await plugin.deliver(delivery(standin, recipient="C0NOWHERE"))
    assert str(err.value) == "slack 'team': chat.postMessage failed (channel_not_found)"
    assert err.value.retryable is False
    assert BOT_TOKEN not in str(err.value)


async def test_say_posts_a_conversation_reply_as_escaped_plain_text_in_a_thread(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """A conversation's reply is plain text that cannot mention or link, posted in the thread it
    names; an unknown chat is a permanent refusal (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    root = await plugin.deliver(delivery(standin))
    await plugin.say(CHANNEL, "done <!channel> & <https://x.example|here>", thread=root.message)
    [reply] = standin.message(CHANNEL, root.message).replies
    assert reply.bot and not reply.blocks
    assert reply.text == "done &lt;!channel&gt; &amp; &lt;https://x.example|here&gt;"
    with pytest.raises(ChannelInputError) as err:
        await plugin.say("C0NOWHERE", "hello")
    assert str(err.value) == "slack 'team': chat.postMessage failed (channel_not_found)"


async def test_a_wrong_token_is_a_permanent_refusal(standin: SlackStandin) -> None:
    """invalid_auth is a configuration error: permanent."""
    config = {
        "bot_token": "bot",
        "signing_secret": "s",
        "api_url": standin.api_url,
        "default_recipient": CHANNEL,
    }
    channel = SlackChannel(
        name="team", config=config, secrets={"bot": b"xoxb-wrong", "s": b"s"}, clock=standin.clock
    )
    try:
        with pytest.raises(ChannelInputError, match=r"\(invalid_auth\)"):
            await channel.deliver(delivery(standin))
    finally:
        await channel.aclose()


async def test_a_retracted_question_loses_its_controls_and_says_how_it_ended(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """Retraction edits the message: same question, no buttons, the outcome line."""
    posted = await plugin.deliver(delivery(standin, "confirm"))
    assert standin.message(posted.chat, posted.message).has_controls()
    retraction = Retraction(
        interaction_id="ia_0123456789",
        question="Deploy the hotfix now?",
        outcome="answered",
        by="alice",
        via="inbox",
    )
    await plugin.retract(posted, retraction)
    shown = standin.message(posted.chat, posted.message)
    assert shown.edited
    assert not shown.has_controls()
    assert shown.lines() == ["Deploy the hotfix now?", "Answered by alice in the inbox."]


async def test_retracting_a_message_slack_does_not_know_is_permanent(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """chat.update of an unknown ts fails for good (message_not_found)."""
    from layby_contracts.channels import Posted

    with pytest.raises(ChannelInputError, match="message_not_found"):
        await plugin.retract(
            Posted(chat=CHANNEL, message="1.000001"),
            Retraction(interaction_id="i", question="q", outcome="expired"),
        )


async def test_what_a_person_does_reads_as_the_right_reply(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """Taps, yes/no, a menu pick and a threaded message, signed by the provider, parse into replies."""
    text = await plugin.deliver(delivery(standin, "text", suggested_replies=["Ship it", "Wait"]))
    confirm = await plugin.deliver(delivery(standin, "confirm"))
    menu = await plugin.deliver(delivery(standin, "select", options=[f"region-{n}" for n in range(40)]))

    tap = (await plugin.inbound(standin.build_tap(CHANNEL, text.message, "Wait").inbound())).replies
    assert [(r.kind, r.interaction_id, r.index, r.chat, r.message, r.sender, r.sender_name) for r in tap] == [
        ("tap", "ia_0123456789", 1, CHANNEL, text.message, PERSON, "alice")
    ]
    assert tap[0].event_id and (tap[0].context or {})["trigger_id"] == tap[0].event_id
    no = (await plugin.inbound(standin.build_tap(CHANNEL, confirm.message, "No").inbound())).replies
    assert [(r.kind, r.value, r.message) for r in no] == [("yes_no", False, confirm.message)]
    pick = (await plugin.inbound(standin.build_pick(CHANNEL, menu.message, "region-33").inbound())).replies
    assert [(r.kind, r.index) for r in pick] == [("tap", 33)]
    typed = (
        await plugin.inbound(standin.build_message(CHANNEL, "ship it", thread_ts=text.message).inbound())
    ).replies
    assert [(r.kind, r.value, r.message, r.sender) for r in typed] == [
        ("typed", "ship it", text.message, PERSON)
    ]
    assert typed[0].event_id is not None and typed[0].event_id.startswith("Ev")
    handshake = await plugin.inbound(standin.build_url_verification("ch-42").inbound())
    assert handshake.response is not None and handshake.response.body == b"ch-42"


async def open_form(plugin: SlackChannel, standin: SlackStandin) -> tuple[ChannelDelivery, InboundReply]:
    form = delivery(standin, "form", schema=FORM)
    posted = await plugin.deliver(form)
    (reply,) = (
        await plugin.inbound(standin.build_tap(CHANNEL, posted.message, "Open form").inbound())
    ).replies
    assert (reply.kind, reply.interaction_id) == ("open_form", "ia_0123456789")
    return form, reply


async def test_a_form_opens_as_a_modal_within_the_trigger_window(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """The Open form tap's trigger id opens the modal; the provider accepts the view."""
    form, reply = await open_form(plugin, standin)
    standin.clock.advance(2.5)
    await plugin.open_form(reply, form)
    opened = standin.view()
    assert [b.get("block_id") for b in opened.view["blocks"][1:]] == list(FORM["properties"])  # type: ignore[call-overload]
    assert opened.user == PERSON
    with pytest.raises(ChannelInputError, match="exchanged_trigger_id"):
        await plugin.open_form(reply, form)


async def test_a_form_cannot_open_after_the_trigger_expired(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """A trigger id older than 3 s is refused by Slack (expired_trigger_id)."""
    form, reply = await open_form(plugin, standin)
    standin.clock.advance(3)
    with pytest.raises(ChannelInputError, match=r"views.open failed \(expired_trigger_id\)"):
        await plugin.open_form(reply, form)
    assert standin.views == []


async def test_a_submitted_form_reads_as_typed_values(plugin: SlackChannel, standin: SlackStandin) -> None:
    """Menu values, integers, decimals and booleans come back typed; blank optional fields are absent."""
    form, reply = await open_form(plugin, standin)
    await plugin.open_form(reply, form)
    request = standin.build_submit(
        {"service": "web", "replicas": 3, "ratio": "0.25", "canary": False}
    ).inbound()
    (submitted,) = (await plugin.inbound(request)).replies
    assert submitted.kind == "submitted"
    assert submitted.value == {"service": "web", "replicas": 3, "ratio": 0.25, "canary": False}
    assert (submitted.interaction_id, submitted.chat, submitted.message, submitted.sender) == (
        "ia_0123456789", CHANNEL, reply.message, PERSON,
    )  # fmt: skip


# -- through a door: the stand-in POSTs, a minimal door answers with the plugin's response ------


@contextlib.asynccontextmanager
async def door(plugin: SlackChannel, outcome: Callable[[InboundReply], ReplyOutcome]) -> AsyncIterator[str]:
    """A stand-in for Layby's events door: verify and parse, decide, answer as the plugin says."""

    @post("/api/channels/team/events", status_code=200)
    async def events(request: Request[Any, Any, Any]) -> Response[bytes]:
        inbound = await plugin.inbound(InboundRequest(
            method="POST", url=str(request.url), headers=dict(request.headers), query={}, body=await request.body(),
        ))  # fmt: skip
        for reply in inbound.replies:
            answer = await plugin.respond(reply, outcome(reply))
            if answer is not None:
                return Response(answer.body, status_code=answer.status, media_type=answer.content_type)
        response = inbound.response
        if response is not None:
            return Response(response.body, status_code=response.status, media_type=response.content_type)
        return Response(b"", status_code=200)

    async with serve(Litestar([events]), "the test door") as url:
        yield f"{url}/api/channels/team/events"


async def test_a_rejected_submission_keeps_the_modal_open_with_the_reason(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """The door's refusal is shown under the field it names; a corrected submission closes the modal."""
    form, reply = await open_form(plugin, standin)
    await plugin.open_form(reply, form)

    def decide(reply: InboundReply) -> ReplyOutcome:
        if reply.value.get("replicas", 0) < 1:
            return ReplyOutcome(status="rejected", reason="replicas must be at least 1", notice="Try again")
        return ReplyOutcome(status="answered")

    async with door(plugin, decide) as url:
        refused = await standin.submit({"service": "api", "replicas": 0}, target=url)
        assert refused.status_code == 200
        assert standin.view().errors == {"replicas": "replicas must be at least 1"}
        assert not standin.view().closed
        accepted = await standin.submit({"service": "api", "replicas": 2}, target=url)
        assert (accepted.status_code, accepted.content) == (200, b"")
        assert standin.view().closed
        assert (await standin.verify_url("ch-7", target=url)).text == "ch-7"


async def test_follow_ups_reach_the_thread_and_never_raise(
    plugin: SlackChannel, standin: SlackStandin
) -> None:
    """A refused typed reply gets the notice in the question's thread; a late one is told it closed."""
    posted = await plugin.deliver(delivery(standin, "select", options=["a", "b"]))
    request = standin.build_message(CHANNEL, "c", thread_ts=posted.message).inbound()
    (typed,) = (await plugin.inbound(request)).replies
    await plugin.follow_up(
        typed, ReplyOutcome(status="rejected", reason="not an option", notice="Reply a or b.")
    )
    await plugin.follow_up(typed, ReplyOutcome(status="late"))
    await plugin.follow_up(typed, ReplyOutcome(status="answered"))
    root = standin.message(CHANNEL, posted.message)
    assert [(m.text, m.bot) for m in root.replies] == [
        ("c", False),
        ("Reply a or b.", True),
        (NO_LONGER_OPEN, True),
    ]
    standin.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=1)
    await plugin.follow_up(typed, ReplyOutcome(status="late"))  # swallowed and logged


async def test_the_stand_in_refuses_what_slack_refuses(standin: SlackStandin) -> None:
    """The checks the stand-in adds to the SDK's models hold (so "accepted" above means something)."""
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.async_client import AsyncWebClient

    web = AsyncWebClient(token=BOT_TOKEN, base_url=standin.api_url, retry_handlers=[])
    option = {"text": {"type": "plain_text", "text": "x" * 76}, "value": "v"}
    bad_blocks = [
        [{"type": "actions", "elements": [{"type": "static_select", "action_id": "a", "options": [option]}]}],
        [{"type": "actions", "elements": []}],
        [{"type": "section", "text": {"type": "plain_text", "text": ""}}],
        [{"type": "section", "text": {"type": "plain_text", "text": "s"}}] * 51,
        [{"type": "mystery"}],
    ]
    for blocks in bad_blocks:
        with pytest.raises(SlackApiError) as err:
            await web.chat_postMessage(channel=CHANNEL, text="t", blocks=blocks)
        assert err.value.response["error"] == "invalid_blocks"
    with pytest.raises(SlackApiError) as err:
        await web.views_open(
            trigger_id="never-issued",
            view={"type": "modal", "title": {"type": "plain_text", "text": "t"}, "blocks": []},
        )
    assert err.value.response["error"] == "invalid_trigger_id"
