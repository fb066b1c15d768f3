"""The Telegram channel against the Bot API stand-in over loopback: every format passes the
provider's rules, failures say whether to retry, retraction edits the message, and what a person
does comes back as the replies the door expects (docs/channels.md#telegram)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from litestar import Litestar, Request, Response, post

from layby_contracts.channels import (
    ChannelDelivery,
    ChannelDeliveryError,
    ChannelInputError,
    InboundMalformed,
    InboundRefused,
    InboundReply,
    InboundRequest,
    Posted,
    ReplyOutcome,
    Retraction,
)
from layby_contracts.events import MediaItem
from layby_server.chat.telegram import SECRET_HEADER, TelegramChannel
from tests.helpers import eventually
from tests.samples import channel_delivery as ask
from tests.standins.serving import serve
from tests.standins.telegram import TOKEN, TelegramStandin, serve_telegram_standin

pytestmark = pytest.mark.timeout(60)

HOOK = "hook_Secret-1"
PERSON = 4242
GROUP = -1001234567890


@pytest.fixture
async def standin() -> AsyncIterator[TelegramStandin]:
    async with serve_telegram_standin() as running:
        yield running


@pytest.fixture
async def tg(standin: TelegramStandin) -> AsyncIterator[TelegramChannel]:
    standin.add_person(PERSON, "Ada", "ada")
    standin.add_group(GROUP)
    plugin = TelegramChannel(
        name="tg",
        config={
            "bot_token": "bot",
            "secret_token": "hook",
            "api_url": standin.api_url,
            "file_url": standin.file_url,
            "default_recipient": str(PERSON),
            "timeout": 5,
        },
        secrets={"bot": TOKEN.encode(), "hook": HOOK.encode()},
    )
    yield plugin
    await plugin.aclose()


def as_request(update: dict[str, Any], secret: str | None = HOOK) -> InboundRequest:
    import json

    headers = {"content-type": "application/json"}
    if secret is not None:
        headers[SECRET_HEADER] = secret
    return InboundRequest(
        method="POST",
        url="http://door/api/channels/tg/events",
        headers=headers,
        query={},
        body=json.dumps(update).encode(),
    )


# -- outbound -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delivery", "recipient", "buttons"),
    [
        (ask("text"), PERSON, 0),
        (ask("text", suggested_replies=["ship it", "wait"]), PERSON, 2),
        (ask("confirm"), PERSON, 2),
        (ask("select", options=["blue", "green", "red"]), PERSON, 3),
        (ask("select", options=["選" * 22, "択" * 22]), PERSON, 2),
        (ask("select", options=[f"option {n}" for n in range(100)]), PERSON, 100),
        (ask("select", options=[f"option {n}" for n in range(101)]), PERSON, 0),
        (ask("form", schema={"type": "object"}), PERSON, 1),
        (ask("form", schema={"type": "object"}), GROUP, 1),
        (ask("external"), GROUP, 1),
        (ask("text", question="q" * 5000), PERSON, 0),
    ],
    ids=[
        "text",
        "suggested",
        "confirm",
        "select",
        "wide-options",
        "100-options",
        "101-options",
        "form-private",
        "form-group",
        "external",
        "long-question",
    ],
)
async def test_every_format_passes_the_bot_api_rules(
    tg: TelegramChannel,
    standin: TelegramStandin,
    delivery: ChannelDelivery,
    recipient: int,
    buttons: int,
) -> None:
    """Each format is sent as one message the Bot API accepts, and the Posted names it."""
    posted = await tg.deliver(msgspec_replace(delivery, recipient=str(recipient)))
    assert standin.refused() == []
    shown = standin.message(posted.chat, posted.message)
    assert posted == Posted(chat=str(recipient), message=str(shown.message_id))
    assert len(shown.buttons()) == buttons
    assert shown.text is not None
    assert len(shown.text) <= 4096


def msgspec_replace(delivery: ChannelDelivery, **fields: Any) -> ChannelDelivery:
    import msgspec

    return msgspec.structs.replace(delivery, **fields)


async def test_media_are_sent_before_the_question(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """Images, documents, videos and audio go first as files (captions within 1024); links are
    lines of the question, which is the message Posted names."""
    media = [
        MediaItem(kind="image", url="https://files.example/chart.png", caption="c" * 2000),
        MediaItem(kind="document", url="https://files.example/plan.pdf"),
        MediaItem(kind="video", url="https://files.example/demo.mp4"),
        MediaItem(kind="audio", url="https://files.example/call.mp3", caption="the call"),
        MediaItem(kind="link", url="https://runbook.example", caption="Runbook"),
    ]
    posted = await tg.deliver(ask("confirm", media=media))
    seen = standin.messages(PERSON)
    assert [m.kind for m in seen] == ["photo", "document", "video", "audio", "text"]
    assert [m.media for m in seen[:4]] == [item.url for item in media[:4]]
    assert seen[0].caption == "c" * 1023 + "…"
    assert seen[3].caption == "the call"
    assert seen[4].text == "Deploy now?\n\nRunbook: https://runbook.example"
    assert posted.message == str(seen[4].message_id)


async def test_a_file_telegram_cannot_fetch_is_shown_as_a_link(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """The question still goes out when a medium is refused: the file becomes a line of its text."""
    standin.fail_next(
        "sendPhoto", code=400, description="Bad Request: wrong file identifier/HTTP URL specified"
    )
    await tg.deliver(
        ask(media=[MediaItem(kind="image", url="https://files.example/big.png", caption="Chart")])
    )
    [question] = standin.messages(PERSON)
    assert question.text == "Deploy now?\n\nChart: https://files.example/big.png"


async def test_flood_control_is_retryable_after_telegrams_pause(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """A 429 with retry_after is a retryable failure carrying the pause; nothing is sent twice by
    the client itself."""
    standin.fail_next("sendMessage", retry_after=7)
    with pytest.raises(ChannelDeliveryError) as err:
        await tg.deliver(ask())
    assert err.value.retryable is True
    assert err.value.retry_after == 7
    assert len([c for c in standin.calls if c.method == "sendMessage"]) == 1
    assert standin.messages(PERSON) == []


async def test_a_server_error_is_retryable(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """A 5xx from the Bot API may pass: another attempt may succeed."""
    standin.fail_next("sendMessage", code=502, description="Bad Gateway")
    with pytest.raises(ChannelDeliveryError) as err:
        await tg.deliver(ask())
    assert err.value.retryable is True
    assert not isinstance(err.value, ChannelInputError)


async def test_an_unknown_chat_is_a_permanent_refusal_that_never_shows_the_token(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """ "chat not found" and a blocked bot are final, and the error names Telegram's reason only."""
    with pytest.raises(ChannelInputError) as err:
        await tg.deliver(ask(recipient="999"))
    assert str(err.value) == "telegram 'tg': Chat not found"
    standin.fail_next("sendMessage", code=403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(ChannelInputError) as blocked:
        await tg.deliver(ask())
    assert str(blocked.value) == "telegram 'tg': Forbidden: bot was blocked by the user"
    for error in (err.value, blocked.value):
        assert TOKEN not in str(error)
        assert TOKEN.split(":")[1] not in str(error)


async def test_say_sends_a_conversation_reply_as_a_plain_message(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """A conversation's reply is a plain message without buttons, a reply to the message it
    names; an unknown chat is a permanent refusal (docs/doors/hooks.md#conversations-on-a-chat-channel)."""
    posted = await tg.deliver(ask())
    await tg.say(str(PERSON), "hello back", thread=posted.message)
    await tg.say(str(PERSON), "x" * 5000)
    *_, first, second = standin.messages(PERSON)
    assert (first.text, first.keyboard, first.reply_to) == ("hello back", None, int(posted.message))
    assert second.text is not None and len(second.text) == 4096 and second.text.endswith("…")
    with pytest.raises(ChannelInputError) as err:
        await tg.say("999", "hello")
    assert str(err.value) == "telegram 'tg': Chat not found"


async def test_retraction_rewrites_the_question_and_drops_its_buttons(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """The message keeps its question, gains how it ended, and loses its keyboard; retracting
    twice is harmless."""
    delivery = ask("select", options=["blue", "green"])
    posted = await tg.deliver(delivery)
    retraction = Retraction(
        interaction_id=delivery.interaction_id,
        question=delivery.question,
        outcome="answered",
        by="bob",
        via="slack",
    )
    await tg.retract(posted, retraction)
    await tg.retract(posted, retraction)
    shown = standin.message(posted.chat, posted.message)
    assert shown.text == "Deploy now?\n\nAnswered by bob via slack."
    assert shown.keyboard is None
    assert shown.edits == 1


async def test_retracting_a_message_that_is_gone_is_a_final_error(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """An edit of a message Telegram no longer has is refused for good, not retried."""
    retraction = Retraction(interaction_id="x", question="q", outcome="expired")
    with pytest.raises(ChannelInputError) as err:
        await tg.retract(Posted(chat=str(PERSON), message="77"), retraction)
    assert str(err.value) == "telegram 'tg': Message to edit not found"


async def test_set_webhook_registers_the_url_the_secret_token_and_the_updates_read(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """setWebhook carries the secret token every update must bear, and only messages and taps."""
    await tg.set_webhook("https://layby.example/api/channels/tg/events")
    assert standin.webhook is not None
    assert standin.webhook.url == "https://layby.example/api/channels/tg/events"
    assert standin.webhook.secret_token == HOOK
    assert standin.webhook.allowed_updates == ["message", "callback_query"]


# -- inbound ------------------------------------------------------------------------------------


async def test_a_tap_on_an_option_reads_as_that_options_index(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """The tapped button's data gives the question and the option's index; the message is the
    question's."""
    delivery = ask("select", options=["blue", "green"])
    posted = await tg.deliver(delivery)
    update = standin.tap_update(posted.chat, posted.message, "green")
    inbound = await tg.inbound(as_request(update))
    assert inbound.replies == [
        InboundReply(
            kind="tap",
            sender=str(PERSON),
            sender_name="ada",
            chat=posted.chat,
            message=posted.message,
            interaction_id=delivery.interaction_id,
            index=1,
            event_id=str(update["update_id"]),
            context={"callback_query_id": standin.taps[-1].callback_query_id},
        )
    ]


async def test_a_yes_or_no_tap_reads_as_a_boolean(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """Yes is True and No is False."""
    delivery = ask("confirm")
    posted = await tg.deliver(delivery)
    for label, value in (("Yes", True), ("No", False)):
        [reply] = (
            await tg.inbound(as_request(standin.tap_update(posted.chat, posted.message, label)))
        ).replies
        assert (reply.kind, reply.interaction_id, reply.value) == ("yes_no", delivery.interaction_id, value)


async def test_a_typed_reply_to_the_question_names_the_question(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """Replying to the question's message correlates by that message; plain text has none."""
    posted = await tg.deliver(ask())
    update = standin.type_update(PERSON, "in ten minutes", reply_to=posted.message)
    [reply] = (await tg.inbound(as_request(update))).replies
    person_message = standin.messages(PERSON)[-1].message_id
    assert reply == InboundReply(
        kind="typed",
        sender=str(PERSON),
        sender_name="ada",
        chat=str(PERSON),
        message=posted.message,
        value="in ten minutes",
        event_id=str(update["update_id"]),
        context={"message_id": person_message},
        direct=True,
    )
    [plain] = (await tg.inbound(as_request(standin.type_update(PERSON, "hello")))).replies
    assert (plain.kind, plain.message, plain.value, plain.direct) == ("typed", None, "hello", True)
    assert int(plain.event_id or 0) > int(reply.event_id or 0)


async def test_a_forged_tap_carries_no_question(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """Data that is no tap id (another bot's, a forgery) reads as a tap of nothing."""
    posted = await tg.deliver(ask("confirm"))
    update = standin.tap_update(posted.chat, posted.message, 0, data="drop table")
    [reply] = (await tg.inbound(as_request(update))).replies
    assert (reply.kind, reply.interaction_id, reply.index, reply.value) == ("tap", None, None, None)
    assert reply.context == {"callback_query_id": standin.taps[-1].callback_query_id}


async def test_follow_up_answers_every_tap(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """Each tap's callback query is answered with what became of it, so no client keeps spinning."""
    posted = await tg.deliver(ask("select", options=["blue", "green"]))
    outcomes = [
        (ReplyOutcome(status="answered"), "Answered."),
        (ReplyOutcome(status="already"), "This question was already answered."),
        (ReplyOutcome(status="rejected", reason="pick one of the options"), "pick one of the options"),
        (ReplyOutcome(status="late"), "This question is no longer open."),
        (ReplyOutcome(status="unmatched"), "This question is no longer open."),
    ]
    for outcome, _ in outcomes:
        [reply] = (await tg.inbound(as_request(standin.tap_update(posted.chat, posted.message, 0)))).replies
        await tg.follow_up(reply, outcome)
    assert standin.unanswered_taps() == []
    assert [tap.answer for tap in standin.taps] == [text for _, text in outcomes]


async def test_a_rejected_typed_reply_gets_the_notice_as_a_reply(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """The notice answers the person's own message; a late reply hears the question is gone."""
    posted = await tg.deliver(ask("select", options=["blue", "green"]))
    [reply] = (
        await tg.inbound(as_request(standin.type_update(PERSON, "purple", reply_to=posted.message)))
    ).replies
    await tg.follow_up(
        reply, ReplyOutcome(status="rejected", reason="not an option", notice="Reply blue or green.")
    )
    notice = standin.messages(PERSON)[-1]
    assert (notice.from_bot, notice.text, notice.reply_to) == (
        True,
        "Reply blue or green.",
        reply.context["message_id"],
    )  # type: ignore[index]
    [late] = (
        await tg.inbound(as_request(standin.type_update(PERSON, "blue", reply_to=posted.message)))
    ).replies
    await tg.follow_up(late, ReplyOutcome(status="late"))
    assert standin.messages(PERSON)[-1].text == "This question is no longer open."
    await tg.follow_up(late, ReplyOutcome(status="bridged"))
    await tg.follow_up(late, ReplyOutcome(status="rejected", reason="quiet"))  # no notice under bridge
    assert standin.messages(PERSON)[-1].text == "This question is no longer open."
    assert standin.refused() == []


async def test_a_follow_up_that_fails_is_swallowed(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """After the acknowledgement nothing can be undone: a provider error is logged, not raised."""
    posted = await tg.deliver(ask("confirm"))
    [reply] = (await tg.inbound(as_request(standin.tap_update(posted.chat, posted.message, "Yes")))).replies
    standin.fail_next("answerCallbackQuery", code=500)
    await tg.follow_up(reply, ReplyOutcome(status="answered"))
    assert standin.unanswered_taps() != []


# -- over HTTP, through a minimal door ----------------------------------------------------------


@contextlib.asynccontextmanager
async def mini_door(
    plugin: TelegramChannel, outcome: Callable[[InboundReply], ReplyOutcome]
) -> AsyncIterator[tuple[str, list[InboundReply]]]:
    """``POST /api/channels/tg/events`` as the door serves it: verify and parse, decide, answer,
    follow up. Yields its URL and the replies it took."""
    import asyncio

    taken: list[InboundReply] = []

    @post("/api/channels/tg/events", status_code=200)
    async def events(request: Request[Any, Any, Any]) -> Response[bytes]:
        inbound_request = InboundRequest(
            method="POST",
            url=str(request.url),
            headers={k.lower(): v for k, v in request.headers.items()},
            query=dict(request.query_params),
            body=await request.body(),
        )
        try:
            inbound = await plugin.inbound(inbound_request)
        except InboundRefused:
            return Response(b"", status_code=401)
        except InboundMalformed as exc:
            return Response(str(exc).encode(), status_code=400)
        for reply in inbound.replies:
            taken.append(reply)
            result = outcome(reply)
            await plugin.respond(reply, result)
            asyncio.get_running_loop().create_task(plugin.follow_up(reply, result))
        return Response(b"")

    async with serve(Litestar([events]), "the door") as url:
        yield f"{url}/api/channels/tg/events", taken


async def test_a_person_answers_through_the_webhook_and_the_tap_is_acknowledged(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """The stand-in posts the Update with the secret token from setWebhook; the door takes the
    reply and the plugin answers the tap after the acknowledgement."""
    delivery = ask("select", options=["blue", "green"])
    async with mini_door(tg, lambda reply: ReplyOutcome(status="answered", answer="blue")) as (url, taken):
        await tg.set_webhook(url)
        posted = await tg.deliver(delivery)
        resp = await standin.tap(posted.chat, posted.message, "blue")
        assert resp.status_code == 200
        assert [(r.kind, r.interaction_id, r.index) for r in taken] == [("tap", delivery.interaction_id, 0)]
        await eventually(standin.unanswered_taps, "the tap to be answered", until=lambda left: left == [])
        assert standin.taps[0].answer == "Answered."
        assert (await standin.type(PERSON, "hi", secret="wrong")).status_code == 401
        assert (await standin.type(PERSON, "hi", secret="")).status_code == 401
        assert len(taken) == 1


async def test_a_bot_that_cannot_start_is_retried_afresh(
    tg: TelegramChannel, standin: TelegramStandin
) -> None:
    """getMe failing with a 5xx is retryable, and the next attempt starts the client again."""
    standin.fail_next("getMe", code=503, description="Service Unavailable")
    with pytest.raises(ChannelDeliveryError) as err:
        await tg.deliver(ask())
    assert err.value.retryable is True
    posted = await tg.deliver(ask())
    assert [c.method for c in standin.calls] == ["getMe", "getMe", "sendMessage"]
    assert standin.message(posted.chat, posted.message).text == "Deploy now?"


def _button(n: int, **action: Any) -> dict[str, Any]:
    return {"text": f"b{n}", **(action or {"callback_data": f"d{n}"})}


@pytest.mark.parametrize(
    ("method", "params", "description"),
    [
        ("sendMessage", {"chat_id": PERSON}, "Bad Request: parameter 'text' is required"),
        (
            "sendMessage",
            {"chat_id": PERSON, "text": "x", "colour": "red"},
            "Bad Request: unknown parameter 'colour'",
        ),
        ("sendMessage", {"chat_id": PERSON, "text": " "}, "Bad Request: message text is empty"),
        ("sendMessage", {"chat_id": PERSON, "text": "x" * 4097}, "Bad Request: message is too long"),
        ("sendMessage", {"chat_id": 999, "text": "x"}, "Bad Request: chat not found"),
        (
            "sendPhoto",
            {"chat_id": PERSON, "photo": "https://f/p.png", "caption": "c" * 1025},
            "Bad Request: message caption is too long",
        ),
        (
            "sendMessage",
            {
                "chat_id": PERSON,
                "text": "x",
                "reply_markup": {"inline_keyboard": [[_button(0, callback_data="選" * 22)]]},
            },
            "Bad Request: BUTTON_DATA_INVALID",
        ),
        (
            "sendMessage",
            {
                "chat_id": PERSON,
                "text": "x",
                "reply_markup": {"inline_keyboard": [[_button(n)] for n in range(101)]},
            },
            "Bad Request: BUTTONS_TOO_MUCH",
        ),
        (
            "sendMessage",
            {
                "chat_id": PERSON,
                "text": "x",
                "reply_markup": {"inline_keyboard": [[_button(n) for n in range(9)]]},
            },
            "Bad Request: BUTTONS_TOO_MUCH",
        ),
        (
            "sendMessage",
            {
                "chat_id": GROUP,
                "text": "x",
                "reply_markup": {"inline_keyboard": [[_button(0, web_app={"url": "https://f/form"})]]},
            },
            "Bad Request: BUTTON_TYPE_INVALID",
        ),
        (
            "sendMessage",
            {
                "chat_id": PERSON,
                "text": "x",
                "reply_markup": {"inline_keyboard": [[_button(0, web_app={"url": "http://f/form"})]]},
            },
            "Bad Request: inline keyboard button Web App URL 'http://f/form' is invalid: Only HTTPS links are allowed",
        ),
        (
            "editMessageText",
            {"chat_id": PERSON, "message_id": 5, "text": "x"},
            "Bad Request: message to edit not found",
        ),
        (
            "answerCallbackQuery",
            {"callback_query_id": "nope"},
            "Bad Request: query is too old and response timeout expired or query ID is invalid",
        ),
        (
            "setWebhook",
            {"url": "https://layby.example/hook", "secret_token": "has space"},
            "Bad Request: secret token contains unallowed characters",
        ),
        (
            "setWebhook",
            {"url": "http://layby.example/hook"},
            "Bad Request: bad webhook: An HTTPS URL must be provided for webhook",
        ),
    ],
)
async def test_the_standin_refuses_what_telegram_refuses(
    standin: TelegramStandin, method: str, params: dict[str, Any], description: str
) -> None:
    """The stand-in is no rubber stamp: each Bot API rule it checks refuses a call that breaks it."""
    import httpx

    standin.add_person(PERSON)
    standin.add_group(GROUP)
    async with httpx.AsyncClient(base_url=standin.url, trust_env=False) as http:
        resp = await http.post(f"/bot{TOKEN}/{method}", json=params)
        assert resp.json() == {"ok": False, "error_code": 400, "description": description}
        assert (await http.post("/bot1:wrong/getMe")).status_code == 401
        assert (await http.post(f"/bot{TOKEN}/sendCarrierPigeon")).status_code == 404
    assert standin.messages(PERSON) == []


async def test_the_standin_shows_a_chat_over_http(tg: TelegramChannel, standin: TelegramStandin) -> None:
    """``GET /_test/messages?chat=<id>`` is what the person sees, for a test in another process."""
    import httpx

    posted = await tg.deliver(ask("confirm"))
    async with httpx.AsyncClient(base_url=standin.url, trust_env=False) as http:
        [shown] = (await http.get("/_test/messages", params={"chat": posted.chat})).json()
    assert (shown["message_id"], shown["text"], len(shown["keyboard"][0])) == (
        int(posted.message),
        "Deploy now?",
        2,
    )
