"""Signed webhooks out, the pure rules (docs/webhooks.md): which notify_url an ask may name, the
body of each outcome (a sensitive answer never sent), the stable webhook id, the Standard
Webhooks signature (checked with the reference verifier) and the retry schedule."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from layby.ids import new_interaction_id
from layby_contracts.commands import Ask
from layby_contracts.errors import BadInput
from layby_contracts.events import (
    EXPIRY_ANSWERER,
    InteractionAnswered,
    InteractionAsked,
    InteractionRemoved,
)
from layby_domain.ask import Asker, AskFacts, WebhookPolicy, decide_ask
from layby_domain.webhooks import (
    blocked_address,
    body_of,
    check_addresses,
    check_notify_url,
    encode_body,
    parse_webhook_secrets,
    retry_delay,
    sign,
    webhook_id,
)
from layby_server.settings import SettingsError, load_settings
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit

NOW = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
KEY = b"0123456789abcdef0123456789abcdef"
SECRET = "whsec_" + base64.b64encode(KEY).decode()
PUBLIC = ("93.184.216.34",)


def facts(**policy: object) -> AskFacts:
    base: dict[str, object] = {"signers": frozenset({"alice"}), "addresses": PUBLIC}
    return AskFacts(
        asker=Asker("alice", "user"),
        now=NOW,
        new_group_id="g",
        default_timeout=60.0,
        token_key="k",
        webhooks=WebhookPolicy(**(base | policy)),  # type: ignore[arg-type]
    )


def ask(url: str) -> Ask:
    return Ask(token="t", interaction_id=new_interaction_id(), question="Ship it?", notify_url=url)


def refusal(url: str, **policy: object) -> str:
    with pytest.raises(BadInput) as raised:
        decide_ask(ask(url), facts(**policy))
    assert raised.value.field == "notify_url"
    return raised.value.message


def test_an_https_notify_url_to_a_public_host_is_recorded_on_the_asked_event() -> None:
    """A valid notify_url travels on the recorded question (the log is the source of truth)."""
    decision = decide_ask(ask("https://hooks.example.com/layby?x=1"), facts())
    assert decision.event.notify_url == "https://hooks.example.com/layby?x=1"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://hooks.example.com/", "notify_url must be an absolute https URL"),
        ("/relative/path", "notify_url must be an absolute https URL"),
        (
            "http://hooks.example.com/",
            "notify_url must use https (http is allowed only with LAYBY_WEBHOOKS_ALLOW_HTTP)",
        ),
        ("https://user:pw@hooks.example.com/", "notify_url must not carry credentials"),
        ("https://hooks.example.com/" + "a" * 2048, "notify_url must be at most 2048 characters"),
        ("https://hooks.example.com/a b", "notify_url must not contain whitespace or control characters"),
    ],
)
def test_a_notify_url_of_the_wrong_shape_is_refused_naming_the_field(url: str, message: str) -> None:
    """Only an absolute https URL without credentials, at most 2048 characters, is taken."""
    assert refusal(url) == message


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "[::1]",
        "[fe80::1]",
        "[fc00::1]",
        "[ff02::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:10.0.0.1]",
        "[::]",
    ],
)
def test_a_literal_address_inside_the_cluster_is_refused(host: str) -> None:
    """Private, loopback, link-local, multicast and reserved addresses (IPv4, IPv6 and IPv4-mapped)
    are refused unless LAYBY_WEBHOOKS_ALLOW_PRIVATE allows them."""
    message = refusal(f"https://{host}/hook", addresses=None)
    assert "resolves to a private, loopback, link-local, multicast or reserved address" in message


def test_a_name_that_resolves_inside_the_cluster_is_refused() -> None:
    """A host name is judged by every address it resolves to: one private address refuses it."""
    message = refusal("https://internal.example.com/", addresses=("93.184.216.34", "10.0.0.5"))
    assert message == (
        "notify_url host 'internal.example.com' resolves to a private, loopback, link-local, "
        "multicast or reserved address (allowed only with LAYBY_WEBHOOKS_ALLOW_PRIVATE)"
    )


def test_a_name_that_does_not_resolve_is_refused() -> None:
    """A notify_url whose host has no address is refused at ask time."""
    assert (
        refusal("https://nowhere.invalid/", addresses=None)
        == "notify_url host 'nowhere.invalid' does not resolve"
    )


def test_private_and_http_targets_are_taken_when_the_settings_allow_them() -> None:
    """LAYBY_WEBHOOKS_ALLOW_HTTP and LAYBY_WEBHOOKS_ALLOW_PRIVATE open loopback http receivers."""
    event = decide_ask(ask("http://127.0.0.1:9/hook"), facts(allow_http=True, allow_private=True)).event
    assert event.notify_url == "http://127.0.0.1:9/hook"


def test_an_identity_without_a_signing_secret_cannot_name_a_notify_url() -> None:
    """Every webhook is signed: an asker with no secret in LAYBY_WEBHOOKS_OUT_SECRETS is refused."""
    assert refusal("https://hooks.example.com/", signers=frozenset()) == (
        "notify_url needs a signing secret for identity 'alice': add it to LAYBY_WEBHOOKS_OUT_SECRETS "
        "(docs/webhooks.md#secrets)"
    )


def test_public_addresses_are_not_blocked() -> None:
    """Global unicast addresses (v4 and v6) are fine targets."""
    assert not blocked_address("93.184.216.34")
    assert not blocked_address("2606:2800:220:1:248:1893:25c8:1946")
    check_addresses("example.com", PUBLIC, allow_private=False)


def test_the_shape_check_returns_the_host() -> None:
    """The host is what the ask service resolves (brackets of an IPv6 literal removed)."""
    assert check_notify_url("https://Hooks.Example.com:8443/x") == "hooks.example.com"
    assert check_notify_url("https://[2001:db8::1]/x") == "2001:db8::1"


def asked(*, sensitive: bool = False) -> InteractionAsked:
    return interaction_asked(
        "ix1",
        NOW,
        group_id="g1",
        question="Ship it?",
        timeout_at=NOW + timedelta(hours=1),
        asked_by="alice",
        sensitive=sensitive,
        notify_url="https://hooks.example.com/",
    )


def answered(answer: object = "yes", *, by: str = "bob", sensitive: bool = False) -> InteractionAnswered:
    return InteractionAnswered(
        interaction_id="ix1",
        group_id="g1",
        answered_by=by,
        answered_at=NOW,
        answer=answer,
        via="inbox",
        sensitive=sensitive,
    )


def test_an_answered_outcome_carries_the_answer() -> None:
    """The answered body names the outcome, the answer, who answered and where."""
    body = msgspec.json.decode(encode_body(body_of(asked(), answered())))
    assert body == {
        "type": "interaction.answered",
        "timestamp": "2030-01-02T03:04:05Z",
        "data": {
            "interaction_id": "ix1",
            "group_id": "g1",
            "outcome": "answered",
            "resolved_at": "2030-01-02T03:04:05Z",
            "answer": "yes",
            "answered_by": "bob",
            "via": "inbox",
        },
    }


def test_a_sensitive_answer_is_never_sent() -> None:
    """A sensitive question's webhook says only that it was answered."""
    body = msgspec.json.decode(
        encode_body(body_of(asked(sensitive=True), answered("hunter2", sensitive=True)))
    )
    assert body["data"]["sensitive"] is True
    assert "answer" not in body["data"]
    assert b"hunter2" not in encode_body(body_of(asked(sensitive=True), answered("hunter2")))


def test_expiry_and_removal_outcomes_have_their_own_types() -> None:
    """An expiry (removal on timeout, or the expiry answer of a park) is ``expired``; any other
    removal is ``removed`` with its reason."""
    timeout = InteractionRemoved(interaction_id="ix1", group_id="g1", reason="timeout", removed_at=NOW)
    cancelled = InteractionRemoved(interaction_id="ix1", group_id="g1", reason="cancelled", removed_at=NOW)
    park_expiry = answered({"layby:interaction_expired": True}, by=EXPIRY_ANSWERER)
    assert body_of(asked(), timeout).type == "interaction.expired"
    assert body_of(asked(), park_expiry).type == "interaction.expired"
    assert body_of(asked(), park_expiry).data.answer is None
    removed = body_of(asked(), cancelled)
    assert (removed.type, removed.data.reason) == ("interaction.removed", "cancelled")


def test_the_signature_verifies_with_the_reference_implementation() -> None:
    """``webhook-signature`` is the Standard Webhooks v1 HMAC the reference verifier accepts."""
    body = encode_body(body_of(asked(), answered()))
    msg_id = webhook_id("ix1", 42)
    timestamp = int(datetime.now(UTC).timestamp())
    headers = {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(KEY, msg_id, timestamp, body),
    }
    assert Webhook(SECRET).verify(body, headers) == msgspec.json.decode(body)


def test_a_tampered_body_fails_the_reference_verifier() -> None:
    """The signature covers the body: a changed byte is rejected by the reference verifier."""
    body = encode_body(body_of(asked(), answered()))
    timestamp = int(datetime.now(UTC).timestamp())
    headers = {
        "webhook-id": "m",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(KEY, "m", timestamp, body),
    }
    with pytest.raises(WebhookVerificationError, match="No matching signature found"):
        Webhook(SECRET).verify(body.replace(b"yes", b"no!"), headers)


def test_the_webhook_id_is_stable_per_outcome() -> None:
    """Every retry and redelivery of one outcome carries the same id; another outcome, another."""
    assert webhook_id("ix1", 7) == webhook_id("ix1", 7) == "msg_ix1_7"
    assert webhook_id("ix1", 8) != webhook_id("ix1", 7)


def test_retries_back_off_exponentially_up_to_a_cap() -> None:
    """The pause doubles after each failed attempt and never exceeds the cap."""
    assert [retry_delay(n, base=1.0, cap=10.0) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_the_secrets_setting_is_checked_at_start_up_without_echoing_a_secret() -> None:
    """LAYBY_WEBHOOKS_OUT_SECRETS must map identities to whsec_ base64 keys; errors name the
    identity, never the secret."""
    assert parse_webhook_secrets(f'{{"alice": "{SECRET}"}}') == {"alice": KEY}
    with pytest.raises(SettingsError) as raised:
        load_settings({"LAYBY_WEBHOOKS_OUT_SECRETS": '{"bob": "nope-secret-value"}'})
    assert str(raised.value) == "LAYBY_WEBHOOKS_OUT_SECRETS secret of 'bob' must start with whsec_"


class _NoSend:
    """A client that fails the test if anything is sent."""

    def post(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("a refused address must not be sent to")


async def test_the_address_is_checked_again_before_each_send() -> None:
    """At send time the host is resolved and checked again (a name re-bound inside the cluster
    since the ask fails the attempt, which is recorded with the reason); nothing is sent."""
    from layby_domain.clock import SystemClock
    from layby_services.delivery.webhooks import WebhookSender

    settings = load_settings({"LAYBY_WEBHOOKS_OUT_SECRETS": f'{{"alice": "{SECRET}"}}'})
    sender = WebhookSender(None, settings, SystemClock(), _NoSend())  # type: ignore[arg-type]
    status, error = await sender._post("https://10.0.0.7/hook", "m", KEY, b"{}", 0)
    assert status is None
    assert error == (
        "notify_url host '10.0.0.7' resolves to a private, loopback, link-local, multicast or "
        "reserved address (allowed only with LAYBY_WEBHOOKS_ALLOW_PRIVATE)"
    )
