"""The WhatsApp channel's own rules, without a network: settings, the webhook's signature and
handshake, how each format is drawn within WhatsApp's caps (at and one past each), what a reply
may say, and how Graph's errors map (docs/channels.md#whatsapp)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from layby_contracts import channels
from layby_contracts.events import MediaItem
from layby_domain.clock import ManualClock
from layby_server.channels import load_channels
from layby_server.chat.common import PICK_ONE, YES_OR_NO
from layby_server.chat.whatsapp import WhatsAppChannel, graph, rendering, webhook
from layby_server.chat.whatsapp.graph import Sent
from tests.samples import channel_delivery

pytestmark = pytest.mark.unit

SECRETS = {"token": b"EAAG-token", "app": b"app-secret", "verify": b"verify-me"}
ID = "0b6c2f0e-6a43-4c1e-9d7e-1f2a3b4c5d6e"
NUMBER = "106540352242922"
CONFIG: dict[str, Any] = {
    "access_token": "token",
    "app_secret": "app",
    "verify_token": "verify",
    "phone_number_id": NUMBER,
    "default_recipient": "+49 151 2345678",
    "flow_id": "1234567890",
}


def channel(**config: Any) -> WhatsAppChannel:
    return WhatsAppChannel(name="wa", config=CONFIG | config, secrets=SECRETS)


def delivery(answer_format: str = "text", **fields: Any) -> channels.ChannelDelivery:
    return channel_delivery(answer_format, **({"interaction_id": ID} | fields))


def options(n: int, width: int = 5) -> list[str]:
    return [f"{i:0{width}d}" for i in range(n)]


class Recorder:
    """Stands in for the Graph client: records each send, answers with increasing wamids."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any], str | None]] = []

    async def send(self, to: str, message: dict[str, Any], *, reply_to: str | None = None) -> Sent:
        self.sent.append((to, message, reply_to))
        return Sent(wamid=f"wamid.{len(self.sent)}", wa_id=to)


def recorded(ch: WhatsAppChannel) -> Recorder:
    rec = Recorder()
    ch._graph = rec  # type: ignore[assignment]
    return rec


# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"bogus": 1}, "unknown whatsapp option 'bogus'"),
        ({"access_token": "missing"}, "access_token 'missing' is not in LAYBY_WEBHOOK_SECRETS"),
        ({"app_secret": None}, "needs app_secret"),
        ({"verify_token": ""}, "needs verify_token"),
        ({"phone_number_id": "+1 555"}, "phone_number_id"),
        ({"api_version": "23"}, "api_version"),
        ({"api_url": "ftp://x"}, "api_url"),
        ({"default_recipient": "ada"}, "default_recipient"),
        ({"timeout": 0}, "timeout"),
        ({"flow_id": "abc"}, "flow_id"),
        ({"flow_screen": "form"}, "flow_screen"),
        ({"flow_mode": "live"}, "flow_mode"),
    ],
)
def test_a_bad_whatsapp_setting_is_refused_by_name_without_any_secret(
    change: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=named) as caught:
        channel(**change)
    assert not any(value.decode() in str(caught.value) for value in SECRETS.values())


def test_the_registry_builds_a_whatsapp_channel_with_its_capabilities() -> None:
    loaded = load_channels(json.dumps({"wa": {"plugin": "whatsapp", **CONFIG}}), SECRETS)
    plugin = loaded["wa"]
    assert isinstance(plugin, WhatsAppChannel)
    assert plugin.supports_form_delivery and plugin.supports_media_notifications
    assert plugin.supports_template_notifications and plugin.supports_form_notifications
    assert plugin.default_recipient == "491512345678"
    assert not channel(flow_id=None).supports_form_notifications


# -- the signature and the handshake ----------------------------------------------------------


def test_the_signature_matches_an_independently_published_vector() -> None:
    # HMAC-SHA256(key "secret", "test"), as published for another WhatsApp webhook library.
    expected = "sha256=0329a06b62cd16b33eb6792be8c60b158d89a2ee3a876fce9a881ebb488c0914"
    assert webhook.signature(b"secret", b"test") == expected
    webhook.verify(b"secret", {"x-hub-signature-256": expected}, b"test")


def post(body: bytes, headers: dict[str, str]) -> channels.InboundRequest:
    return channels.InboundRequest(
        method="POST", url="https://l.example/api/channels/wa/events", headers=headers, query={}, body=body
    )


def signed(body: bytes, secret: bytes = b"app-secret") -> dict[str, str]:
    return {"x-hub-signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"x-hub-signature-256": ""},
        {"x-hub-signature-256": "sha1=" + "0" * 64},
        {"x-hub-signature-256": "sha256=xyz"},
        signed(b'{"entry": []}', b"other secret"),
        signed(b'{"entry": [] }'),
    ],
    ids=["missing", "empty", "sha1", "not-hex", "wrong-secret", "other-body"],
)
async def test_a_notification_without_a_signature_over_its_exact_bytes_is_refused(
    headers: dict[str, str],
) -> None:
    with pytest.raises(channels.InboundRefused):
        await channel().inbound(post(b'{"entry": []}', headers))


async def test_the_signature_covers_the_ascii_escaped_bytes_meta_sends() -> None:
    body = json.dumps({"entry": [], "note": "Grüße"}, ensure_ascii=True).encode()
    assert (await channel().inbound(post(body, signed(body)))).replies == []
    again = json.dumps({"entry": [], "note": "Grüße"}, ensure_ascii=False).encode()
    with pytest.raises(channels.InboundRefused):
        await channel().inbound(post(again, signed(body)))


async def test_an_unreadable_signed_body_is_malformed() -> None:
    with pytest.raises(channels.InboundMalformed, match="not JSON"):
        await channel().inbound(post(b"{nope", signed(b"{nope")))


def handshake(query: dict[str, str]) -> channels.InboundRequest:
    return channels.InboundRequest(
        method="GET", url="https://l.example/api/channels/wa/events", headers={}, query=query, body=b""
    )


async def test_the_handshake_answers_the_challenge_only_for_the_verify_token() -> None:
    good = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "1158201444"}
    answered = (await channel().inbound(handshake(good))).response
    assert answered is not None
    assert (answered.status, answered.body, answered.content_type) == (200, b"1158201444", "text/plain")
    for bad in ({**good, "hub.verify_token": "verify-mE"}, {**good, "hub.mode": "unsubscribe"}, {}):
        refused = (await channel().inbound(handshake(bad))).response
        assert refused is not None and refused.status == 403 and b"1158201444" not in refused.body
    with pytest.raises(channels.InboundMalformed, match=r"hub\.challenge"):
        await channel().inbound(handshake({**good, "hub.challenge": "<script>"}))


def test_the_verify_token_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []

    def compare(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return a == b

    monkeypatch.setattr(webhook.hmac, "compare_digest", compare)
    webhook.handshake(b"verify-me", {"hub.mode": "subscribe", "hub.verify_token": "x", "hub.challenge": "1"})
    assert seen == [(b"x", b"verify-me")]


# -- rendering: each format at and one past each cap ------------------------------------------


def test_a_select_of_three_short_unique_options_is_reply_buttons_carrying_tap_ids() -> None:
    message = rendering.question_message(delivery("select", options=["a" * 20, "b", "c"]))
    buttons = message["interactive"]["action"]["buttons"]
    assert message["interactive"]["type"] == "button"
    assert [b["reply"] for b in buttons] == [
        {"id": f"{ID}:{i}", "title": t} for i, t in enumerate(["a" * 20, "b", "c"])
    ]


@pytest.mark.parametrize("choices", [options(4), ["a" * 21, "b"]], ids=["fourth-option", "title-21"])
def test_a_select_past_the_button_caps_is_a_list(choices: list[str]) -> None:
    message = rendering.question_message(delivery("select", options=choices))
    assert message["interactive"]["type"] == "list"
    rows = message["interactive"]["action"]["sections"][0]["rows"]
    assert [r["title"] for r in rows] == choices and rows[1]["id"] == f"{ID}:1"


def test_options_whose_titles_repeat_are_numbered_text() -> None:
    message = rendering.question_message(delivery("select", options=["same", "same", "x"]))
    assert message["type"] == "text" and message["text"]["body"].endswith(PICK_ONE)


def test_a_list_holds_ten_rows_of_24_characters() -> None:
    at = [*options(9), "x" * 24]
    assert rendering.question_message(delivery("select", options=at))["interactive"]["type"] == "list"


@pytest.mark.parametrize(
    "choices", [options(11), [*options(3), "x" * 25]], ids=["eleventh-row", "row-title-25"]
)
def test_a_select_past_the_list_caps_is_the_numbered_text_prompt(choices: list[str]) -> None:
    message = rendering.question_message(delivery("select", options=choices))
    body = message["text"]["body"]
    assert message["type"] == "text" and body.endswith(PICK_ONE)
    assert f"1. {choices[0]}" in body and f"{len(choices)}. {choices[-1]}" in body


def test_an_interactive_body_holds_1024_characters_and_beyond_it_the_prompt_is_text() -> None:
    at = rendering.question_message(delivery("select", question="q" * 1024, options=["a", "b"]))
    assert at["interactive"]["body"]["text"] == "q" * 1024
    past = rendering.question_message(delivery("select", question="q" * 1025, options=["a", "b"]))
    assert past["type"] == "text" and past["text"]["body"].endswith(PICK_ONE)
    confirm = rendering.question_message(delivery("confirm", question="q" * 1025))
    assert confirm["type"] == "text" and confirm["text"]["body"].endswith(YES_OR_NO)


def test_a_confirm_is_a_yes_and_a_no_button() -> None:
    message = rendering.question_message(delivery("confirm"))
    assert [b["reply"] for b in message["interactive"]["action"]["buttons"]] == [
        {"id": f"{ID}:y", "title": "Yes"},
        {"id": f"{ID}:n", "title": "No"},
    ]


def test_suggested_replies_are_buttons_and_free_text_stays_open() -> None:
    message = rendering.question_message(delivery(suggested_replies=["v1", "v2"]))
    assert [b["reply"]["title"] for b in message["interactive"]["action"]["buttons"]] == ["v1", "v2"]
    assert rendering.question_message(delivery())["text"] == {"body": "Deploy now?", "preview_url": False}


def test_a_form_is_a_flow_whose_token_names_the_question_and_its_resends() -> None:
    schema = {
        "type": "object",
        "properties": {"seats": {"type": "integer", "title": "Seats"}},
        "required": ["seats"],
    }
    message = rendering.question_message(
        delivery("form", schema=schema, data={"seats": 2}), flow=("99", "FORM", "published")
    )
    parameters = message["interactive"]["action"]["parameters"]
    assert message["interactive"]["type"] == "flow"
    assert parameters["flow_token"] == f"{ID}:form:0" and parameters["flow_id"] == "99"
    assert parameters["flow_action_payload"] == {
        "screen": "FORM",
        "data": {
            "question": "Deploy now?",
            "fields": [{"name": "seats", "label": "Seats", "kind": "integer", "required": True}],
            "values": {"seats": 2},
        },
    }
    assert rendering.parse_flow_token(parameters["flow_token"]) == (ID, 0)
    assert rendering.parse_flow_token("notification:n-1") == (None, "n-1")
    for forged in ("unused", f"{ID}:0", f"{ID}:form:x", ":form:1", 5):
        assert rendering.parse_flow_token(forged) is None


def test_without_a_flow_a_form_and_an_external_question_are_link_buttons() -> None:
    form = rendering.question_message(delivery("form", schema={"type": "object"}))
    assert (
        form["interactive"]["action"]["parameters"]["url"]
        == "https://layby.example/api/interactions/callback/tkt"
    )
    external = rendering.question_message(delivery("external"))
    assert external["interactive"]["type"] == "cta_url"


def test_link_media_are_lines_and_files_are_their_own_messages() -> None:
    media = [
        MediaItem(kind="image", url="https://x/a.png", caption="c" * 1100),
        MediaItem(kind="audio", url="https://x/a.ogg", caption="ignored"),
        MediaItem(kind="link", url="https://x/doc", caption="Runbook"),
    ]
    assert rendering.media_message(media[0])["image"]["caption"] == "c" * 1023 + "…"
    assert rendering.media_message(media[1]) == {"type": "audio", "audio": {"link": "https://x/a.ogg"}}
    document = MediaItem(kind="document", url="https://x/r", filename="report.pdf")
    assert rendering.media_message(document)["document"] == {"link": "https://x/r", "filename": "report.pdf"}
    text = rendering.question_message(delivery(media=media))["text"]["body"]
    assert text == "Deploy now?\n\nRunbook: https://x/doc"


# -- reading replies ---------------------------------------------------------------------------


def notification(message: dict[str, Any], number: str = NUMBER) -> bytes:
    value = {
        "messaging_product": "whatsapp",
        "metadata": {"phone_number_id": number},
        "contacts": [{"wa_id": "4915", "profile": {"name": "Ada"}}],
        "messages": [{"from": "4915", "id": "wamid.IN1", **message}],
    }
    return json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [{"changes": [{"field": "messages", "value": value}]}],
        }
    ).encode()


def read(message: dict[str, Any]) -> list[channels.InboundReply]:
    return webhook.read(notification(message), NUMBER).replies


def test_a_button_tap_names_its_question_and_option_and_the_message_replied_to() -> None:
    [tap] = read(
        {
            "type": "interactive",
            "context": {"id": "wamid.Q"},
            "interactive": {"type": "button_reply", "button_reply": {"id": f"{ID}:2", "title": "c"}},
        }
    )
    assert (tap.kind, tap.interaction_id, tap.index, tap.message, tap.event_id) == (
        "tap",
        ID,
        2,
        "wamid.Q",
        "wamid.IN1",
    )
    assert (tap.sender, tap.chat, tap.sender_name) == ("4915", "4915", "Ada")
    [yes] = read(
        {"type": "interactive", "interactive": {"type": "list_reply", "list_reply": {"id": f"{ID}:y"}}}
    )
    assert (yes.kind, yes.value) == ("yes_no", True)


@pytest.mark.parametrize("tap_id", ["Yes", f"{ID}:", f"{ID}:99999", "x" * 300, None])
def test_a_malformed_tap_names_no_question_and_no_message_so_it_is_bridged(tap_id: Any) -> None:
    [tap] = read(
        {
            "type": "interactive",
            "context": {"id": "wamid.Q"},
            "interactive": {"type": "button_reply", "button_reply": {"id": tap_id, "title": "Yes"}},
        }
    )
    assert (tap.kind, tap.interaction_id, tap.message, tap.direct, tap.value) == (
        "tap",
        None,
        None,
        False,
        "Yes",
    )


def test_a_typed_reply_is_the_persons_direct_chat_or_the_message_it_replies_to() -> None:
    [plain] = read({"type": "text", "text": {"body": "yes"}})
    assert (plain.kind, plain.value, plain.direct, plain.message) == ("typed", "yes", True, None)
    [reply] = read({"type": "text", "text": {"body": "v2"}, "context": {"id": "wamid.Q"}})
    assert reply.message == "wamid.Q"


def test_template_buttons_and_referrals_carry_their_params_for_the_bridge() -> None:
    [button] = read({"type": "button", "button": {"payload": "stop-promos", "text": "Stop"}})
    assert (button.interaction_id, button.message, button.value) == (None, None, "Stop")
    assert button.params == {"payload": "stop-promos"}
    referral = {"source_type": "ad", "source_id": "120"}
    [typed] = read({"type": "text", "text": {"body": "hi"}, "referral": referral})
    assert typed.params == {"referral": referral}


def test_a_flow_submission_is_submitted_then_an_open_form_that_resends_a_refusal() -> None:
    response = json.dumps({"seats": 4, "flow_token": f"{ID}:form:2"})
    submitted, reopen = read(
        {
            "type": "interactive",
            "context": {"id": "wamid.F"},
            "interactive": {
                "type": "nfm_reply",
                "nfm_reply": {"name": "flow", "body": "Sent", "response_json": response},
            },
        }
    )
    assert (submitted.kind, submitted.interaction_id, submitted.value) == ("submitted", ID, {"seats": 4})
    assert (reopen.kind, reopen.event_id, reopen.context) == (
        "open_form",
        "wamid.IN1#form",
        {"wamid": "wamid.IN1", "resends": 2},
    )
    note = json.dumps({"ok": True, "flow_token": "notification:n-7"})
    [only] = read(
        {"type": "interactive", "interactive": {"type": "nfm_reply", "nfm_reply": {"response_json": note}}}
    )
    assert (only.kind, only.notification_id, only.value, only.interaction_id) == (
        "submitted",
        "n-7",
        {"ok": True},
        None,
    )


def test_statuses_and_other_numbers_are_acknowledged_and_ignored_failed_ones_kept_for_the_log() -> None:
    assert (
        webhook.read(notification({"type": "text", "text": {"body": "x"}}, number="999"), NUMBER).replies
        == []
    )
    value = {
        "metadata": {"phone_number_id": NUMBER},
        "statuses": [{"id": "w1", "status": "read"}, {"id": "w2", "status": "failed"}],
    }
    body = json.dumps({"entry": [{"changes": [{"field": "messages", "value": value}]}]}).encode()
    read_back = webhook.read(body, NUMBER)
    assert read_back.replies == [] and [s["id"] for s in read_back.failures] == ["w2"]


# -- errors -----------------------------------------------------------------------------------


def envelope(code: int) -> bytes:
    return json.dumps(
        {"error": {"message": f"(#{code}) x", "type": "OAuthException", "code": code, "fbtrace_id": "T"}}
    ).encode()


@pytest.mark.parametrize("code", [4, 80007, 130429, 131056, 131000, 131016])
def test_rate_limits_and_service_faults_are_retryable(code: int) -> None:
    error = graph.failure("whatsapp 'wa'", graph.read_error(400, envelope(code)))
    assert error.retryable and not isinstance(error, channels.ChannelInputError)


@pytest.mark.parametrize("code", [100, 131026, 131047, 132000])
def test_refusals_of_the_input_are_final(code: int) -> None:
    error = graph.failure("whatsapp 'wa'", graph.read_error(400, envelope(code)))
    assert isinstance(error, channels.ChannelInputError) and not error.retryable


def test_a_missing_template_is_refused_naming_it_and_a_bad_token_is_final() -> None:
    error = graph.failure("w", graph.read_error(404, envelope(132001)), template="welcome")
    assert isinstance(error, channels.ChannelInputError) and "'welcome'" in str(error)
    auth = graph.failure("w", graph.read_error(401, envelope(190)))
    assert not auth.retryable and "access token" in str(auth)
    assert graph.failure("w", graph.read_error(502, b"<html>")).retryable


# -- the channel's sends ----------------------------------------------------------------------


async def test_a_question_past_its_deadline_is_not_sent() -> None:
    clock = ManualClock(datetime.now(UTC) + timedelta(days=2))
    ch = WhatsAppChannel(name="wa", config=CONFIG, secrets=SECRETS, clock=clock)
    with pytest.raises(channels.ChannelInputError, match="timed out"):
        await ch.deliver(delivery())


async def test_media_go_first_then_the_question_whose_wamid_is_posted() -> None:
    ch = channel()
    rec = recorded(ch)
    posted = await ch.deliver(delivery(media=[MediaItem(kind="document", url="https://x/a.pdf")]))
    assert [m["type"] for _, m, _ in rec.sent] == ["document", "text"]
    assert posted == channels.Posted(chat="491512345678", message="wamid.2")


async def test_retraction_is_a_reply_to_the_question() -> None:
    ch = channel()
    rec = recorded(ch)
    await ch.retract(
        channels.Posted(chat="4915", message="wamid.Q"),
        channels.Retraction(interaction_id=ID, question="q", outcome="answered", by="ada", via="inbox"),
    )
    assert rec.sent == [
        (
            "4915",
            {"type": "text", "text": {"body": "Answered by ada in the inbox.", "preview_url": False}},
            "wamid.Q",
        )
    ]


async def test_notify_sends_media_one_by_one_then_the_text_or_a_template_alone() -> None:
    ch = channel()
    rec = recorded(ch)
    media = [MediaItem(kind="image", url="https://x/1.png"), MediaItem(kind="video", url="https://x/2.mp4")]
    ids = await ch.notify(channels.ChannelNotification(notification_id="n", message="Deployed", media=media))
    assert ids == ["wamid.1", "wamid.2", "wamid.3"]
    assert [m["type"] for _, m, _ in rec.sent] == ["image", "video", "text"]
    template = channels.ChannelTemplate(name="deploy_done", language="en_US", parameters=["v2"])
    assert await ch.notify(
        channels.ChannelNotification(notification_id="t", message="fallback", template=template)
    ) == ["wamid.4"]
    assert rec.sent[-1][1]["template"] == {
        "name": "deploy_done",
        "language": {"code": "en_US"},
        "components": [{"type": "body", "parameters": [{"type": "text", "text": "v2"}]}],
    }


async def test_a_refused_form_is_sent_again_five_times_then_the_person_is_told() -> None:
    ch = channel()
    rec = recorded(ch)
    form = delivery("form", schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    for resends in range(6):
        submitted = channels.InboundReply(
            kind="submitted",
            sender="4915",
            chat="4915",
            interaction_id=ID,
            event_id=f"w{resends}",
            message="wamid.F",
            value={},
        )
        await ch.respond(submitted, channels.ReplyOutcome(status="rejected", reason="n: not an integer"))
        reopen = channels.InboundReply(
            kind="open_form",
            sender="4915",
            chat="4915",
            interaction_id=ID,
            event_id=f"w{resends}#form",
            message="wamid.F",
            context={"resends": resends},
        )
        await ch.open_form(reopen, form)
    flows = [m for _, m, _ in rec.sent if m["type"] == "interactive"]
    assert [f["interactive"]["action"]["parameters"]["flow_token"] for f in flows] == [
        f"{ID}:form:{n}" for n in range(1, 6)
    ]
    assert flows[0]["interactive"]["body"]["text"].endswith(
        "Your last answer could not be accepted: n: not an integer"
    )
    assert rec.sent[-1][1]["text"]["body"] == "Sorry, your form could not be processed."


async def test_a_form_that_was_not_refused_is_not_sent_again() -> None:
    ch = channel()
    rec = recorded(ch)
    reopen = channels.InboundReply(
        kind="open_form",
        sender="4915",
        chat="4915",
        interaction_id=ID,
        event_id="w#form",
        context={"resends": 0},
    )
    await ch.respond(
        channels.InboundReply(kind="submitted", sender="4915", chat="4915", event_id="w"),
        channels.ReplyOutcome(status="bridged"),
    )
    await ch.open_form(reopen, delivery("form", schema={"type": "object"}))
    assert rec.sent == []


async def test_a_typed_mismatch_gets_the_notice_as_a_reply_and_a_failed_follow_up_is_swallowed() -> None:
    ch = channel()
    rec = recorded(ch)
    typed = channels.InboundReply(
        kind="typed", sender="4915", chat="4915", value="c", context={"wamid": "wamid.IN1"}
    )
    await ch.follow_up(typed, channels.ReplyOutcome(status="rejected", notice="Please pick one."))
    assert rec.sent == [
        ("4915", {"type": "text", "text": {"body": "Please pick one.", "preview_url": False}}, "wamid.IN1")
    ]

    async def failing(*_: Any, **__: Any) -> Sent:
        raise channels.ChannelDeliveryError("down", retryable=True)

    rec.send = failing  # type: ignore[method-assign]
    await ch.follow_up(typed, channels.ReplyOutcome(status="late"))


async def test_a_form_submitted_after_its_question_ended_hears_it_is_no_longer_open() -> None:
    ch = channel()
    rec = recorded(ch)
    late = channels.InboundReply(
        kind="submitted", sender="4915", chat="4915", value={}, context={"wamid": "wamid.IN9"}
    )
    await ch.follow_up(late, channels.ReplyOutcome(status="late"))
    await ch.follow_up(
        late, channels.ReplyOutcome(status="rejected", notice="ignored: the Flow is sent again")
    )
    assert rec.sent == [
        (
            "4915",
            {"type": "text", "text": {"body": "This question is no longer open.", "preview_url": False}},
            "wamid.IN9",
        )
    ]


def test_a_form_the_flow_cannot_show_is_refused_at_ask_time_naming_the_property() -> None:
    ch = channel()
    fields = {f"f{i}": {"type": "string"} for i in range(20)}
    ch.validate_form_schema({"type": "object", "properties": fields}, "q")
    with pytest.raises(ValueError, match="at most 20 fields; this form has 21"):
        ch.validate_form_schema({"type": "object", "properties": {**fields, "x": {"type": "string"}}}, "q")
    with pytest.raises(ValueError, match="property 'tags'"):
        ch.validate_form_schema({"type": "object", "properties": {"tags": {"type": "array"}}}, "q")


async def test_a_recipient_that_is_not_a_phone_number_is_refused_naming_it() -> None:
    ch = channel(default_recipient=None)
    recorded(ch)
    with pytest.raises(channels.ChannelInputError, match="recipient 'ada' is not a phone number"):
        await ch.deliver(delivery(recipient="ada"))
    with pytest.raises(channels.ChannelInputError, match="no recipient"):
        await ch.deliver(delivery())


async def test_a_conversation_reply_is_a_text_message_replying_to_the_persons_message() -> None:
    ch = channel()
    rec = recorded(ch)
    await ch.say("4915", "x" * 5000, thread="wamid.IN1")
    [(to, message, reply_to)] = rec.sent
    assert (to, reply_to, len(message["text"]["body"])) == ("4915", "wamid.IN1", 4096)
