"""The Twilio channel's own rules, without a network: settings, the webhook signature (pinned to
Twilio's published example and cross-checked with the SDK's validator), how each format reads as
a text message, SMS limits, and what each Twilio error means (docs/channels.md#twilio)."""

from __future__ import annotations

import asyncio
import re
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from twilio.base.exceptions import TwilioRestException, TwilioServiceException
from twilio.request_validator import RequestValidator

from layby_contracts.channels import (
    ChannelDelivery,
    ChannelDeliveryError,
    ChannelInputError,
    InboundMalformed,
    InboundRefused,
    InboundRequest,
    Retraction,
)
from layby_contracts.events import MediaItem
from layby_server.channels import abilities, load_channels
from layby_server.chat.twilio import TwilioChannel, render, retraction_text, segments, signature
from layby_server.chat.twilio.errors import delivery_error
from layby_server.chat.twilio.rendering import TEXT_LIMIT, cut, units
from layby_server.chat.twilio.webhook import EMPTY_TWIML, url_forms
from tests.samples import channel_delivery

pytestmark = pytest.mark.unit

SID = "AC" + "ab" * 16
TOKEN = "twilio-auth-token"
URL = "https://layby.example/api/channels/sms/events"
SECRETS = {"tok": TOKEN.encode()}
ID = "0b6c2f0e-6a43-4c1e-9d7e-1f2a3b4c5d6e"
CALLBACK = "https://layby.example/api/interactions/callback/tkt"


def channel(**config: Any) -> TwilioChannel:
    base = {"account_sid": SID, "auth_token": "tok", "from": "+15557654321", "public_url": URL}
    return TwilioChannel(name="sms", config=base | config, secrets=SECRETS)


def delivery(answer_format: str = "text", **fields: Any) -> ChannelDelivery:
    return channel_delivery(answer_format, **({"interaction_id": ID} | fields))


def webhook(
    params: list[tuple[str, str]], sig: str | None, content_type: str = "application/x-www-form-urlencoded"
) -> InboundRequest:
    headers = {"content-type": content_type}
    if sig is not None:
        headers["x-twilio-signature"] = sig
    return InboundRequest(
        method="POST",
        url="http://10.0.0.7:8080/api/channels/sms/events",
        headers=headers,
        query={},
        body=urlencode(params).encode(),
    )


INCOMING = [
    ("MessageSid", "SM" + "1" * 32),
    ("AccountSid", SID),
    ("From", "+15551230001"),
    ("To", "+15557654321"),
    ("Body", "yes"),
    ("NumMedia", "0"),
]

# -- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"colour": "red"}, "unknown twilio option 'colour'"),
        ({"account_sid": "AC123"}, "twilio account_sid must be the account's SID: AC and 32 hex digits"),
        ({"auth_token": "nope"}, "twilio auth_token 'nope' is not in LAYBY_WEBHOOK_SECRETS"),
        ({"from": "5557654321"}, "twilio from must be a number (+ and 7-15 digits)"),
        ({"public_url": "/api/channels/sms/events"}, "twilio public_url must be the absolute http(s) URL"),
        ({"default_recipient": "whatsapp:555"}, "twilio default_recipient must be a number (+…)"),
        ({"timeout": 0}, "twilio timeout must be a positive number of seconds"),
        ({"mms": "yes"}, "twilio mms must be true or false"),
        ({"api_url": "ftp://x"}, "twilio api_url must be an absolute http(s) URL"),
    ],
)
def test_a_bad_setting_stops_start_up_naming_the_option(config: dict[str, Any], message: str) -> None:
    """Every setting is checked when the channel is built; the error names the option, never the
    token's value."""
    with pytest.raises(ValueError, match="^" + re.escape(message)) as err:
        channel(**config)
    assert TOKEN not in str(err.value)


def test_the_built_in_twilio_plugin_is_registered_and_delivers_no_forms() -> None:
    """``"plugin": "twilio"`` loads this channel; the ask decision sees it cannot take a form."""
    raw = f'{{"sms": {{"plugin": "twilio", "account_sid": "{SID}", "auth_token": "tok", "from": "whatsapp:+15557654321", "public_url": "{URL}"}}}}'
    loaded = load_channels(raw, SECRETS)
    assert isinstance(loaded["sms"], TwilioChannel)
    assert abilities(loaded)["sms"].forms is False


# -- the signature ----------------------------------------------------------------------------


def test_the_signature_matches_twilios_published_example() -> None:
    """Twilio's own example: token 12345, its URL with a query, five parameters."""
    params = [
        ("CallSid", "CA1234567890ABCDE"),
        ("Caller", "+14158675309"),
        ("Digits", "1234"),
        ("From", "+14158675309"),
        ("To", "+18005551212"),
    ]
    url = "https://mycompany.com/myapp.php?foo=1&bar=2"
    assert signature(b"12345", url, params) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="
    assert signature(b"12345", url, list(reversed(params))) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="


def test_the_signature_agrees_with_the_sdks_validator_on_repeated_and_unicode_parameters() -> None:
    """The SDK's RequestValidator computes the same signature (repeated names, non-ASCII text)."""
    params = [*INCOMING, ("MediaUrl0", "https://x/1"), ("Body", "Grüße ✓"), ("Body", "a")]
    multi: dict[str, list[str]] = {}
    for name, value in params:
        multi.setdefault(name, []).append(value)

    class Multi(dict[str, list[str]]):
        def getlist(self, name: str) -> list[str]:
            return self[name]

    expected = RequestValidator(TOKEN).compute_signature(URL, Multi(multi))
    assert signature(TOKEN.encode(), URL, params) == expected


def test_a_webhook_signed_over_the_public_url_is_read_as_a_typed_reply_in_the_direct_chat() -> None:
    """Verified over the configured public URL (not the URL the request reached): a typed reply
    in the person's direct chat with our number, the MessageSid its event id."""
    inbound = asyncio.run(channel().inbound(webhook(INCOMING, signature(TOKEN.encode(), URL, INCOMING))))
    [reply] = inbound.replies
    assert (reply.kind, reply.value, reply.sender, reply.direct) == ("typed", "yes", "+15551230001", True)
    assert reply.chat == "+15551230001|+15557654321" and reply.event_id == "SM" + "1" * 32
    assert inbound.response == EMPTY_TWIML


def test_the_signature_also_holds_with_or_without_the_default_port() -> None:
    """Twilio signs some requests with the scheme's port in the URL: both forms are accepted."""
    assert url_forms(URL) == [URL, "https://layby.example:443/api/channels/sms/events"]
    assert url_forms("http://h:8080/x?a=1") == ["http://h:8080/x?a=1", "http://h/x?a=1"]
    with_port = signature(TOKEN.encode(), "https://layby.example:443/api/channels/sms/events", INCOMING)
    assert asyncio.run(channel().inbound(webhook(INCOMING, with_port))).replies


@pytest.mark.parametrize(
    ("params", "sig", "why"),
    [
        (INCOMING, None, "no X-Twilio-Signature header"),
        (INCOMING, "", "no X-Twilio-Signature header"),
        (
            INCOMING,
            signature(TOKEN.encode(), "https://other.example/api/channels/sms/events", INCOMING),
            "a wrong X-Twilio-Signature",
        ),
        (
            INCOMING,
            signature(TOKEN.encode(), "http://layby.example/api/channels/sms/events", INCOMING),
            "a wrong X-Twilio-Signature",
        ),
        (INCOMING, signature(b"another token", URL, INCOMING), "a wrong X-Twilio-Signature"),
        (
            [(k, "no" if k == "Body" else v) for k, v in INCOMING],
            signature(TOKEN.encode(), URL, INCOMING),
            "a wrong X-Twilio-Signature",
        ),
        ([*INCOMING, ("Extra", "1")], signature(TOKEN.encode(), URL, INCOMING), "a wrong X-Twilio-Signature"),
    ],
)
def test_a_missing_or_wrong_signature_is_refused(
    params: list[tuple[str, str]], sig: str | None, why: str
) -> None:
    """Another URL (scheme, host), another token, a changed or added parameter: refused."""
    with pytest.raises(InboundRefused, match=f"^{why}$"):
        asyncio.run(channel().inbound(webhook(params, sig)))


def test_a_status_callback_or_another_accounts_message_is_acknowledged_and_ignored() -> None:
    """A signed status callback, or a message for another account, carries no reply: empty TwiML."""
    for params in (
        [*INCOMING, ("MessageStatus", "delivered")],
        [(k, "AC" + "0" * 32 if k == "AccountSid" else v) for k, v in INCOMING],
    ):
        inbound = asyncio.run(channel().inbound(webhook(params, signature(TOKEN.encode(), URL, params))))
        assert inbound.replies == [] and inbound.response == EMPTY_TWIML


def test_a_signed_body_over_the_cap_or_without_its_fields_is_malformed() -> None:
    """A Body over 1,600 characters, a missing From, a body that is not a form: 400 naming it."""
    long = [(k, "x" * 1601 if k == "Body" else v) for k, v in INCOMING]
    no_from = [(k, v) for k, v in INCOMING if k != "From"]
    for params, message in ((long, "Body is longer than 1600 characters"), (no_from, "no From")):
        with pytest.raises(InboundMalformed, match=f"^{message}$"):
            asyncio.run(channel().inbound(webhook(params, signature(TOKEN.encode(), URL, params))))
    with pytest.raises(InboundMalformed, match="must be application/x-www-form-urlencoded, not text/plain"):
        asyncio.run(
            channel().inbound(webhook(INCOMING, signature(TOKEN.encode(), URL, INCOMING), "text/plain"))
        )


def test_a_messaging_service_is_our_side_of_the_pair() -> None:
    """Sending through a Messaging Service, replies pair with the service, not the number it used."""
    service = "MG" + "cd" * 16
    params = [*INCOMING, ("MessagingServiceSid", service)]
    inbound = asyncio.run(
        channel(**{"from": service}).inbound(webhook(params, signature(TOKEN.encode(), URL, params)))
    )
    assert inbound.replies[0].chat == f"+15551230001|{service}"


# -- rendering --------------------------------------------------------------------------------


def test_each_format_reads_as_text() -> None:
    """text with a numbered hint; confirm asks yes or no; select numbers its options and asks for
    the text of one; external carries the callback URL."""
    assert render(delivery(suggested_replies=["v1", "v2  next"]), attach=False).text == (
        "Deploy now?\n\nSuggested replies (or answer in your own words):\n1. v1\n2. v2 next"
    )
    assert render(delivery("confirm"), attach=False).text == "Deploy now?\n\nReply yes or no."
    assert render(delivery("select", options=["a", "b"]), attach=False).text == (
        "Deploy now?\n\n1. a\n2. b\n\nReply with the text of one option."
    )
    assert render(delivery("external"), attach=False).text == f"Deploy now?\n\nOpen: {CALLBACK}"


def test_media_are_attachments_only_where_the_sender_can_attach_them() -> None:
    """Images, documents, video and audio are attachments on WhatsApp or MMS; links, and
    everything on plain SMS, are lines under the question."""
    media = [
        MediaItem(kind="image", url="https://x/a.png", caption="Chart"),
        MediaItem(kind="link", url="https://x/doc"),
    ]
    attached = render(delivery(media=media), attach=True)
    assert [m.url for m in attached.media] == [
        "https://x/a.png"
    ] and attached.text == "Deploy now?\n\nhttps://x/doc"
    plain = render(delivery(media=media), attach=False)
    assert plain.media == [] and plain.text == "Deploy now?\n\nChart: https://x/a.png\nhttps://x/doc"
    refused = render(delivery(media=media), attach=True, links=attached.media)
    assert refused.text == "Deploy now?\n\nhttps://x/doc\nChart: https://x/a.png"


def test_a_long_question_is_cut_to_1600_characters_keeping_the_options() -> None:
    """Twilio takes at most 1,600 characters: the question is cut with an ellipsis, never refused."""
    text = render(delivery("select", question="é" * 3000, options=["keep me"]), attach=False).text
    assert units(text) == TEXT_LIMIT and "…\n\n1. keep me\n\nReply with the text of one option." in text
    assert units(cut("🚀" * 1000)) <= TEXT_LIMIT and cut("🚀" * 1000).endswith("…")


def test_sms_segments_follow_gsm7_and_ucs2() -> None:
    """160 GSM-7 characters are one segment, 153 each once split; 70 UCS-2 units, 67 once split."""
    assert [
        segments("a" * 160),
        segments("a" * 161),
        segments("€" * 80),
        segments("a" * 306),
        segments("a" * 307),
    ] == [1, 2, 1, 2, 3]
    assert [
        segments("é" * 70),
        segments("✓" * 70),
        segments("✓" * 71),
        segments("✓" * 134),
        segments("✓" * 135),
    ] == [1, 1, 2, 2, 3]


def test_a_retraction_is_a_short_follow_up_quoting_the_question() -> None:
    """A text cannot be edited: its retraction is a follow-up quoting the question (cut to 60) and how it ended."""
    answered = Retraction(
        interaction_id=ID,
        question="Ship the release to every region now?",
        outcome="answered",
        by="ada",
        via="inbox",
    )
    assert (
        retraction_text(answered) == "“Ship the release to every region now?”: Answered by ada in the inbox."
    )
    expired = Retraction(interaction_id=ID, question="x" * 200, outcome="expired")
    assert retraction_text(expired) == "“" + "x" * 59 + "…”: This question expired."


def test_a_form_or_a_whatsapp_address_on_an_sms_number_is_refused_before_sending() -> None:
    """A form, a WhatsApp address from an SMS number, or no recipient at all fails before any call, for good."""
    sms = channel(default_recipient="+15551230001")
    with pytest.raises(ChannelInputError, match=r"^twilio 'sms': a form cannot be sent as a text message$"):
        asyncio.run(sms.deliver(delivery("form", schema={"type": "object"})))
    with pytest.raises(ChannelInputError, match="is a WhatsApp address, but from is an SMS number"):
        asyncio.run(sms.deliver(delivery(recipient="whatsapp:+15551230001")))
    with pytest.raises(ChannelInputError, match="no recipient"):
        asyncio.run(channel().deliver(delivery()))


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (429, 20429, True),
        (500, 20500, True),
        (503, 20503, True),
        (400, 30001, True),
        (400, 21211, False),
        (400, 21610, False),
        (400, 21614, False),
        (400, 21408, False),
        (401, 20003, False),
        (400, 63016, False),
        (400, 21617, False),
        (404, 20404, False),
    ],
)
def test_twilio_errors_are_retryable_or_final(status: int, code: int, retryable: bool) -> None:
    """Rate limits and Twilio's own faults are retried; the recipient's, sender's or account's
    problems are final (docs/channels.md#twilio-errors)."""
    exc = TwilioRestException(status, "/2010-04-01/…", f"Unable to create record: Error {code}", code, "POST")
    error = delivery_error("sms", exc)
    assert error.retryable is retryable
    account = code in {20003, 21408}  # the account's own set-up: a final failure, not the input's
    assert isinstance(error, ChannelInputError) is (not retryable and not account)
    assert str(error).startswith(f"twilio 'sms': error {code} ({status}): Error {code}")


def test_an_error_names_twilios_reason_and_its_meaning() -> None:
    """The error names Twilio's code, status and message and what the code means; the problem-details shape maps the same way."""
    exc = TwilioRestException(
        400, "/x", "Unable to create record: Attempt to send to unsubscribed recipient", 21610, "POST"
    )
    assert str(delivery_error("sms", exc)) == (
        "twilio 'sms': error 21610 (400): Attempt to send to unsubscribed recipient"
        " — the recipient has unsubscribed (replied STOP)"
    )
    problem = TwilioServiceException("https://x", "Too Many Requests", 429, 20429, detail="slow down")
    assert delivery_error("sms", problem).retryable is True


def test_network_faults_are_retryable() -> None:
    """A refused connection, a timeout or a reset is worth another attempt."""
    for exc in (aiohttp.ClientConnectionError("refused"), TimeoutError(), ConnectionResetError("reset")):
        error = delivery_error("sms", exc)
        assert type(error) is ChannelDeliveryError and error.retryable is True
