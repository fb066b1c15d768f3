"""The Slack channel's rules without a network (docs/channels.md#slack): request verification,
settings, Block Kit rendering within Slack's limits, modals, and reading what a person did."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from layby_contracts.channels import (
    ChannelDelivery,
    ChannelInputError,
    InboundMalformed,
    InboundRefused,
    InboundReply,
    InboundRequest,
    ReplyOutcome,
)
from layby_contracts.events import MediaItem
from layby_server.channels import load_channels
from layby_server.chat import common
from layby_server.chat.slack import SlackChannel, message_blocks, modal_view
from tests.standins.slack import _check_blocks, _check_view

pytestmark = pytest.mark.unit

# Slack's published example of a signed request (a slash command).
VECTOR_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
VECTOR_TS = "1531420618"
VECTOR_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
VECTOR_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
SECRET = "unit-signing-secret"
NOW = 1_800_000_000.0
SECRETS = {
    "slack-bot": b"xoxb-unit-token-1234",
    "slack-signing": SECRET.encode(),
    "vector": VECTOR_SECRET.encode(),
}
CONFIG = {"bot_token": "slack-bot", "signing_secret": "slack-signing", "default_recipient": "C0DEPLOYS"}


def channel(**config: Any) -> SlackChannel:
    return SlackChannel(name="team", config={**CONFIG, **config}, secrets=SECRETS, clock=lambda: NOW)


def delivery(answer_format: str = "text", **fields: Any) -> ChannelDelivery:
    return ChannelDelivery(
        interaction_id=fields.pop("interaction_id", "ia_0123456789"),
        question=fields.pop("question", "Deploy the hotfix now?"),
        answer_format=answer_format,
        callback_url="https://layby.example.com/api/interactions/callback/tk",
        timeout_at=fields.pop("timeout_at", datetime.fromtimestamp(NOW, UTC) + timedelta(minutes=10)),
        **fields,
    )


def signed(
    body: bytes, *, ts: float = NOW, secret: str = SECRET, content_type: str = "application/json"
) -> InboundRequest:
    stamp = str(int(ts))
    digest = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    headers = {
        "content-type": content_type,
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": f"v0={digest}",
    }
    return InboundRequest(
        method="POST", url="http://layby.test/api/channels/team/events", headers=headers, query={}, body=body
    )


def interaction(payload: dict[str, Any]) -> InboundRequest:
    body = urlencode({"payload": json.dumps(payload)}).encode()
    return signed(body, content_type="application/x-www-form-urlencoded")


def block_actions(action: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "block_actions",
        "user": {"id": "U0ALICE01", "username": "alice", "name": "alice"},
        "channel": {"id": "C0DEPLOYS"},
        "container": {"type": "message", "message_ts": "1800000000.000100", "channel_id": "C0DEPLOYS"},
        "trigger_id": "12.34.trigger",
        "response_url": "https://hooks.slack.com/actions/x",
        "actions": [action],
    }


def assert_valid_blocks(blocks: list[dict[str, Any]]) -> None:
    parsed = Block.parse_all(blocks)
    assert all(block is not None for block in parsed), blocks
    for block in parsed:
        block.to_dict()
    _check_blocks(blocks, 50)  # what the models miss: option text, empty text, empty actions


# -- verification ------------------------------------------------------------------------------


async def test_the_verifier_accepts_slacks_published_example() -> None:
    """A request signed as Slack's published example is accepted (v0 HMAC over the raw body)."""
    plugin = SlackChannel(
        name="team",
        config={**CONFIG, "signing_secret": "vector"},
        secrets=SECRETS,
        clock=lambda: float(VECTOR_TS),
    )
    headers = {"x-slack-request-timestamp": VECTOR_TS, "x-slack-signature": VECTOR_SIGNATURE,
               "content-type": "application/x-www-form-urlencoded"}  # fmt: skip
    request = InboundRequest(method="POST", url="http://x/e", headers=headers, query={}, body=VECTOR_BODY)
    plugin.verify(request)
    assert await plugin.inbound(request) is not None  # a slash command: acknowledged and ignored


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (
            lambda r: {**r, "headers": {**r["headers"], "x-slack-request-timestamp": str(int(NOW) - 301)}},
            "stale",
        ),
        (lambda r: {**r, "body": r["body"].replace(b'"c"', b'"d"')}, "wrong X-Slack-Signature"),
        (
            lambda r: {**r, "headers": {k: v for k, v in r["headers"].items() if k != "x-slack-signature"}},
            "X-Slack-Signature",
        ),
        (
            lambda r: {**r, "headers": {k: v for k, v in r["headers"].items() if "timestamp" not in k}},
            "Timestamp",
        ),
        (lambda r: {**r, "headers": {**r["headers"], "x-slack-request-timestamp": "soon"}}, "Timestamp"),
    ],
    ids=["stale", "one-byte-changed", "no-signature", "no-timestamp", "malformed-timestamp"],
)
async def test_an_unsigned_stale_or_altered_request_is_refused(mutate: Any, reason: str) -> None:
    """A missing, malformed, stale (over 300 s) or non-matching signature is refused before parsing."""
    good = signed(b'{"type":"url_verification","challenge":"c"}')
    fields = mutate({"headers": dict(good.headers), "body": good.body})
    bad = InboundRequest(
        method="POST", url=good.url, headers=fields["headers"], query={}, body=fields["body"]
    )
    with pytest.raises(InboundRefused, match=reason):
        await channel().inbound(bad)


async def test_a_request_signed_with_another_secret_is_refused() -> None:
    """Only the configured signing secret verifies a request."""
    with pytest.raises(InboundRefused, match="wrong X-Slack-Signature"):
        await channel().inbound(signed(b'{"type":"url_verification","challenge":"c"}', secret="other"))


async def test_a_timestamp_within_five_minutes_either_way_is_accepted() -> None:
    """Clock skew of up to 300 s either way is tolerated."""
    for skew in (-300, 300):
        request = signed(b'{"type":"url_verification","challenge":"c"}', ts=NOW + skew)
        assert (await channel().inbound(request)).response is not None


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"bot_token": None}, "slack needs bot_token: the name of a secret in LAYBY_WEBHOOK_SECRETS"),
        ({"signing_secret": "nope"}, "slack signing_secret 'nope' is not in LAYBY_WEBHOOK_SECRETS"),
        ({"botToken": "x"}, "unknown slack option 'botToken'"),
        ({"api_url": "slack.com/api"}, "slack api_url must be an absolute http(s) URL"),
        ({"timeout": 0}, "slack timeout must be a positive number of seconds"),
        ({"default_recipient": ""}, "slack default_recipient must be a channel or user id"),
    ],
)
def test_a_bad_setting_is_refused_by_name(config: dict[str, Any], message: str) -> None:
    """Every setting is checked at start-up and the error names it (never a secret's value)."""
    merged = {k: v for k, v in {**CONFIG, **config}.items() if v is not None}
    with pytest.raises(ValueError, match="^" + re.escape(message)) as err:
        SlackChannel(name="team", config=merged, secrets=SECRETS)
    assert "xoxb-unit-token" not in str(err.value)


def test_the_registry_loads_the_built_in_slack_plugin() -> None:
    """``{"plugin": "slack"}`` in LAYBY_CHANNELS loads this plugin, with form delivery."""
    loaded = load_channels(json.dumps({"team": {"plugin": "slack", **CONFIG}}), SECRETS)
    assert isinstance(loaded["team"], SlackChannel)
    assert loaded["team"].supports_form_delivery is True
    assert "xoxb" not in repr(loaded["team"])


# -- delivery refusals without a send ----------------------------------------------------------


async def test_a_question_past_its_deadline_is_not_sent() -> None:
    """A delivery whose deadline has passed is refused for good and nothing is sent."""
    plugin = channel(api_url="http://127.0.0.1:9/api/")
    late = delivery(timeout_at=datetime.fromtimestamp(NOW, UTC))
    with pytest.raises(
        ChannelInputError, match="already timed out before it could be sent; nothing was sent"
    ):
        await plugin.deliver(late)
    assert plugin._client is None


async def test_no_recipient_and_no_default_is_a_permanent_refusal() -> None:
    """Without a recipient or default_recipient there is nowhere to post."""
    plugin = SlackChannel(
        name="team",
        config={k: v for k, v in CONFIG.items() if k != "default_recipient"},
        secrets=SECRETS,
        clock=lambda: NOW,
    )
    with pytest.raises(ChannelInputError, match="no recipient and no default_recipient configured"):
        await plugin.deliver(delivery())


# -- rendering ---------------------------------------------------------------------------------


def test_every_format_renders_within_block_kit_limits() -> None:
    """Each answer format becomes blocks Slack accepts, with the question in plain text."""
    schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    cases = [
        delivery("text"),
        delivery("text", suggested_replies=["Ship it", "Wait"]),
        delivery("confirm"),
        delivery("select", options=["blue", "green"]),
        delivery("form", schema=schema),
        delivery("external"),
        delivery("text", question="<!channel> & *bold*" + "x" * 7000,
                 media=[MediaItem(kind="image", url="https://i.example/p.png", caption="plot"),
                        MediaItem(kind="document", url="https://d.example/r.pdf", filename="r|x.pdf")]),
    ]  # fmt: skip
    for case in cases:
        blocks = message_blocks(case)
        assert_valid_blocks(blocks)
        assert blocks[0]["type"] == "section"
        assert blocks[0]["text"]["type"] == "plain_text"  # a question cannot mention @channel
    long = message_blocks(cases[-1])
    assert [b["type"] for b in long] == ["section", "section", "section", "image", "context", "context"]
    assert "".join(b["text"]["text"] for b in long[:3]).startswith("<!channel> & *bold*")


def test_controls_carry_tap_ids_never_the_option_text() -> None:
    """Buttons and menu options carry ``<interaction_id>:<index>``; yes/no and form carry the id."""
    iid = "ia_0123456789"
    buttons = message_blocks(delivery("text", suggested_replies=["Ship it", "Wait"]))[1]["elements"]
    assert [(b["value"], b["action_id"]) for b in buttons] == [
        (common.tap_id(iid, 0), f"layby:tap:{iid}:0"),
        (common.tap_id(iid, 1), f"layby:tap:{iid}:1"),
    ]
    yes, no = message_blocks(delivery("confirm"))[1]["elements"]
    assert (yes["action_id"], no["action_id"]) == (f"layby:yes:{iid}", f"layby:no:{iid}")
    (form,) = message_blocks(delivery("form", schema={"type": "object", "properties": {}}))[1]["elements"]
    assert (form["text"]["text"], form["action_id"]) == ("Open form", f"layby:open:{iid}")
    (link,) = message_blocks(delivery("external"))[1]["elements"]
    assert link["url"] == "https://layby.example.com/api/interactions/callback/tk"


def test_a_select_becomes_buttons_then_a_menu_then_numbered_text() -> None:
    """Up to 5 short options are buttons, up to 100 a menu, beyond (or too long) a numbered prompt."""
    few = message_blocks(delivery("select", options=[f"o{n}" for n in range(5)]))
    assert [e["type"] for e in few[1]["elements"]] == ["button"] * 5
    many = message_blocks(delivery("select", options=[f"o{n}" for n in range(100)]))
    (menu,) = many[1]["elements"]
    assert menu["type"] == "static_select"
    assert menu["options"][99]["value"] == "ia_0123456789:99"
    for blocks in (few, many):
        assert_valid_blocks(blocks)
    for options in ([f"o{n}" for n in range(101)], ["short", "x" * 76]):
        numbered = message_blocks(delivery("select", options=options))
        assert_valid_blocks(numbered)
        assert all(b["type"] != "actions" for b in numbered)
        text = "".join(b["text"]["text"] for b in numbered if b["type"] == "section")
        assert text.startswith("Deploy the hotfix now?\n\n1. ")
        assert common.PICK_ONE in text


def test_suggested_replies_that_do_not_fit_are_left_out() -> None:
    """Suggested replies constrain nothing: over 25 or over 75 characters, only the text prompt remains."""
    for replies in ([str(n) for n in range(26)], ["x" * 76]):
        blocks = message_blocks(delivery("text", suggested_replies=replies))
        assert [b["type"] for b in blocks] == ["section", "context"]


# -- forms -------------------------------------------------------------------------------------

FORM = {
    "type": "object",
    "required": ["service", "replicas"],
    "properties": {
        "service": {"type": "string", "title": "Service", "enum": ["api", "web"]},
        "replicas": {"type": "integer"},
        "ratio": {"type": "number"},
        "canary": {"type": "boolean"},
        "note": {"type": "string"},
    },
}


def test_a_form_becomes_a_modal_with_one_input_per_property() -> None:
    """Labels from title or name, required fields mandatory, one element type per schema type."""
    form = delivery("form", question="Scale which service? " * 3, schema=FORM,
                    data={"options": {"service": ["The API", "The website"]}, "values": {"replicas": 3}})  # fmt: skip
    view = modal_view(form, "C0DEPLOYS", "1800000000.000100")
    View(**view).validate_json()
    _check_view(view)
    inputs = {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}
    assert list(inputs) == ["service", "replicas", "ratio", "canary", "note"]
    assert inputs["service"]["label"]["text"] == "Service"
    assert [o["text"]["text"] for o in inputs["service"]["element"]["options"]] == ["The API", "The website"]
    assert [o["value"] for o in inputs["service"]["element"]["options"]] == ["api", "web"]
    assert {n: b["optional"] for n, b in inputs.items()} == {
        "service": False, "replicas": False, "ratio": True, "canary": True, "note": True,
    }  # fmt: skip
    assert inputs["replicas"]["element"] | {} == {
        "action_id": "value",
        "type": "number_input",
        "is_decimal_allowed": False,
        "initial_value": "3",
    }
    assert inputs["ratio"]["element"]["is_decimal_allowed"] is True
    assert inputs["canary"]["element"]["type"] == "checkboxes"
    assert inputs["note"]["element"]["type"] == "plain_text_input"
    assert len(view["title"]["text"]) <= 24
    assert json.loads(view["private_metadata"]) == {
        "interaction_id": "ia_0123456789", "chat": "C0DEPLOYS", "message": "1800000000.000100",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        (
            {"properties": {f"f{n}": {"type": "string"} for n in range(100)}},
            "a Slack modal holds at most 99 fields; this form has 100",
        ),
        (
            {"properties": {"x": {"type": "string", "title": "t" * 2001}}},
            "property 'x': its title is longer than 2000 characters",
        ),
        (
            {"properties": {"x": {"type": "string", "enum": [str(n) for n in range(101)]}}},
            "property 'x': a Slack menu holds at most 100 options",
        ),
        ({"properties": {"x": {"type": "string", "enum": ["y" * 76]}}}, "property 'x': option text"),
        ({"properties": {"x" * 256: {"type": "string"}}}, "a Slack field id is 1-255 characters"),
    ],
)
def test_a_form_a_modal_cannot_hold_is_refused_naming_the_property(
    schema: dict[str, Any], message: str
) -> None:
    """validate_form_schema refuses at ask time what a Slack modal cannot show."""
    with pytest.raises(ValueError, match=re.escape(message)):
        channel().validate_form_schema({"type": "object", **schema}, "q")


def test_a_form_a_modal_can_hold_passes() -> None:
    """A form within the limits is accepted."""
    channel().validate_form_schema(FORM, "q")


# -- reading what a person did -----------------------------------------------------------------


async def test_the_url_verification_handshake_echoes_the_challenge() -> None:
    """Slack's url_verification is answered with its challenge, as plain text."""
    inbound = await channel().inbound(signed(b'{"type":"url_verification","challenge":"abc123"}'))
    assert inbound.replies == []
    assert inbound.response is not None
    assert (inbound.response.body, inbound.response.content_type) == (b"abc123", "text/plain")


async def test_a_tap_names_its_option_by_index() -> None:
    """A button tap is read from its tap id: the interaction and the option's index."""
    inbound = await channel().inbound(interaction(block_actions(
        {"action_id": "layby:tap:ia_1:2", "block_id": "b", "type": "button", "value": "ia_1:2", "text": {"type": "plain_text", "text": "Forged text"}}
    )))  # fmt: skip
    assert inbound.replies == [InboundReply(
        kind="tap", sender="U0ALICE01", sender_name="alice", chat="C0DEPLOYS", message="1800000000.000100",
        interaction_id="ia_1", index=2, event_id="12.34.trigger",
        context={"trigger_id": "12.34.trigger", "response_url": "https://hooks.slack.com/actions/x"},
    )]  # fmt: skip


@pytest.mark.parametrize("value", ["ia_1", "ia_1:x", ":3", "ia_1:99999", "", None])
async def test_a_forged_tap_id_is_malformed(value: Any) -> None:
    """A tap whose value is not ``<interaction_id>:<index>`` is refused, never guessed at."""
    with pytest.raises(InboundMalformed, match="the action's value is not a Layby option id"):
        await channel().inbound(
            interaction(block_actions({"action_id": "layby:tap:x", "type": "button", "value": value}))
        )


async def test_yes_no_and_open_form_taps_are_read_from_the_action_id() -> None:
    """Yes and No are distinct actions; the form button asks to open the form with its trigger id."""
    plugin = channel()
    yes = (
        await plugin.inbound(interaction(block_actions({"action_id": "layby:yes:ia_1", "value": "ia_1"})))
    ).replies[0]
    no = (
        await plugin.inbound(interaction(block_actions({"action_id": "layby:no:ia_1", "value": "ia_1"})))
    ).replies[0]
    form = (
        await plugin.inbound(interaction(block_actions({"action_id": "layby:open:ia_1", "value": "ia_1"})))
    ).replies[0]
    assert (yes.kind, yes.value, no.kind, no.value) == ("yes_no", True, "yes_no", False)
    assert (form.kind, form.interaction_id, (form.context or {})["trigger_id"]) == (
        "open_form",
        "ia_1",
        "12.34.trigger",
    )


async def test_a_link_button_and_foreign_actions_are_acknowledged_and_ignored() -> None:
    """Opening the external link is not an answer; an action Layby did not make is ignored."""
    plugin = channel()
    for action_id in ("layby:link:ia_1", "someone-else"):
        assert (await plugin.inbound(interaction(block_actions({"action_id": action_id})))).replies == []


def event(**fields: Any) -> bytes:
    message = {
        "type": "message",
        "channel": "C0DEPLOYS",
        "user": "U0ALICE01",
        "text": "ship it",
        "ts": "1800000001.000200",
    }
    envelope = {"type": "event_callback", "event_id": "Ev01", "event": {**message, **fields},
                "authorizations": [{"user_id": "U0LAYBYBOT", "is_bot": True}]}  # fmt: skip
    return json.dumps(envelope).encode()


async def test_a_threaded_message_is_a_typed_reply_to_its_thread() -> None:
    """A person's message in a question's thread is a typed reply located by the thread's ts;
    channel chatter outside any thread is not addressed to the bot and is ignored; in a direct
    message a plain message is a reply of the direct chat."""
    inbound = await channel().inbound(signed(event(thread_ts="1800000000.000100")))
    assert inbound.replies == [InboundReply(
        kind="typed", sender="U0ALICE01", chat="C0DEPLOYS", message="1800000000.000100", value="ship it", event_id="Ev01"
    )]  # fmt: skip
    unthreaded = await channel().inbound(signed(event()))
    assert unthreaded.replies == []
    direct = await channel().inbound(signed(event(channel="D0ALICE01", channel_type="im")))
    assert direct.replies[0].message is None and direct.replies[0].direct is True


@pytest.mark.parametrize(
    "fields",
    [
        {"bot_id": "B1"},
        {"subtype": "message_changed"},
        {"subtype": "bot_message"},
        {"user": "U0LAYBYBOT"},
        {"type": "reaction_added"},
    ],
    ids=["bot", "edit", "bot-message", "ourselves", "other-event"],
)
async def test_bots_edits_and_other_events_are_not_replies(fields: dict[str, Any]) -> None:
    """Only a person's new message is a reply; bots (the app itself included) and edits are not."""
    assert (await channel().inbound(signed(event(**fields)))).replies == []


async def test_a_verified_body_that_cannot_be_read_is_malformed() -> None:
    """After verification, an unreadable body is a 400 naming what is wrong."""
    with pytest.raises(InboundMalformed, match="neither JSON nor a form"):
        await channel().inbound(signed(b"not json"))
    with pytest.raises(InboundMalformed, match="payload=<JSON>"):
        await channel().inbound(signed(b"payload=%7Bnope", content_type="application/x-www-form-urlencoded"))


async def test_a_rejected_form_answer_shows_its_reason_under_the_field_it_names() -> None:
    """A refused submission keeps the modal open with the reason under the named field (else the first)."""
    plugin = channel()
    reply = InboundReply(kind="submitted", sender="U", chat="C", interaction_id="ia_1", value={},
                         context={"fields": ["service", "replicas"]})  # fmt: skip
    named = await plugin.respond(
        reply, ReplyOutcome(status="rejected", reason="replicas: must be at least 1")
    )
    assert named is not None
    assert json.loads(named.body) == {
        "response_action": "errors",
        "errors": {"replicas": "replicas: must be at least 1"},
    }
    assert named.content_type == "application/json"
    vague = await plugin.respond(reply, ReplyOutcome(status="rejected", reason="not accepted"))
    assert vague is not None
    assert json.loads(vague.body)["errors"] == {"service": "not accepted"}
    assert await plugin.respond(reply, ReplyOutcome(status="answered")) is None
    tap = InboundReply(kind="tap", sender="U", chat="C", interaction_id="ia_1", index=0)
    assert await plugin.respond(tap, ReplyOutcome(status="rejected", reason="x")) is None
